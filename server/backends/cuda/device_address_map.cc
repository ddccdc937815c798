#include "server/backends/cuda/device_address_map.h"

#include <iterator>

namespace gpupool::server {

void DeviceAddressMap::add(uint64_t base, uint64_t bytes, uint64_t owner) {
  ranges_[base] = Range{base, bytes, owner};
}

std::optional<uint64_t> DeviceAddressMap::removeAllocation(uint64_t base) {
  auto it = ranges_.find(base);
  if (it == ranges_.end() || it->second.owner != kAllocation) return std::nullopt;
  uint64_t bytes = it->second.bytes;
  ranges_.erase(it);
  return bytes;
}

void DeviceAddressMap::removeOwnedBy(uint64_t owner) {
  std::erase_if(ranges_, [owner](const auto& entry) { return entry.second.owner == owner; });
}

std::optional<DeviceAddressMap::Range> DeviceAddressMap::find(uint64_t address) const {
  auto it = ranges_.upper_bound(address);
  if (it == ranges_.begin()) return std::nullopt;
  const Range& range = std::prev(it)->second;
  // Written as a difference so that a range reaching the top of the address space cannot overflow.
  if (address - range.base >= range.bytes) return std::nullopt;
  return range;
}

bool DeviceAddressMap::covers(uint64_t address, uint64_t bytes) const {
  auto range = find(address);
  if (!range) return false;
  return bytes <= range->bytes - (address - range->base);
}

}  // namespace gpupool::server
