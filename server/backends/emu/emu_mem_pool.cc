#include "server/backends/emu/emu_mem_pool.h"

#include <cuda.h>

#include <algorithm>
#include <string>

namespace gpupool::server::emu {

Status EmuMemPool::allocate(uint64_t bytes, uint64_t stream, uint64_t* address) {
  if (bytes == 0) return Status::error(CUDA_ERROR_INVALID_VALUE, "cannot allocate 0 bytes");
  uint64_t blockBytes = (bytes + kBlockAlignment - 1) / kBlockAlignment * kBlockAlignment;
  std::lock_guard lock(mutex_);
  // Best fit among the idle blocks `stream` may take, wasting at most half of one.
  auto best = idle_.end();
  for (auto it = idle_.begin(); it != idle_.end(); ++it) {
    const IdleBlock& block = it->second;
    bool mayReuse = block.freedOn == stream || allowOpportunistic_;
    if (!mayReuse || block.bytes < blockBytes || block.bytes / 2 > blockBytes) continue;
    if (best == idle_.end() || block.bytes < best->second.bytes) best = it;
  }
  if (best != idle_.end()) {
    *address = best->first;
    blockBytes = best->second.bytes;
    idle_.erase(best);
  } else {
    *address = memory_.allocate(blockBytes, owner_);
    if (*address == 0 && !idle_.empty()) {
      // As a GPU's pool does before failing: give the idle blocks back and try again.
      releaseIdleAbove(used_);
      *address = memory_.allocate(blockBytes, owner_);
    }
    if (*address == 0) {
      return Status::error(CUDA_ERROR_OUT_OF_MEMORY,
                           "out of device memory: the pool asked for " +
                               std::to_string(blockBytes) + " bytes, " +
                               std::to_string(memory_.capacity() - memory_.used()) + " free");
    }
    reserved_ += blockBytes;
    reservedHigh_ = std::max(reservedHigh_, reserved_);
  }
  inUse_[*address] = blockBytes;
  used_ += blockBytes;
  usedHigh_ = std::max(usedHigh_, used_);
  return Status::success();
}

void EmuMemPool::blockFreed(uint64_t address, uint64_t stream) {
  std::lock_guard lock(mutex_);
  auto it = inUse_.find(address);
  if (it == inUse_.end()) return;
  used_ -= it->second;
  idle_[address] = IdleBlock{it->second, stream};
  inUse_.erase(it);
  releaseIdleAbove(destroyed_ ? 0 : releaseThreshold_);
}

void EmuMemPool::trimTo(uint64_t minBytesToKeep) {
  std::lock_guard lock(mutex_);
  releaseIdleAbove(minBytesToKeep);
}

void EmuMemPool::destroy() {
  std::lock_guard lock(mutex_);
  destroyed_ = true;
  releaseIdleAbove(0);
}

void EmuMemPool::releaseIdleAbove(uint64_t keep) {
  while (reserved_ > keep && !idle_.empty()) {
    auto largest = std::max_element(idle_.begin(), idle_.end(), [](const auto& a, const auto& b) {
      return a.second.bytes < b.second.bytes;
    });
    memory_.release(largest->first, owner_);
    reserved_ -= largest->second.bytes;
    idle_.erase(largest);
  }
}

uint64_t EmuMemPool::idleBytes() const {
  std::lock_guard lock(mutex_);
  return reserved_ - used_;
}

Status EmuMemPool::getAttribute(int attribute, uint64_t* value) const {
  std::lock_guard lock(mutex_);
  switch (attribute) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
      *value = followEventDependencies_;
      break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
      *value = allowOpportunistic_;
      break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
      *value = allowInternalDependencies_;
      break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
      *value = releaseThreshold_;
      break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
      *value = reserved_;
      break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
      *value = reservedHigh_;
      break;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
      *value = used_;
      break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
      *value = usedHigh_;
      break;
    default:
      return Status::error(CUDA_ERROR_INVALID_VALUE,
                           "unknown memory pool attribute " + std::to_string(attribute));
  }
  return Status::success();
}

Status EmuMemPool::setAttribute(int attribute, uint64_t value) {
  std::lock_guard lock(mutex_);
  switch (attribute) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
      followEventDependencies_ = value != 0;
      return Status::success();
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
      allowOpportunistic_ = value != 0;
      return Status::success();
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
      allowInternalDependencies_ = value != 0;
      return Status::success();
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
      releaseThreshold_ = value;
      return Status::success();
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
      // As the driver: the high watermarks can only be reset (to the current value), by setting 0.
      if (value != 0) {
        return Status::error(CUDA_ERROR_INVALID_VALUE,
                             "a memory pool's high watermark can only be reset, by setting 0");
      }
      if (attribute == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH) {
        reservedHigh_ = reserved_;
      } else {
        usedHigh_ = used_;
      }
      return Status::success();
    default:
      return Status::error(CUDA_ERROR_INVALID_VALUE,
                           "memory pool attribute " + std::to_string(attribute) + " cannot be set");
  }
}

}  // namespace gpupool::server::emu
