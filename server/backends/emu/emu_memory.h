// Device memory of the emu device: server RAM inside one reserved virtual-address window.
//
// The window is reserved PROT_NONE/MAP_NORESERVE at a fixed high address, away from the
// interpreter's generic windows and from where Linux places ordinary mappings, so device pointers
// are plain addresses that clients can keep free on their side too. Allocations are page-granular
// and commit memory only when touched; a freed range goes back to PROT_NONE, so nothing can reach
// it. Live allocations are noted pinned ranges (transport/pinned_memory.h, peer access none), so an
// RDMA connection registers each once (which commits it, as cuMemAlloc commits a GPU's memory)
// instead of for every copy.
//
// Every allocation records its owner (a context id). translate() only resolves ranges inside one
// live allocation of the asking owner: a bogus or foreign pointer resolves to nullptr, never to
// memory.
//
// CUDA IPC: an allocation may also be opened by other owners (contexts of other sessions), at the
// same address, since every context of the device shares this one window. Each open is counted;
// the openers resolve it like the owner does. When the owner frees it while it is open, the owner
// loses access at once and the memory stays, for the openers only, until the last one closes it.
// A generation number tells an allocation from a later one at the same address.
//
// Virtual memory management (cuMemCreate/cuMemMap, emu_memory_vmm.cc): a physical allocation is a
// memfd of its own, counted in used() from creation; a reservation takes address space out of the
// window and stays PROT_NONE; a mapping maps part of a memfd MAP_SHARED|MAP_FIXED over part of a
// reservation, so two mappings of one allocation really alias. A mapping resolves (translate,
// accessLive, findAllocation) only for its owner and only once access is set; adjacent accessible
// mappings of one owner resolve as one range, as a kernel or copy across a chunk boundary needs.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <shared_mutex>

#include "transport/pinned_memory.h"

namespace gpupool::server::emu {

// One cuMemMap: `size` bytes of physical allocation `handle` from `offset`.
struct VmmMapping {
  uint64_t size;
  uint64_t handle;
  uint64_t offset;
  uint64_t owner;
  bool accessible;
};

class EmuMemory {
 public:
  // Reserves `capacity` bytes of device memory for device `deviceIndex` of the server whose address
  // slot is `slot`: each (slot, device) pair has a window of its own, so servers started with
  // different slots hand out disjoint device addresses and one client can use them together.
  // Allocations are noted in `pinned` (when given), which must outlive this.
  EmuMemory(unsigned slot, unsigned deviceIndex, uint64_t capacity,
            transport::PinnedMemory* pinned = nullptr);
  ~EmuMemory();
  EmuMemory(const EmuMemory&) = delete;
  EmuMemory& operator=(const EmuMemory&) = delete;

  // Returns 0 when the device has no room for `bytes`.
  uint64_t allocate(uint64_t bytes, uint64_t owner);
  // False if `address` is not the base of an allocation of `owner`.
  bool release(uint64_t address, uint64_t owner);
  // Frees everything `owner` holds; returns the bytes released.
  uint64_t releaseAll(uint64_t owner);

  // Host pointer for [address, address+bytes) if it lies in one live allocation of `owner`.
  void* translate(uint64_t address, uint64_t bytes, uint64_t owner) const;
  // The whole range that [address, address+bytes) resolves in (an allocation, or a run of adjacent
  // accessible mappings) for `owner`, with changes() as it was then: while changes() still
  // returns that count, every part of the range resolves as translate() would resolve it, so the
  // interpreter keeps it instead of asking for each access. False where translate() gives nullptr.
  bool span(uint64_t address, uint64_t bytes, uint64_t owner, uint64_t* base, uint64_t* size,
            uint64_t* changeCount) const;
  // Counts the changes that can make a range stop resolving (every change of the allocation or
  // mapping tables), bumped before the change is made.
  const std::atomic<uint64_t>& changes() const { return changes_; }
  // Runs `access(pointer)` on [address, address+bytes) if it lies in one live allocation of
  // `owner`, with the allocation kept alive meanwhile (a stream memory operation's load or store
  // may race a free on another stream); false, without calling it, otherwise.
  template <typename Access>
  bool accessLive(uint64_t address, uint64_t bytes, uint64_t owner, Access access) const {
    std::shared_lock lock(mutex_);
    void* p = translateLocked(address, bytes, owner);
    if (!p) return false;
    access(p);
    return true;
  }
  // CUDA IPC. exportable: `address` is the base of a live allocation of `owner` (sets its size and
  // generation). openShared: one more open of that allocation by `opener`; false when it is gone
  // (freed, or another allocation now), or `opener` is its owner. closeShared: one open fewer,
  // freeing the memory when its owner had freed it and this was the last; false if `opener` has
  // no open of an allocation that starts at `address`.
  bool exportable(uint64_t address, uint64_t owner, uint64_t* bytes, uint64_t* generation) const;
  bool openShared(uint64_t address, uint64_t generation, uint64_t opener);
  bool closeShared(uint64_t address, uint64_t opener);

