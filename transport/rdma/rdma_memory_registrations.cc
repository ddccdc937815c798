#include "transport/rdma/rdma_memory_registrations.h"

#include "transport/pinned_memory.h"

namespace gpupool::transport::rdma {
namespace {

// Pinned ranges serve both directions for their whole life, so they get every access right.
constexpr int kPinnedAccess =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;

}  // namespace

RegistrationLease& RegistrationLease::operator=(RegistrationLease&& other) noexcept {
  if (this != &other) {
    release();
    lkey_ = other.lkey_;
    rkey_ = other.rkey_;
    temporary_ = other.temporary_;
    stats_ = other.stats_;
    other.temporary_ = nullptr;
  }
  return *this;
}

void RegistrationLease::release() {
  if (temporary_) {
    ibv_dereg_mr(temporary_);
    if (stats_) stats_->deregistrations++;
    temporary_ = nullptr;
  }
}

std::optional<RegistrationLease> MemoryRegistrations::acquire(const void* p, size_t size,
                                                              int access) {
  constexpr int kRemote = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
  auto range = pinned_.find(p, size);
  if (range && range->access == PeerAccess::kNone &&
      ((access & kRemote) != 0 || range->size > kLargestCachedPrivateRange)) {
    range.reset();
  }
  if (range) {
    auto it = cache_.find(range->id);
    if (it != cache_.end()) {
      stats_->registrationCacheHits++;
      return RegistrationLease(it->second.mr->lkey, it->second.mr->rkey, nullptr, stats_);
    }
    int rangeAccess =
        range->access == PeerAccess::kReadWrite ? kPinnedAccess : IBV_ACCESS_LOCAL_WRITE;
    ibv_mr* mr = ibv_reg_mr(pd_, reinterpret_cast<void*>(range->base), range->size, rangeAccess);
    if (mr) {
      stats_->registrations++;
      cache_[range->id] = Cached{mr, range->base, range->size};
      return RegistrationLease(mr->lkey, mr->rkey, nullptr, stats_);
    }
    // Fall through: maybe only this piece can be registered.
  }
  ibv_mr* mr = ibv_reg_mr(pd_, const_cast<void*>(p), size, access);
  if (!mr) return std::nullopt;
  stats_->registrations++;
  return RegistrationLease(mr->lkey, mr->rkey, mr, stats_);
}

void MemoryRegistrations::dropForgotten() {
  uint64_t forgotten = pinned_.forgottenCount();
  if (forgotten == forgottenSeen_) return;
  // Read before the scan: a range forgotten during it shows up as a change next time.
  forgottenSeen_ = forgotten;
  for (auto it = cache_.begin(); it != cache_.end();) {
    if (pinned_.alive(it->first)) {
      ++it;
      continue;
    }
    ibv_dereg_mr(it->second.mr);
    stats_->deregistrations++;
    it = cache_.erase(it);
  }
}

void MemoryRegistrations::clear() {
  for (auto& [id, cached] : cache_) {
    ibv_dereg_mr(cached.mr);
    stats_->deregistrations++;
  }
  cache_.clear();
}

}  // namespace gpupool::transport::rdma
