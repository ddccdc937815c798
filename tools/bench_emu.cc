#include "tools/bench_emu.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "server/backends/emu/emu_memory.h"
#include "server/backends/emu/owner_device_memory.h"
#include "server/backends/emu/ptx/ptx_launch.h"
#include "server/backends/emu/ptx/ptx_module.h"

// The PTX of tools/emu_bench/emu_bench_kernels.cu, embedded at build time.
extern const char kEmuBenchKernelsPtx[];

namespace gpupool::tools {
namespace {

constexpr uint64_t kOwner = 1;  // the one "context" that owns the bench's allocations
constexpr unsigned kAddressSlot = 7;
constexpr unsigned kMatmulN = 192;
constexpr unsigned kTile = 16;
constexpr unsigned kBlock = 256;

// The emu device memory the bench's buffers live in, seen by the interpreter as a context's
// launches see it.
class BenchMemory {
 public:
  explicit BenchMemory(uint64_t capacity)
      : memory_(kAddressSlot, 0, capacity), view_(memory_, kOwner) {}
  template <typename T>
  T* allocate(size_t count, uint64_t* address) {
    *address = memory_.allocate(count * sizeof(T), kOwner);
    if (!*address) throw std::runtime_error("the emu device has no room for the bench's buffers");
    return static_cast<T*>(memory_.translate(*address, count * sizeof(T), kOwner));
  }
  ptx::DeviceMemory& view() { return view_; }

 private:
  server::emu::EmuMemory memory_;
  server::emu::OwnerDeviceMemory view_;
};

// A kernel's parameter block, each argument at the offset the kernel's .param list gives it.
class Arguments {
 public:
  explicit Arguments(const ptx::KernelInfo& kernel) : kernel_(kernel), bytes_(kernel.paramBytes) {}
  template <typename T>
  Arguments& set(size_t index, T value) {
    if (index >= kernel_.params.size()) throw std::runtime_error(kernel_.name + ": no such param");
    std::memcpy(bytes_.data() + kernel_.params[index].offset, &value, sizeof value);
    return *this;
  }
  const void* data() const { return bytes_.data(); }

