// Virtual memory management in the emu's device window (see emu_memory.h): physical allocations
// are memfds, reservations are PROT_NONE address space taken from the window, and a mapping puts
// part of a memfd MAP_SHARED|MAP_FIXED over part of a reservation, reachable once access is set.
// An exported allocation's memfd is shared (a duplicate descriptor) with the export and with each
// importer's allocation, so their mappings alias the same pages.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <mutex>

#include "server/backends/emu/emu_memory.h"

namespace gpupool::server::emu {
namespace {
constexpr uint64_t kVmmGranule = EmuMemory::kVmmGranularity;
bool vmmAligned(uint64_t v, uint64_t granule = kVmmGranule) { return v % granule == 0; }
}  // namespace

CUresult EmuMemory::vmmCreate(uint64_t bytes, bool shareable, uint64_t owner, uint64_t* handle) {
  if (bytes == 0 || !vmmAligned(bytes)) return CUDA_ERROR_INVALID_VALUE;
  auto lock = lockForChange();
  if (bytes > capacity_ || used_ + bytes > capacity_) return CUDA_ERROR_OUT_OF_MEMORY;
  int fd = memfd_create("gpupool-vmm", MFD_CLOEXEC);
  if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    close(fd);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *handle = nextHandle_++;
  physical_[*handle] = {fd, bytes, owner, 1, 0, shareable, true};
  used_ += bytes;
  chargeLocked(owner, static_cast<int64_t>(bytes));
  return CUDA_SUCCESS;
}

CUresult EmuMemory::vmmExport(uint64_t handle, uint64_t owner, std::shared_ptr<int>* memfd,
                              uint64_t* bytes) {
  auto lock = lockForChange();
  auto it = physical_.find(handle);
  if (it == physical_.end() || it->second.owner != owner || it->second.handleRefs == 0 ||
      !it->second.shareable) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  int copy = fcntl(it->second.fd, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  *memfd = std::shared_ptr<int>(new int(copy), [](int* fd) {
    close(*fd);
    delete fd;
  });
  *bytes = it->second.size;
  return CUDA_SUCCESS;
}

CUresult EmuMemory::vmmImport(const std::shared_ptr<int>& memfd, uint64_t bytes, uint64_t owner,
                              uint64_t* handle, uint64_t granule) {
  if (!memfd || bytes == 0 || !vmmAligned(bytes, granule)) return CUDA_ERROR_INVALID_VALUE;
  auto lock = lockForChange();
  int fd = fcntl(*memfd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  *handle = nextHandle_++;
  physical_[*handle] = {fd, bytes, owner, 1, 0, true, false};
  chargeLocked(owner, static_cast<int64_t>(bytes));
  return CUDA_SUCCESS;
}

CUresult EmuMemory::vmmRetain(uint64_t address, uint64_t owner, uint64_t* handle) {
  auto lock = lockForChange();
  auto it = mappings_.upper_bound(address);
  if (it == mappings_.begin()) return CUDA_ERROR_INVALID_VALUE;
  --it;
  if (it->second.owner != owner || address - it->first >= it->second.size) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *handle = it->second.handle;
  physical_.at(*handle).handleRefs++;
  return CUDA_SUCCESS;
}

void EmuMemory::dropPhysicalIfUnusedLocked(uint64_t handle, uint64_t* freed) {
  auto it = physical_.find(handle);
  if (it == physical_.end() || it->second.handleRefs || it->second.mappings) return;
  close(it->second.fd);
  chargeLocked(it->second.owner, -static_cast<int64_t>(it->second.size));
  if (it->second.counted) {
    used_ -= it->second.size;
    if (freed) *freed += it->second.size;
  }
  physical_.erase(it);
}

CUresult EmuMemory::vmmRelease(uint64_t handle, uint64_t owner, uint64_t* freed) {
  auto lock = lockForChange();
  auto it = physical_.find(handle);
  if (it == physical_.end() || it->second.owner != owner || it->second.handleRefs == 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  it->second.handleRefs--;
  dropPhysicalIfUnusedLocked(handle, freed);
  return CUDA_SUCCESS;
}

CUresult EmuMemory::vmmReserve(uint64_t bytes, uint64_t alignment, uint64_t hint, uint64_t owner,
                               uint64_t* address, uint64_t granule) {
  if (alignment == 0) alignment = granule;
  if (bytes == 0 || !vmmAligned(bytes, granule) || (alignment & (alignment - 1)) != 0 ||
      !vmmAligned(alignment, granule) || !vmmAligned(hint, granule)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto lock = lockForChange();
  auto take = [&](std::map<uint64_t, uint64_t>::iterator block, uint64_t at) {
    takeFreeLocked(block, at, bytes);
    reservations_[at] = {bytes, owner};
    *address = at;
    return CUDA_SUCCESS;
  };
  if (hint != 0 && hint % alignment == 0) {
    auto block = free_.upper_bound(hint);
    if (block != free_.begin()) {
      --block;
      if (hint - block->first <= block->second && bytes <= block->second - (hint - block->first)) {
        return take(block, hint);
      }
    }
  }
  for (auto block = free_.begin(); block != free_.end(); ++block) {
    uint64_t at = (block->first + alignment - 1) / alignment * alignment;
    if (at - block->first >= block->second || bytes > block->second - (at - block->first)) continue;
    return take(block, at);
  }
  return CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult EmuMemory::vmmFree(uint64_t address, uint64_t bytes, uint64_t owner) {
  auto lock = lockForChange();
  auto it = reservations_.find(address);
  if (it == reservations_.end() || it->second.owner != owner || it->second.size != bytes) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // The driver frees only a range with nothing mapped in it.
  auto mapped = mappings_.lower_bound(address);
  if (mapped != mappings_.end() && mapped->first < address + bytes) return CUDA_ERROR_INVALID_VALUE;
  reservations_.erase(it);
  giveFreeLocked(address, bytes);
  return CUDA_SUCCESS;
}

CUresult EmuMemory::vmmMap(uint64_t address, uint64_t bytes, uint64_t handle, uint64_t offset,
                           uint64_t owner, uint64_t granule) {
  if (bytes == 0 || !vmmAligned(address, granule) || !vmmAligned(bytes, granule) ||
      !vmmAligned(offset, granule)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto lock = lockForChange();
  auto physical = physical_.find(handle);
  if (physical == physical_.end() || physical->second.owner != owner ||
      physical->second.handleRefs == 0) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  if (offset > physical->second.size || bytes > physical->second.size - offset) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // Inside one reservation of the owner's...
  auto reservation = reservations_.upper_bound(address);
  if (reservation == reservations_.begin()) return CUDA_ERROR_INVALID_VALUE;
  --reservation;
  if (reservation->second.owner != owner ||
      address - reservation->first >= reservation->second.size ||
      bytes > reservation->second.size - (address - reservation->first)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // ...where nothing is mapped yet.
  auto next = mappings_.lower_bound(address);
  if (next != mappings_.end() && next->first < address + bytes) return CUDA_ERROR_INVALID_VALUE;
  if (next != mappings_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second.size > address) return CUDA_ERROR_INVALID_VALUE;
  }
  // Unreachable until cuMemSetAccess, as on a GPU.
  void* at = mmap(reinterpret_cast<void*>(address), bytes, PROT_NONE, MAP_SHARED | MAP_FIXED,
                  physical->second.fd, static_cast<off_t>(offset));
  if (at == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  mappings_[address] = {bytes, handle, offset, owner, false};
  physical->second.mappings++;
  return CUDA_SUCCESS;
}

void EmuMemory::unmapLocked(std::map<uint64_t, VmmMapping>::iterator it, uint64_t* freed) {
  uint64_t address = it->first;
  if (pinned_ && it->second.accessible) pinned_->forget(reinterpret_cast<void*>(address));
  // Back to reserved address space, holding nothing.
  mmap(reinterpret_cast<void*>(address), it->second.size, PROT_NONE,
       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  uint64_t handle = it->second.handle;
  mappings_.erase(it);
  physical_.at(handle).mappings--;
  dropPhysicalIfUnusedLocked(handle, freed);
}

CUresult EmuMemory::vmmUnmap(uint64_t address, uint64_t bytes, uint64_t owner, uint64_t* freed) {
  auto lock = lockForChange();
  // The range must be made of whole mappings of the owner's, one after another.
  uint64_t at = address;
  auto it = mappings_.find(address);
  while (at < address + bytes) {
    if (it == mappings_.end() || it->first != at || it->second.owner != owner ||
        it->second.size > address + bytes - at) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    at += it->second.size;
    ++it;
  }
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  for (auto m = mappings_.find(address); m != mappings_.end() && m->first < address + bytes;) {
    auto current = m++;
    unmapLocked(current, freed);
  }
  return CUDA_SUCCESS;
}

CUresult EmuMemory::vmmSetAccess(uint64_t address, uint64_t bytes, bool readWrite, uint64_t owner) {
  auto lock = lockForChange();
  // The range must be mapped throughout, by mappings of the owner's.
  auto first = mappings_.upper_bound(address);
  if (first == mappings_.begin() || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  --first;
  uint64_t at = address;
  for (auto it = first; at < address + bytes; ++it) {
    if (it == mappings_.end() || it->first > at || it->first + it->second.size <= at ||
        it->second.owner != owner) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    at = it->first + it->second.size;
  }
  // Access is per mapping here: whole mappings change (the driver changes page ranges; every
  // caller we know of sets whole mappings).
  for (auto it = first; it != mappings_.end() && it->first < address + bytes; ++it) {
    VmmMapping& m = it->second;
    if (m.accessible == readWrite) continue;
    void* p = reinterpret_cast<void*>(it->first);
    if (mprotect(p, m.size, readWrite ? PROT_READ | PROT_WRITE : PROT_NONE) != 0) {
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    m.accessible = readWrite;
    if (pinned_) {
      if (readWrite) {
        pinned_->note(p, m.size, transport::PeerAccess::kNone);
      } else {
        pinned_->forget(p);
      }
    }
  }
  return CUDA_SUCCESS;
}

CUresult EmuMemory::vmmGetAccess(uint64_t address, uint64_t owner, bool* readWrite) const {
  std::shared_lock lock(mutex_);
  auto it = mappings_.upper_bound(address);
  if (it == mappings_.begin()) return CUDA_ERROR_INVALID_VALUE;
  --it;
  if (it->second.owner != owner || address - it->first >= it->second.size) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *readWrite = it->second.accessible;
  return CUDA_SUCCESS;
}

bool EmuMemory::mappedRunLocked(uint64_t address, uint64_t owner, uint64_t* base,
                                uint64_t* size) const {
  auto it = mappings_.upper_bound(address);
  if (it == mappings_.begin()) return false;
  --it;
  auto usable = [&](const std::pair<const uint64_t, VmmMapping>& m) {
    return m.second.owner == owner && m.second.accessible;
  };
  if (!usable(*it) || address - it->first >= it->second.size) return false;
  auto low = it;
  while (low != mappings_.begin()) {
    auto prev = std::prev(low);
    if (!usable(*prev) || prev->first + prev->second.size != low->first) break;
    low = prev;
  }
  uint64_t end = it->first + it->second.size;
  for (auto next = std::next(it); next != mappings_.end() && next->first == end && usable(*next);
       ++next) {
    end += next->second.size;
  }
  *base = low->first;
  *size = end - low->first;
  return true;
}

void EmuMemory::releaseVmmLocked(uint64_t owner) {
  for (auto it = mappings_.begin(); it != mappings_.end();) {
    auto current = it++;
    if (current->second.owner == owner) unmapLocked(current, nullptr);
  }
  for (auto it = physical_.begin(); it != physical_.end();) {
    auto current = it++;
    if (current->second.owner != owner) continue;
    close(current->second.fd);
    chargeLocked(owner, -static_cast<int64_t>(current->second.size));
    if (current->second.counted) used_ -= current->second.size;
    physical_.erase(current);
  }
  for (auto it = reservations_.begin(); it != reservations_.end();) {
    auto current = it++;
    if (current->second.owner != owner) continue;
    giveFreeLocked(current->first, current->second.size);
    reservations_.erase(current);
  }
}

}  // namespace gpupool::server::emu
