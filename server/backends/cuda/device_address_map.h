// The device address ranges one context may touch: its own allocations and the globals of the
// modules it loaded. The real driver does not check that an address belongs to the calling
// context (every tenant lives in one server process), so the cuda backend checks every address
// against this map before it reaches the driver.
#pragma once

#include <cstdint>
#include <map>
#include <optional>

namespace gpupool::server {

class DeviceAddressMap {
 public:
  // Who a range belongs to: kAllocation for memAlloc, otherwise the id of the module that owns a
  // global.
  static constexpr uint64_t kAllocation = 0;
  // Runs of adjacent read-write cuMemMap mappings (cuda_vmm.cc).
  static constexpr uint64_t kVmmMapping = ~uint64_t{0};

  struct Range {
    uint64_t base = 0;
    uint64_t bytes = 0;
    uint64_t owner = kAllocation;
  };

  // Records [base, base+bytes). Ranges never overlap (the driver hands out disjoint memory); adding
  // a range with the same base again (a global looked up twice) replaces it.
  void add(uint64_t base, uint64_t bytes, uint64_t owner);

  // Removes the allocation that starts exactly at `base`; returns its size, or nullopt when there
  // is none (an interior pointer, a global, or a foreign address).
  std::optional<uint64_t> removeAllocation(uint64_t base);

  // Removes the range that starts exactly at `base`, whoever owns it.
  void remove(uint64_t base) { ranges_.erase(base); }

  // Removes every range owned by `owner` (a module being unloaded).
  void removeOwnedBy(uint64_t owner);

  // The range that contains `address`, if any.
  std::optional<Range> find(uint64_t address) const;

  // True when [address, address+bytes) lies inside a single known range. Zero bytes is true only
  // for an address inside a range.
  bool covers(uint64_t address, uint64_t bytes) const;

  // All ranges, in address order (used to release allocations on teardown).
  const std::map<uint64_t, Range>& ranges() const { return ranges_; }

 private:
  std::map<uint64_t, Range> ranges_;  // by base
};

}  // namespace gpupool::server