  // The allocation containing `address` (owner's only): base and size.
  bool findAllocation(uint64_t address, uint64_t owner, uint64_t* base, uint64_t* size) const;

  // Virtual memory management. Sizes, offsets and addresses are multiples of kVmmGranularity
  // (the callers check; these check again), or of `granule` where given: a client's mapped pinned
  // memory (EmuContext::hostFileMap) comes in pages. Results are CUresults; `freed` gets the bytes
  // of physical memory given back (an allocation is freed once released and unmapped everywhere).
  static constexpr uint64_t kVmmGranularity = 2ull << 20;
  CUresult vmmCreate(uint64_t bytes, bool shareable, uint64_t owner, uint64_t* handle);
  CUresult vmmRetain(uint64_t address, uint64_t owner, uint64_t* handle);
  CUresult vmmRelease(uint64_t handle, uint64_t owner, uint64_t* freed);
  // Address space only: `hint` is taken when that range is free, else any range aligned to
  // `alignment` (a power of two, or 0 for the granularity).
  CUresult vmmReserve(uint64_t bytes, uint64_t alignment, uint64_t hint, uint64_t owner,
                      uint64_t* address, uint64_t granule = kVmmGranularity);
  CUresult vmmFree(uint64_t address, uint64_t bytes, uint64_t owner);
  CUresult vmmMap(uint64_t address, uint64_t bytes, uint64_t handle, uint64_t offset,
                  uint64_t owner, uint64_t granule = kVmmGranularity);
  CUresult vmmUnmap(uint64_t address, uint64_t bytes, uint64_t owner, uint64_t* freed);
  // `readWrite` false: no access (the mapping stays, unreachable).
  CUresult vmmSetAccess(uint64_t address, uint64_t bytes, bool readWrite, uint64_t owner);
  CUresult vmmGetAccess(uint64_t address, uint64_t owner, bool* readWrite) const;
  // Shareable handles: vmmExport sets *memfd to a shared copy of the memfd of `owner`'s shareable
  // allocation `handle` (its size in *bytes), which keeps the memory alive while held; vmmImport
  // gives `owner` a new handle to that memory, not counted in used() again (its creator's is).
  CUresult vmmExport(uint64_t handle, uint64_t owner, std::shared_ptr<int>* memfd, uint64_t* bytes);
  CUresult vmmImport(const std::shared_ptr<int>& memfd, uint64_t bytes, uint64_t owner,
                     uint64_t* handle, uint64_t granule = kVmmGranularity);

  uint64_t capacity() const { return capacity_; }
  uint64_t used() const;
  uint64_t usedBy(uint64_t owner) const;
  // The most `owner` ever held at once (NVML's accounting: maxMemoryUsage).
  uint64_t peakBy(uint64_t owner) const;
  uint64_t windowBase() const { return base_; }

#if defined(__SANITIZE_THREAD__)
  // ThreadSanitizer allows application mappings only in fixed ranges; the lowest is [4 KiB,
  // 512 GiB). Under it the windows are 1 GiB from 64 GiB (above the interpreter's own windows),
  // so 256 of them end at 320 GiB. Clients learn the base from Welcome, so nothing else changes.
  static constexpr uint64_t kWindowStart = 0x1000000000ull;  // 64 GiB
  static constexpr uint64_t kWindowStride = 0x40000000ull;   // 1 GiB of address space per device
#else
  // From 17 TiB, just above AddressSanitizer's high shadow (which ends past 16 TiB), 32 slots end
  // at 81 TiB: below where Linux loads position-independent executables (from 85.3 TiB, randomized
  // over 1 TiB) with their brk heap after them, and below AddressSanitizer's allocator at
  // 96-100 TiB. A window up there could meet the server's own executable or heap and fail to map.
  static constexpr uint64_t kWindowStart = 0x110000000000ull;  // 17 TiB
  static constexpr uint64_t kWindowStride = 0x4000000000ull;   // 256 GiB of address space per device
#endif
  static constexpr unsigned kDevicesPerSlot = 8;
  static constexpr unsigned kSlots = 32;
  static uint64_t windowOf(unsigned slot, unsigned deviceIndex) {
    return kWindowStart + (uint64_t{slot} * kDevicesPerSlot + deviceIndex) * kWindowStride;
  }

