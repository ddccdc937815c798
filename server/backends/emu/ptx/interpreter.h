// Execution core (internal): runs the thread blocks of a launch to completion. launch.cpp owns
// validation and distributes blocks over worker threads.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ir.h"
#include "ptx_launch.h"

namespace gpupool::ptx {

// State shared by all blocks of one launch.
struct LaunchContext {
  LaunchContext(const ModuleImage& image, const KernelInfo& kernel, uint32_t function,
                const std::vector<uint32_t>& sharedOffsets, uint32_t sharedBytes,
                const LaunchConfig& config, const uint8_t* params, DeviceMemory& memory,
                const LaunchServices& services, unsigned workers)
      : image(image),
        kernel(kernel),
        function(function),
        sharedOffsets(sharedOffsets),
        sharedBytes(sharedBytes),
        config(config),
        params(params),
        memory(memory),
        services(services),
        workers(workers),
        start(std::chrono::steady_clock::now()) {}
  const ModuleImage& image;
  const KernelInfo& kernel;
  uint32_t function = 0;                       // entry function index
  const std::vector<uint32_t>& sharedOffsets;  // per shared variable, for this kernel
  uint32_t sharedBytes = 0;                    // reserved + static + dynamic
  const LaunchConfig& config;
  const uint8_t* params = nullptr;
  DeviceMemory& memory;
  const LaunchServices& services;
  unsigned workers = 1;
  std::chrono::steady_clock::time_point start;
  std::atomic<bool> failed{false};
  // The launch failed in another block, or its owner is gone (LaunchServices::cancel).
  bool stopped() const {
    return failed.load(std::memory_order_relaxed) ||
           (services.cancel && services.cancel->load(std::memory_order_relaxed));
  }
  std::atomic<uint64_t> warpSteps{0};
  std::atomic<uint64_t> threadSteps{0};
  std::mutex printfMutex;
};

// A launch failure raised while executing a block; launch() returns its status. An empty message
// marks a block that stopped because another one failed first.
struct LaunchFault {
  Status status;
};

class ClusterGroup;
namespace execution {
class BlockRunner;
}

// Runs blocks of one launch on one worker thread, one after another in the same storage.
class BlockWorker {
 public:
  BlockWorker(LaunchContext& ctx, unsigned worker);
  ~BlockWorker();
  BlockWorker(const BlockWorker&) = delete;
  BlockWorker& operator=(const BlockWorker&) = delete;
  // Runs block `blockIndex` (linear). Throws LaunchFault on a kernel error.
  void run(uint64_t blockIndex);
  // Runs block `blockIndex` as one CTA of `group`'s next cluster, alongside the group's other
  // workers: false when the launch stopped before the cluster could start.
  bool runInCluster(uint64_t blockIndex, ClusterGroup& group, const std::function<bool()>& stop);

 private:
  std::unique_ptr<execution::BlockRunner> runner_;
};

}  // namespace gpupool::ptx
