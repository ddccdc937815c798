// The `emu` backend: CPU devices whose memory is server RAM and whose kernels are the module's PTX,
// run by the interpreter in server/backends/emu/ptx.
#pragma once

#include <memory>

#include "server/backend.h"
#include "server/backends/emu/emu_device_profile.h"
#include "transport/pinned_memory.h"

namespace gpupool::server::emu {

struct EmuBackendOptions {
  unsigned devices = 1;
  EmuDeviceOptions device;
  // Interpreter worker threads per launch (0 = one per core, 1 = deterministic single-thread mode).
  unsigned workerThreads = 0;
  // Every instruction through the interpreter's generic code
  // (ptx::LaunchServices::genericPathOnly).
  bool genericPathOnly = false;
  // Warp-instructions a launch may run before it fails with CUDA_ERROR_LAUNCH_TIMEOUT (0 = no
  // limit).
  uint64_t stepBudget = 0;
  // Which device-address window this server uses (0..EmuMemory::kSlots-1); servers that one
  // client uses together need different slots.
  unsigned addressSlot = 0;
  // Where device allocations are noted as private pinned ranges, so an RDMA connection registers
  // each once (none: not noted). Must outlive the backend.
  transport::PinnedMemory* pinnedMemory = nullptr;
};

// Throws std::runtime_error when the device memory cannot be reserved.
std::unique_ptr<Backend> makeEmuBackend(const EmuBackendOptions& options);

}  // namespace gpupool::server::emu