 private:
  struct Allocation {
    uint64_t size;      // as requested
    uint64_t reserved;  // page-rounded
    uint64_t owner;
    uint64_t generation = 0;
    bool ownerFreed = false;               // kept for its openers only
    std::map<uint64_t, unsigned> openers;  // IPC: opener -> opens
    bool reachableBy(uint64_t who) const {
      return (who == owner && !ownerFreed) || openers.count(who) != 0;
    }
  };
  // The table lock, for a change: bumps changes_ first, so no range is used after its change.
  std::unique_lock<std::shared_mutex> lockForChange() {
    std::unique_lock lock(mutex_);
    changes_.fetch_add(1, std::memory_order_acq_rel);
    return lock;
  }
  // Frees allocations_ entry `it` (its range back to PROT_NONE).
  void freeLocked(std::map<uint64_t, Allocation>::iterator it);
  void* translateLocked(uint64_t address, uint64_t bytes, uint64_t owner) const;
  // The range [*base, *base + *size) that [address, address+bytes) lies in for `owner`: one
  // allocation, or a run of adjacent accessible mappings. False if it lies in none.
  bool rangeLocked(uint64_t address, uint64_t bytes, uint64_t owner, uint64_t* base,
                   uint64_t* size) const;
  // The run of adjacent accessible mappings of `owner` containing `address`: false if none.
  bool mappedRunLocked(uint64_t address, uint64_t owner, uint64_t* base, uint64_t* size) const;
  // Address-space bookkeeping shared by allocations and reservations.
  void takeFreeLocked(std::map<uint64_t, uint64_t>::iterator block, uint64_t address,
                      uint64_t bytes);
  void giveFreeLocked(uint64_t address, uint64_t bytes);
  // Unmaps mappings_ entry `it` (its range back to PROT_NONE); adds freed physical bytes.
  void unmapLocked(std::map<uint64_t, VmmMapping>::iterator it, uint64_t* freed);
  void dropPhysicalIfUnusedLocked(uint64_t handle, uint64_t* freed);
  void releaseVmmLocked(uint64_t owner);
  // What `owner` holds changed by `bytes` (allocations it has not freed, physical VMM memory it
  // created or imported): usedBy() and peakBy() read these totals instead of walking the maps.
  void chargeLocked(uint64_t owner, int64_t bytes);

  uint64_t base_ = 0;
  uint64_t capacity_ = 0;
  uint64_t window_ = 0;
  transport::PinnedMemory* pinned_;
  mutable std::shared_mutex mutex_;
  std::atomic<uint64_t> changes_{0};
  std::map<uint64_t, Allocation> allocations_;  // base -> allocation
  std::map<uint64_t, uint64_t> free_;           // base -> size of free address ranges
  uint64_t used_ = 0;
  uint64_t nextGeneration_ = 1;
  struct OwnerUse {
    uint64_t held = 0;
    uint64_t peak = 0;
  };
  std::map<uint64_t, OwnerUse> owners_;

  struct VmmPhysical {
    int fd;
    uint64_t size;
    uint64_t owner;
    unsigned handleRefs;  // cuMemCreate and each cuMemRetainAllocationHandle, less releases
    unsigned mappings;
    bool shareable = false;  // may be exported
    bool counted = true;     // in used_: the creator's, not an import's
  };
  struct VmmReservation {
    uint64_t size;
    uint64_t owner;
  };
  std::map<uint64_t, VmmPhysical> physical_;         // handle -> allocation
  std::map<uint64_t, VmmReservation> reservations_;  // base -> reservation
  std::map<uint64_t, VmmMapping> mappings_;          // base -> mapping
  uint64_t nextHandle_ = 1;
};

}  // namespace gpupool::server::emu