 private:
  const ptx::KernelInfo& kernel_;
  std::vector<uint8_t> bytes_;
};

struct Run {
  double seconds = 0;
  uint64_t threadSteps = 0;
};

// One interpreter run: `threads` worker threads; with `genericPath`, every instruction through
// the interpreter's generic path (no fast steps): the baseline the ratios compare with.
struct Mode {
  unsigned threads = 1;
  bool genericPath = false;
};

Run launchTimed(const ptx::Module& module, const ptx::KernelInfo& kernel,
                const ptx::LaunchConfig& config, const Arguments& arguments, BenchMemory& memory,
                Mode mode) {
  ptx::LaunchServices services;
  services.workerThreads = mode.threads;
  services.genericPathOnly = mode.genericPath;
  auto started = std::chrono::steady_clock::now();
  ptx::LaunchResult result =
      ptx::launch(module, kernel, config, arguments.data(), memory.view(), services);
  Run run{std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(),
          result.threadSteps};
  if (!result.status.ok()) {
    throw std::runtime_error(kernel.name + " failed on the emu: " + result.status.message);
  }
  return run;
}

const ptx::KernelInfo& kernelOf(const ptx::Module& module, const char* name) {
  const ptx::KernelInfo* kernel = module.findKernel(name);
  if (!kernel) throw std::runtime_error(std::string("the bench's PTX has no kernel ") + name);
  return *kernel;
}

// Runs `once(mode)` for one and two interpreter threads, and for one thread on the generic path;
// the rates, and the thread-instruction count (the same for all, or the kernel would not be
// deterministic).
json rates(const std::function<Run(Mode)>& once, uint64_t* threadSteps) {
  json out;
  const std::pair<const char*, Mode> modes[] = {
      {"threads_1", {1, false}}, {"threads_2", {2, false}}, {"generic_path_threads_1", {1, true}}};
  for (const auto& [name, mode] : modes) {
    Run run = once(mode);
    *threadSteps = run.threadSteps;
    out[name] = static_cast<double>(run.threadSteps) / run.seconds;
  }
  return out;
}

json matmul(const ptx::Module& module, BenchMemory& memory, json* settings) {
  const unsigned n = kMatmulN;
  uint64_t a = 0, b = 0, c = 0;
  float* hostA = memory.allocate<float>(n * n, &a);
  float* hostB = memory.allocate<float>(n * n, &b);
  float* hostC = memory.allocate<float>(n * n, &c);
  // Small integers: every product and sum is exact in float, so the check is exact too.
  for (unsigned i = 0; i < n * n; ++i) {
    hostA[i] = static_cast<float>(static_cast<int>(i % 7) - 3);
    hostB[i] = static_cast<float>(static_cast<int>(i % 5) - 2);
  }
  const ptx::KernelInfo& kernel = kernelOf(module, "matmulTiled");
  Arguments arguments(kernel);
  arguments.set(0, a).set(1, b).set(2, c).set(3, static_cast<int>(n));
  ptx::LaunchConfig config;
  config.grid[0] = config.grid[1] = n / kTile;
  config.block[0] = config.block[1] = kTile;
  uint64_t steps = 0;
  json out = rates(
      [&](Mode mode) {
        std::memset(hostC, 0, n * n * sizeof(float));
        Run run = launchTimed(module, kernel, config, arguments, memory, mode);
        for (unsigned row = 0; row < n; ++row) {
          for (unsigned col = 0; col < n; ++col) {
            float want = 0;
            for (unsigned k = 0; k < n; ++k) want += hostA[row * n + k] * hostB[k * n + col];
            if (hostC[row * n + col] != want) throw std::runtime_error("matmul: wrong result");
          }
        }
        return run;
      },
      &steps);
  (*settings)["matmul"] = {{"n", n}, {"thread_instructions", steps}};
  return out;
}

json vectorAdd(const ptx::Module& module, BenchMemory& memory, bool quick, json* settings) {
  const unsigned n = quick ? 4u << 20 : 64u << 20;
  uint64_t a = 0, b = 0, c = 0;
  float* hostA = memory.allocate<float>(n, &a);
  float* hostB = memory.allocate<float>(n, &b);
  float* hostC = memory.allocate<float>(n, &c);
  for (unsigned i = 0; i < n; ++i) {
    hostA[i] = static_cast<float>(i % 1000);
    hostB[i] = static_cast<float>(2 * (i % 1000));
  }
  const ptx::KernelInfo& kernel = kernelOf(module, "vectorAdd");
  Arguments arguments(kernel);
  arguments.set(0, a).set(1, b).set(2, c).set(3, n);
  ptx::LaunchConfig config;
  config.grid[0] = (n + kBlock - 1) / kBlock;
  config.block[0] = kBlock;
  uint64_t steps = 0;
  json out = rates(
      [&](Mode mode) {
        std::memset(hostC, 0, static_cast<size_t>(n) * sizeof(float));
        Run run = launchTimed(module, kernel, config, arguments, memory, mode);
        for (unsigned i = 0; i < n; ++i) {
          if (hostC[i] != static_cast<float>(3 * (i % 1000))) {
            throw std::runtime_error("vector_add: wrong result");
          }
        }
        return run;
      },
      &steps);
  (*settings)["vector_add"] = {{"elements", n}, {"thread_instructions", steps}};
  return out;
}

json divergentReduce(const ptx::Module& module, BenchMemory& memory, bool quick, json* settings) {
  const unsigned n = quick ? 1u << 20 : 16u << 20;
  const unsigned blocks = n / kBlock;
  uint64_t in = 0, out = 0;
  int* hostIn = memory.allocate<int>(n, &in);
  int* hostOut = memory.allocate<int>(blocks, &out);
  for (unsigned i = 0; i < n; ++i) hostIn[i] = static_cast<int>(i % 13) - 6;
  const ptx::KernelInfo& kernel = kernelOf(module, "divergentReduce");
  Arguments arguments(kernel);
  arguments.set(0, in).set(1, out);
  ptx::LaunchConfig config;
  config.grid[0] = blocks;
  config.block[0] = kBlock;
  uint64_t steps = 0;
  json result = rates(
      [&](Mode mode) {
        std::memset(hostOut, 0, blocks * sizeof(int));
        Run run = launchTimed(module, kernel, config, arguments, memory, mode);
        for (unsigned block = 0; block < blocks; ++block) {
          int want = 0;
          for (unsigned i = 0; i < kBlock; ++i) want += hostIn[block * kBlock + i];
          if (hostOut[block] != want) throw std::runtime_error("divergent_reduce: wrong result");
        }
        return run;
      },
      &steps);
  (*settings)["divergent_reduce"] = {{"elements", n}, {"thread_instructions", steps}};
  return result;
}

}  // namespace

json measureEmu(bool quick, json* settings) {
  if (kEmuBenchKernelsPtx[0] == '\0') {
    throw std::runtime_error(
        "this gpupool was built without nvcc, so it has no PTX to run: "
        "rebuild with the CUDA toolkit installed (CUDA_HOME)");
  }
  auto module = ptx::Module::load(kEmuBenchKernelsPtx);
  if (!module.ok()) {
    throw std::runtime_error("the bench's PTX does not load on the emu: " +
                             module.status().message);
  }
  // Room for the largest kernel's buffers (vector add: three arrays of 64 Mi floats); the emu
  // commits memory only where it is touched.
  BenchMemory memory(1ull << 30);
  json emu;
  emu["matmul"] = matmul(**module, memory, settings);
  emu["vector_add"] = vectorAdd(**module, memory, quick, settings);
  emu["divergent_reduce"] = divergentReduce(**module, memory, quick, settings);
  return emu;
}

void printEmu(const json& emu, const json& settings, const json& ratios) {
  std::printf("emu device interpreter, thread-instructions per second (M/s):\n");
  std::printf("  %-18s %10s %10s %14s %9s %20s\n", "kernel", "1 thread", "2 threads",
              "generic path", "ratio", "thread-instructions");
  for (const char* kernel : {"matmul", "vector_add", "divergent_reduce"}) {
    std::printf(
        "  %-18s %10.1f %10.1f %14.1f %8.2fx %20llu\n", kernel,
        emu[kernel]["threads_1"].get<double>() / 1e6, emu[kernel]["threads_2"].get<double>() / 1e6,
        emu[kernel]["generic_path_threads_1"].get<double>() / 1e6,
        ratios["emu_" + std::string(kernel) + "_vs_generic_path"].get<double>(),
        static_cast<unsigned long long>(settings[kernel]["thread_instructions"].get<uint64_t>()));
  }
  std::printf(
      "  (generic path: one thread, every instruction through the interpreter's generic\n"
      "   code instead of the routines specialized at load; ratio: 1 thread / generic)\n");
}

}  // namespace gpupool::tools
