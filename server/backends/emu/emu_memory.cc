#include "server/backends/emu/emu_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace gpupool::server::emu {
namespace {
constexpr uint64_t kPage = 4096;
uint64_t roundUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
}  // namespace

EmuMemory::EmuMemory(unsigned slot, unsigned deviceIndex, uint64_t capacity,
                     transport::PinnedMemory* pinned)
    : capacity_(capacity), pinned_(pinned) {
  // Twice the capacity in address space leaves room for fragmentation.
  window_ = roundUp(std::max<uint64_t>(capacity * 2, 1 << 30), kPage);
  if (window_ > kWindowStride) window_ = kWindowStride;
  void* want = reinterpret_cast<void*>(windowOf(slot, deviceIndex));
  void* got = mmap(want, window_, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
  if (got == MAP_FAILED) {
    throw std::runtime_error("cannot reserve device address space for emu device " +
                             std::to_string(deviceIndex) + " in address slot " +
                             std::to_string(slot) + ": " + std::strerror(errno));
  }
  base_ = reinterpret_cast<uint64_t>(got);
  free_[base_] = window_;
}

EmuMemory::~EmuMemory() {
  if (pinned_) {
    for (auto& [address, a] : allocations_) pinned_->forget(reinterpret_cast<void*>(address));
    for (auto& [address, m] : mappings_) pinned_->forget(reinterpret_cast<void*>(address));
  }
  for (auto& [handle, p] : physical_) close(p.fd);
  munmap(reinterpret_cast<void*>(base_), window_);
}

uint64_t EmuMemory::allocate(uint64_t bytes, uint64_t owner) {
  if (bytes == 0) return 0;
  if (bytes > capacity_) return 0;
  uint64_t reserved = roundUp(bytes, kPage);
  auto lock = lockForChange();
  if (used_ + reserved > capacity_) return 0;
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < reserved) continue;
    uint64_t address = it->first;
    takeFreeLocked(it, address, reserved);
    if (mprotect(reinterpret_cast<void*>(address), reserved, PROT_READ | PROT_WRITE) != 0) {
      giveFreeLocked(address, reserved);
      return 0;
    }
    allocations_[address] = {bytes, reserved, owner, nextGeneration_++, false, {}};
    used_ += reserved;
    chargeLocked(owner, static_cast<int64_t>(reserved));
    // An RDMA connection may then register it once and keep it for local access only: its
    // copies read into it and write from it straight, and no key to it ever reaches the peer.
    if (pinned_) {
      pinned_->note(reinterpret_cast<void*>(address), reserved, transport::PeerAccess::kNone);
    }
    return address;
  }
  return 0;
}

bool EmuMemory::release(uint64_t address, uint64_t owner) {
  auto lock = lockForChange();
  auto it = allocations_.find(address);
  if (it == allocations_.end() || it->second.owner != owner || it->second.ownerFreed) return false;
  chargeLocked(owner, -static_cast<int64_t>(it->second.reserved));
  if (!it->second.openers.empty()) {
    // Other contexts opened it (CUDA IPC): it stays theirs until the last one closes it.
    it->second.ownerFreed = true;
    return true;
  }
  freeLocked(it);
  return true;
}

void EmuMemory::freeLocked(std::map<uint64_t, Allocation>::iterator it) {
  uint64_t address = it->first;
  uint64_t reserved = it->second.reserved;
  allocations_.erase(it);
  used_ -= reserved;
  // Before the range can go to another owner: no connection hands out this registration again, and
  // each deregisters it at its next frame.
  if (pinned_) pinned_->forget(reinterpret_cast<void*>(address));
  // Drop the pages and make the range unreachable again.
  madvise(reinterpret_cast<void*>(address), reserved, MADV_DONTNEED);
  mprotect(reinterpret_cast<void*>(address), reserved, PROT_NONE);
  giveFreeLocked(address, reserved);
}

bool EmuMemory::exportable(uint64_t address, uint64_t owner, uint64_t* bytes,
                           uint64_t* generation) const {
  std::shared_lock lock(mutex_);
  auto it = allocations_.find(address);
  if (it == allocations_.end() || it->second.owner != owner || it->second.ownerFreed) return false;
  *bytes = it->second.size;
  *generation = it->second.generation;
  return true;
}

bool EmuMemory::openShared(uint64_t address, uint64_t generation, uint64_t opener) {
  auto lock = lockForChange();
  auto it = allocations_.find(address);
  if (it == allocations_.end() || it->second.generation != generation || it->second.ownerFreed ||
      it->second.owner == opener) {
    return false;
  }
  ++it->second.openers[opener];
  return true;
}

bool EmuMemory::closeShared(uint64_t address, uint64_t opener) {
  auto lock = lockForChange();
  auto it = allocations_.find(address);
  if (it == allocations_.end()) return false;
  auto open = it->second.openers.find(opener);
  if (open == it->second.openers.end()) return false;
  if (--open->second == 0) it->second.openers.erase(open);
  if (it->second.openers.empty() && it->second.ownerFreed) freeLocked(it);
  return true;
}

