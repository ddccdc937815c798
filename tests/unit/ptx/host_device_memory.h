// Test double for the emu backend's device memory: host allocations used directly as device
// addresses, with bounds checking through translate(), plus kernel-parameter packing helpers.
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "server/backends/emu/ptx/ptx_launch.h"
#include "server/backends/emu/ptx/ptx_module.h"

namespace gpupool::ptx::testing {

class HostDeviceMemory : public DeviceMemory {
 public:
  // Allocates zeroed device memory; the address is the host address (always above the windows).
  uint64_t allocate(uint64_t bytes);
  template <class T>
  uint64_t upload(const std::vector<T>& data) {
    uint64_t a = allocate(data.size() * sizeof(T));
    std::memcpy(reinterpret_cast<void*>(a), data.data(), data.size() * sizeof(T));
    return a;
  }
  template <class T>
  std::vector<T> download(uint64_t addr, size_t count) {
    std::vector<T> out(count);
    std::memcpy(out.data(), reinterpret_cast<void*>(addr), count * sizeof(T));
    return out;
  }
  void* translate(uint64_t addr, uint64_t len) override;
  // Places the module's globals and binds them (what the backend does after cuModuleLoad).
  void bindModuleGlobals(Module& module);

 private:
  std::mutex mutex_;
  std::map<uint64_t, std::unique_ptr<uint8_t[]>> blocks_;
  std::map<uint64_t, uint64_t> sizes_;
};

// Packs kernel arguments at the offsets the kernel's .param list defines.
class ParamBlock {
 public:
  explicit ParamBlock(const KernelInfo& kernel) : kernel_(kernel), bytes_(kernel.paramBytes) {}
  template <class T>
  ParamBlock& set(size_t index, const T& value) {
    std::memcpy(bytes_.data() + kernel_.params.at(index).offset, &value, sizeof(T));
    return *this;
  }
  const void* data() const { return bytes_.data(); }

 private:
  const KernelInfo& kernel_;
  std::vector<uint8_t> bytes_;
};

// Reads a whole file (PTX produced by nvcc at build time); empty on failure.
std::string readFile(const std::string& path);

}  // namespace gpupool::ptx::testing
