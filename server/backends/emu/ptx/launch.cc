// Launch validation (what a GPU rejects) and distribution of blocks over worker threads.
#include <algorithm>
#include <cstring>
#include <thread>

#include "cluster.h"
#include "interpreter.h"
#include "ptx_launch.h"

namespace gpupool::ptx {
namespace {

std::string validate(const ModuleImage& img, size_t kernelIndex, const LaunchConfig& c,
                     const void* params) {
  const KernelInfo& k = img.kernels[kernelIndex];
  for (int i = 0; i < 3; ++i)
    if (c.grid[i] == 0 || c.block[i] == 0) return "grid and block dimensions must be non-zero";
  if (c.grid[0] > 0x7fffffffu || c.grid[1] > 65535 || c.grid[2] > 65535)
    return "grid dimension too large";
  if (c.block[0] > 1024 || c.block[1] > 1024 || c.block[2] > 64) return "block dimension too large";
  uint64_t threads = uint64_t{c.block[0]} * c.block[1] * c.block[2];
  if (threads > 1024 || threads > k.maxThreadsPerBlock)
    return "block of " + std::to_string(threads) + " threads exceeds the limit of " +
           std::to_string(std::min<uint32_t>(1024, k.maxThreadsPerBlock));
  uint64_t limit = c.maxSharedBytesOptIn
                       ? std::min<uint64_t>(std::max(c.maxSharedBytesOptIn, kDefaultSharedBytes),
                                            kMaxOptInSharedBytes)
                       : kDefaultSharedBytes;
  uint64_t shared = uint64_t{k.staticSharedBytes} + c.dynamicSharedBytes;
  if (shared > limit)
    return "shared memory " + std::to_string(shared) + " bytes exceeds the limit of " +
           std::to_string(limit);
  for (int i = 0; i < 3; ++i)
    if (c.cluster[i] == 0 || c.grid[i] % c.cluster[i] != 0)
      return "the grid is not a whole number of clusters";
  if (c.clusterCtas() > kMaxClusterCtas) return "cluster larger than 16 CTAs";
  if (k.paramBytes && !params) return "kernel parameters missing";
  if (!img.globals.empty() && !img.bound) return "module globals were not bound";
  return {};
}

}  // namespace

LaunchResult launch(const Module& module, const KernelInfo& kernel, const LaunchConfig& config,
                    const void* paramBlock, DeviceMemory& memory, const LaunchServices& services) {
  LaunchResult result;
  try {
    const ModuleImage& img = module.image();
    size_t ki = 0;
    while (ki < img.kernels.size() && &img.kernels[ki] != &kernel &&
           img.kernels[ki].name != kernel.name)
      ++ki;
    if (ki == img.kernels.size())
      return {Status::error(CUDA_ERROR_INVALID_HANDLE,
                            "kernel " + kernel.name + " is not in this module")};
    std::string bad = validate(img, ki, config, paramBlock);
    if (!bad.empty()) return {Status::error(CUDA_ERROR_INVALID_VALUE, bad)};

    const KernelInfo& k = img.kernels[ki];
    std::vector<uint8_t> params(k.paramBytes);
    if (k.paramBytes) std::memcpy(params.data(), paramBlock, k.paramBytes);
    uint64_t blocks = uint64_t{config.grid[0]} * config.grid[1] * config.grid[2];
    // hardware_concurrency() reads sysfs on every call: ask once per process.
    static const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    unsigned workers = services.workerThreads ? services.workerThreads : cores;
    // Every block of a cooperative launch must be resident at once (the caller has checked that
    // the grid fits the device): one host thread each.
    if (config.cooperative) workers = static_cast<unsigned>(blocks);
    workers = static_cast<unsigned>(std::min<uint64_t>(workers, blocks));

    LaunchContext ctx{img,
                      k,
                      img.kernelFunction[ki],
                      img.kernelSharedOffsets[ki],
                      img.kernelDynamicSharedOffset[ki] + config.dynamicSharedBytes,
                      config,
                      params.data(),
                      memory,
                      services,
                      workers};
    std::mutex failureMutex;
    bool haveFailure = false;
    Status failure;
    std::atomic<uint64_t> nextBlock{0};
    // Clusters: groups of `ctas` workers, each group running its clusters one after another,
    // every CTA of one at once (worker w is rank w % ctas of group w / ctas).
    const uint32_t ctas = config.clusterCtas();
    std::vector<std::unique_ptr<ClusterGroup>> groups;
    if (ctas > 1) {
      const uint64_t clusters = blocks / ctas;
      const uint64_t groupCount = std::clamp<uint64_t>(workers / ctas, 1, clusters);
      for (uint64_t g = 0; g < groupCount; ++g)
        groups.push_back(std::make_unique<ClusterGroup>(
            ctas, config.block[0] * config.block[1] * config.block[2]));
      workers = static_cast<unsigned>(groupCount * ctas);
    }
    auto stop = [&] { return ctx.stopped(); };
    // The linear index of the CTA of rank `rank` in cluster `cluster` (clusters in grid order).
    auto clusterBlock = [&](uint64_t cluster, uint32_t rank) {
      const auto& g = config.grid;
      const auto& c = config.cluster;
      const uint64_t nx = g[0] / c[0], ny = g[1] / c[1];
      const uint64_t x = (cluster % nx) * c[0] + rank % c[0];
      const uint64_t y = ((cluster / nx) % ny) * c[1] + (rank / c[0]) % c[1];
      const uint64_t z = (cluster / (nx * ny)) * c[2] + rank / (c[0] * c[1]);
      return x + g[0] * (y + uint64_t{g[1]} * z);
    };
    auto work = [&](unsigned worker) {
      BlockWorker blockWorker(ctx, worker);
      ClusterGroup* group = ctas > 1 ? groups[worker / ctas].get() : nullptr;
      uint64_t nextCluster = worker / ctas;
      while (!ctx.failed.load(std::memory_order_relaxed)) {
        uint64_t b = 0;
        if (group) {
          if (nextCluster >= blocks / ctas) return;
          b = clusterBlock(nextCluster, worker % ctas);
          nextCluster += groups.size();
        } else {
          b = nextBlock.fetch_add(1);
          if (b >= blocks) return;
        }
        try {
          if (!group) {
            blockWorker.run(b);
          } else if (!blockWorker.runInCluster(b, *group, stop)) {
            return;
          }
        } catch (const LaunchFault& f) {
          std::lock_guard lock(failureMutex);
          if (!haveFailure && !f.status.message.empty()) {
            haveFailure = true;
            failure = f.status;
          }
          ctx.failed = true;
        } catch (const std::exception& e) {
          std::lock_guard lock(failureMutex);
          if (!haveFailure) {
            haveFailure = true;
            failure = Status::error(CUDA_ERROR_LAUNCH_FAILED,
                                    std::string("interpreter error: ") + e.what());
          }
          ctx.failed = true;
        }
      }
    };
    if (workers <= 1) {
      work(0);
    } else {
      std::vector<std::thread> pool;
      for (unsigned w = 0; w < workers; ++w) pool.emplace_back(work, w);
      for (auto& t : pool) t.join();
    }
    result.warpSteps = ctx.warpSteps.load();
    result.threadSteps = ctx.threadSteps.load();
    if (haveFailure) {
      result.status = std::move(failure);
    }
  } catch (const std::exception& e) {
    result.status =
        Status::error(CUDA_ERROR_LAUNCH_FAILED, std::string("interpreter error: ") + e.what());
  }
  return result;
}

}  // namespace gpupool::ptx
