// The interpreter's view of one owner's global memory on the emu device: only that owner's
// allocations (and the IPC allocations it opened) resolve. Device addresses are the server's own
// addresses of the memory (EmuMemory's window), so a resolved range is used in place.
#pragma once

#include <atomic>
#include <cstdint>

#include "server/backends/emu/emu_memory.h"
#include "server/backends/emu/ptx/ptx_launch.h"

namespace gpupool::server::emu {

class OwnerDeviceMemory final : public ptx::DeviceMemory {
 public:
  OwnerDeviceMemory(const EmuMemory& memory, uint64_t owner) : memory_(memory), owner_(owner) {}
  void* translate(uint64_t addr, uint64_t len) override {
    return memory_.translate(addr, len, owner_);
  }
  bool span(uint64_t addr, uint64_t len, uint64_t* base, uint64_t* size, uint8_t** host,
            uint64_t* changeCount) override {
    if (!memory_.span(addr, len, owner_, base, size, changeCount)) return false;
    *host = reinterpret_cast<uint8_t*>(*base);
    return true;
  }
  const std::atomic<uint64_t>* changes() const override { return &memory_.changes(); }

 private:
  const EmuMemory& memory_;
  uint64_t owner_;
};

}  // namespace gpupool::server::emu