void EmuMemory::takeFreeLocked(std::map<uint64_t, uint64_t>::iterator block, uint64_t address,
                               uint64_t bytes) {
  uint64_t start = block->first, size = block->second;
  free_.erase(block);
  if (address > start) free_[start] = address - start;
  if (address + bytes < start + size) free_[address + bytes] = start + size - address - bytes;
}

void EmuMemory::giveFreeLocked(uint64_t address, uint64_t bytes) {
  auto [pos, inserted] = free_.emplace(address, bytes);
  (void)inserted;
  auto next = std::next(pos);
  if (next != free_.end() && pos->first + pos->second == next->first) {
    pos->second += next->second;
    free_.erase(next);
  }
  if (pos != free_.begin()) {
    auto prev = std::prev(pos);
    if (prev->first + prev->second == pos->first) {
      prev->second += pos->second;
      free_.erase(pos);
    }
  }
}

uint64_t EmuMemory::releaseAll(uint64_t owner) {
  uint64_t bytes = 0;
  auto lock = lockForChange();
  for (auto it = allocations_.begin(); it != allocations_.end();) {
    auto next = std::next(it);
    Allocation& a = it->second;
    a.openers.erase(owner);  // its IPC opens end with it
    if (a.owner == owner && !a.ownerFreed) {
      bytes += a.reserved;
      chargeLocked(owner, -static_cast<int64_t>(a.reserved));
      a.ownerFreed = true;
    }
    if (a.ownerFreed && a.openers.empty()) freeLocked(it);
    it = next;
  }
  for (auto& [handle, p] : physical_) {
    if (p.owner == owner) bytes += p.size;
  }
  releaseVmmLocked(owner);
  owners_.erase(owner);  // the owner (a context) is gone: nothing more to count for it
  return bytes;
}

void* EmuMemory::translate(uint64_t address, uint64_t bytes, uint64_t owner) const {
  std::shared_lock lock(mutex_);
  return translateLocked(address, bytes, owner);
}

void* EmuMemory::translateLocked(uint64_t address, uint64_t bytes, uint64_t owner) const {
  uint64_t base = 0, size = 0;
  return rangeLocked(address, bytes, owner, &base, &size) ? reinterpret_cast<void*>(address)
                                                          : nullptr;
}

bool EmuMemory::rangeLocked(uint64_t address, uint64_t bytes, uint64_t owner, uint64_t* base,
                            uint64_t* size) const {
  auto it = allocations_.upper_bound(address);
  if (it != allocations_.begin()) {
    --it;
    const Allocation& a = it->second;
    uint64_t offset = address - it->first;
    if (offset < a.reserved || (offset == a.size && bytes == 0)) {
      if (!a.reachableBy(owner) || offset > a.size || bytes > a.size - offset) return false;
      *base = it->first;
      *size = a.size;
      return true;
    }
  }
  // Mapped memory: the run of the owner's accessible mappings around `address`.
  if (mappings_.empty() || !mappedRunLocked(address, owner, base, size)) return false;
  return bytes <= *base + *size - address;
}

bool EmuMemory::span(uint64_t address, uint64_t bytes, uint64_t owner, uint64_t* base,
                     uint64_t* size, uint64_t* changeCount) const {
  std::shared_lock lock(mutex_);
  if (!rangeLocked(address, bytes, owner, base, size)) return false;
  *changeCount = changes_.load(std::memory_order_acquire);
  return true;
}

bool EmuMemory::findAllocation(uint64_t address, uint64_t owner, uint64_t* base,
                               uint64_t* size) const {
  std::shared_lock lock(mutex_);
  auto it = allocations_.upper_bound(address);
  if (it != allocations_.begin()) {
    --it;
    if (address - it->first < it->second.reserved) {
      if (!it->second.reachableBy(owner) || address - it->first >= it->second.size) return false;
      *base = it->first;
      *size = it->second.size;
      return true;
    }
  }
  return mappedRunLocked(address, owner, base, size);
}

uint64_t EmuMemory::used() const {
  std::shared_lock lock(mutex_);
  return used_;
}

uint64_t EmuMemory::usedBy(uint64_t owner) const {
  std::shared_lock lock(mutex_);
  auto it = owners_.find(owner);
  return it == owners_.end() ? 0 : it->second.held;
}

uint64_t EmuMemory::peakBy(uint64_t owner) const {
  std::shared_lock lock(mutex_);
  auto it = owners_.find(owner);
  return it == owners_.end() ? 0 : it->second.peak;
}

void EmuMemory::chargeLocked(uint64_t owner, int64_t bytes) {
  OwnerUse& use = owners_[owner];
  use.held = static_cast<uint64_t>(static_cast<int64_t>(use.held) + bytes);
  use.peak = std::max(use.peak, use.held);
}

}  // namespace gpupool::server::emu
