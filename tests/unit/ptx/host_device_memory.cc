#include "host_device_memory.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace gpupool::ptx::testing {

uint64_t HostDeviceMemory::allocate(uint64_t bytes) {
  // 256-byte alignment as cuMemAlloc guarantees; over-allocate to align manually.
  auto block = std::make_unique<uint8_t[]>(bytes + 256);
  std::memset(block.get(), 0, bytes + 256);
  uint64_t addr = (reinterpret_cast<uint64_t>(block.get()) + 255) & ~uint64_t{255};
  if (addr < kWindowsEnd)
    throw std::runtime_error("host allocation collides with the interpreter's windows");
  std::lock_guard lock(mutex_);
  blocks_[addr] = std::move(block);
  sizes_[addr] = bytes;
  return addr;
}

void* HostDeviceMemory::translate(uint64_t addr, uint64_t len) {
  std::lock_guard lock(mutex_);
  auto it = sizes_.upper_bound(addr);
  if (it == sizes_.begin()) return nullptr;
  --it;
  if (addr + len > it->first + it->second || addr + len < addr) return nullptr;
  return reinterpret_cast<void*>(addr);
}

void HostDeviceMemory::bindModuleGlobals(Module& module) {
  std::vector<uint64_t> addresses;
  for (const auto& g : module.globals()) addresses.push_back(allocate(g.size ? g.size : 1));
  module.bindGlobals(addresses);
  for (size_t i = 0; i < addresses.size(); ++i) {
    auto bytes = module.initialImage(i);
    std::memcpy(reinterpret_cast<void*>(addresses[i]), bytes.data(), bytes.size());
  }
}

std::string readFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return {};
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace gpupool::ptx::testing
