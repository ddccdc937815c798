// Public API of the PTX interpreter, part 2: running a kernel.
//
// Execution model: each block runs warp-at-a-time (32 lanes, per-lane PC, lowest (-call depth, PC)
// first reconvergence), warps of a block switch cooperatively at bar.sync, and blocks are spread
// over a pool of host threads (or run in order on the calling thread when workerThreads == 1).
//
// Address windows. Device addresses are plain 64-bit values; the interpreter reserves these ranges
// for generic addresses of its own memories, so the backend must not hand out device memory there:
//   [kSharedWindow, +4 GiB)  shared memory of the current block  (cvta.shared adds kSharedWindow)
//   [kLocalWindow,  +4 GiB)  local memory of the current thread  (cvta.local adds kLocalWindow)
//   [kParamWindow,  +4 GiB)  the kernel parameter block
//   [kFunctionWindow, +4 GiB) fake code addresses of .func symbols (function pointers)
//   [kHeapWindow,   +4 GiB)  device-side malloc() heap (LaunchServices::heap, one per context)
// Every other address is global memory and is resolved through DeviceMemory::translate.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "server/backends/emu/ptx/device_heap.h"
#include "server/backends/emu/ptx/ptx_module.h"
#include "server/backends/emu/ptx/texture_sampling.h"

namespace gpupool::ptx {

inline constexpr uint64_t kSharedWindow = 1ull << 32;
inline constexpr uint64_t kLocalWindow = 2ull << 32;
inline constexpr uint64_t kParamWindow = 3ull << 32;
inline constexpr uint64_t kFunctionWindow = 4ull << 32;
inline constexpr uint64_t kHeapWindow = 5ull << 32;
inline constexpr uint64_t kWindowsEnd = 6ull << 32;

// Device memory as the interpreter sees it.
class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  // Host pointer for [addr, addr+len) if it lies entirely inside one live allocation, else nullptr
  // (the interpreter then fails the launch with CUDA_ERROR_ILLEGAL_ADDRESS). Called concurrently
  // from the worker threads of one launch.
  virtual void* translate(uint64_t addr, uint64_t len) = 0;

  // Optional, for speed: a memory that can name the whole range an access resolves in lets the
  // interpreter keep that range and resolve later accesses inside it itself. span() gives the
  // range [*base, *base + *size) containing [addr, addr+len), whose bytes sit at host address
  // *host + (address - *base), and changes()'s value at that moment; the range stays good while
  // changes() returns that value. Both default to "no spans": translate() is asked every time.
  virtual bool span(uint64_t addr, uint64_t len, uint64_t* base, uint64_t* size, uint8_t** host,
                    uint64_t* changeCount) {
    (void)addr, (void)len, (void)base, (void)size, (void)host, (void)changeCount;
    return false;
  }
  virtual const std::atomic<uint64_t>* changes() const { return nullptr; }
};

struct LaunchConfig {
  uint32_t grid[3] = {1, 1, 1};
  uint32_t block[3] = {1, 1, 1};
  uint32_t dynamicSharedBytes = 0;
  // Shared memory per block allowed by cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES) opt-in;
  // 0 means the default 48 KiB limit. Capped at kMaxOptInSharedBytes.
  uint32_t maxSharedBytesOptIn = 0;
  // A cooperative launch runs every block at once, each on its own host thread, so a grid-wide
  // barrier can complete; gridWorkspace is the device address %envreg1/%envreg2 give the kernel
  // (cooperative groups' grid_workspace: {wsSize, barrier}); 0 for an ordinary launch until the
  // context's first cooperative launch (emu_context.cc).
  bool cooperative = false;
  uint64_t gridWorkspace = 0;
  // Thread-block clusters: the grid is a whole number of clusters of this shape, and the CTAs of
  // each run at once, each on its own host thread (cluster.h). {1, 1, 1}: every CTA is a cluster
  // of one. explicitCluster: the launch or the kernel asked for clusters (%is_explicit_cluster).
  uint32_t cluster[3] = {1, 1, 1};
  bool explicitCluster = false;
  uint32_t clusterCtas() const { return cluster[0] * cluster[1] * cluster[2]; }
};

inline constexpr uint32_t kDefaultSharedBytes = 48 * 1024;
// CTAs in one cluster: the portable limit, and the limit with NON_PORTABLE_CLUSTER_SIZE_ALLOWED
// (sm_90's).
inline constexpr uint32_t kPortableClusterCtas = 8;
inline constexpr uint32_t kMaxClusterCtas = 16;
inline constexpr uint32_t kMaxOptInSharedBytes = 227 * 1024;

struct LaunchServices {
  // Device printf output, one call per printf, in order per thread; calls are serialized.
  std::function<void(std::string_view)> printfSink;
  unsigned workerThreads = 0;  // 0 = std::thread::hardware_concurrency(); 1 = deterministic mode
  uint64_t stepBudget = 0;     // warp-instructions; 0 = unlimited, else CUDA_ERROR_LAUNCH_TIMEOUT
  // When set and true, the launch stops soon with CUDA_ERROR_LAUNCH_FAILED (its owner is gone).
  const std::atomic<bool>* cancel = nullptr;
  // The context's device-side malloc() heap; null = malloc() returns NULL. Not owned.
  DeviceHeap* heap = nullptr;
  // The context's texture and surface objects; null = tex/suld/sust fault. Not owned.
  const TextureTable* textures = nullptr;
  // Runs every instruction through the interpreter's generic path, not the routines specialized
  // for common forms at load (fast_steps.h): the tests compare the two.
  bool genericPathOnly = false;
  // cudaGraphSetConditional(handle, value) from a kernel: false when the handle is not the
  // context's (the launch then fails). Null: every call fails.
  std::function<bool(uint64_t, uint32_t)> setConditional;
};

struct LaunchResult {
  // On failure the message names the kernel, PC, lane, instruction text, address...
  Status status;
  uint64_t warpSteps = 0;    // warp-instructions executed
  uint64_t threadSteps = 0;  // thread-instructions executed (active lanes summed)
};

// Validates the config as a GPU would (zero dims, block > 1024 threads or > maxThreadsPerBlock,
// block.z > 64, grid.y/z > 65535, shared static+dynamic over the limit ->
// CUDA_ERROR_INVALID_VALUE), then runs the kernel to completion. Requires bindGlobals() when the
// module has globals. Errors: out-of-bounds -> CUDA_ERROR_ILLEGAL_ADDRESS; __assertfail ->
// CUDA_ERROR_ASSERT; trap -> CUDA_ERROR_LAUNCH_FAILED; barrier/warp-sync deadlock ->
// CUDA_ERROR_LAUNCH_FAILED with stuck PCs; step budget exceeded -> CUDA_ERROR_LAUNCH_TIMEOUT. Never
// throws.
LaunchResult launch(const Module& module, const KernelInfo& kernel, const LaunchConfig& config,
                    const void* paramBlock, DeviceMemory& memory, const LaunchServices& services);

}  // namespace gpupool::ptx
