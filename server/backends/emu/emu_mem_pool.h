// A memory pool of the emu device (cuMemPoolCreate, or a context's default pool): blocks of
// EmuMemory that stream-ordered frees give back to the pool for reuse instead of to the device.
//
// A block enters the free list only when its stream has reached the free (the context queues
// blockFreed() on the stream), so every block on the list is idle: reusing it is safe on any
// stream. The reuse policies can therefore only narrow reuse: without
// REUSE_ALLOW_OPPORTUNISTIC a block is reused only on the stream that freed it (FOLLOW_EVENT_
// DEPENDENCIES and ALLOW_INTERNAL_DEPENDENCIES would let a real pool reuse blocks whose frees are
// still pending; this pool never needs them, so they are kept and reported only). Memory above
// the release threshold goes back to the device as soon as the frees that made it idle are
// reached, which is what a real pool's release at the next synchronization looks like from the
// host.
//
// Threads: the session's thread allocates and reads or sets attributes; the stream workers call
// blockFreed(). One mutex guards all of it.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>

#include "common/status.h"
#include "server/backends/emu/emu_memory.h"

namespace gpupool::server::emu {

class EmuMemPool {
 public:
  // Blocks come from `memory`, tagged with `owner` (the context's owner id).
  EmuMemPool(EmuMemory& memory, uint64_t owner) : memory_(memory), owner_(owner) {}
  EmuMemPool(const EmuMemPool&) = delete;
  EmuMemPool& operator=(const EmuMemPool&) = delete;

  // A block of at least `bytes` for use on `stream`: an idle one the policies let `stream` reuse,
  // else new device memory (CUDA_ERROR_OUT_OF_MEMORY when the device has none).
  Status allocate(uint64_t bytes, uint64_t stream, uint64_t* address);
  // `stream` has reached the free of the block at `address`: it becomes reusable (or goes back to
  // the device, past the release threshold or once the pool is destroyed).
  void blockFreed(uint64_t address, uint64_t stream);
  // Gives idle blocks back to the device until at most `minBytesToKeep` stay reserved.
  void trimTo(uint64_t minBytesToKeep);
  // cuMemPoolDestroy: idle blocks go back now, blocks in use when their frees are reached.
  void destroy();

  // Reserved bytes not in use.
  uint64_t idleBytes() const;
  Status getAttribute(int attribute, uint64_t* value) const;
  Status setAttribute(int attribute, uint64_t value);

  // Sizes are rounded up to this, the alignment cudaMallocAsync guarantees.
  static constexpr uint64_t kBlockAlignment = 512;

 private:
  struct IdleBlock {
    uint64_t bytes = 0;
    uint64_t freedOn = 0;  // the stream whose free made it idle
  };
  // Under mutex_: releases idle blocks, largest first, while more than `keep` bytes are reserved.
  void releaseIdleAbove(uint64_t keep);

  EmuMemory& memory_;
  const uint64_t owner_;
  mutable std::mutex mutex_;
  std::map<uint64_t, uint64_t> inUse_;  // address -> block bytes
  std::map<uint64_t, IdleBlock> idle_;  // address -> block
  bool destroyed_ = false;
  uint64_t releaseThreshold_ = 0;
  bool followEventDependencies_ = true, allowOpportunistic_ = true,
       allowInternalDependencies_ = true;
  uint64_t reserved_ = 0, reservedHigh_ = 0, used_ = 0, usedHigh_ = 0;
};

}  // namespace gpupool::server::emu
