// Thread-block clusters (internal). The CTAs of one cluster run at once, each on a host thread of
// its own (launch.cc gives a cluster's worth of threads to each group), and share a ClusterGroup:
// the gate each cluster starts behind, every CTA's shared memory (distributed shared memory), the
// cluster barrier (barrier.cluster) and a lock for mbarrier words another CTA may update.
//
// Addresses. A CTA keeps its own shared memory at its offsets [0, size), as without clusters, so a
// .shared::cta address is a .shared::cluster address of the same bytes. The shared memory of the
// CTA of rank r is seen by every CTA of the cluster at sharedClusterAddress(r, offset): mapa makes
// such addresses, getctarank reads the rank back, and ld/st/atom/red/mbarrier/cp.async.bulk follow
// them to the other CTA's memory, bounds-checked like the CTA's own.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>

#include "ptx_launch.h"

namespace gpupool::ptx {

inline constexpr unsigned kClusterRankShift = 24;  // above any CTA's shared memory (< 16 MiB)
inline constexpr uint64_t kClusterOffsetMask = (uint64_t{1} << kClusterRankShift) - 1;

// Another CTA's view of the shared memory of rank `rank` at `offset`.
inline uint64_t sharedClusterAddress(uint32_t rank, uint64_t offset) {
  return (uint64_t{rank} + 1) << kClusterRankShift | (offset & kClusterOffsetMask);
}

class ClusterGroup {
 public:
  // `ctas` CTAs per cluster; `threadsPerCta` threads each.
  ClusterGroup(uint32_t ctas, uint32_t threadsPerCta)
      : ctas_(ctas), threadsPerCta_(threadsPerCta) {}
  ClusterGroup(const ClusterGroup&) = delete;
  ClusterGroup& operator=(const ClusterGroup&) = delete;

  uint32_t ctas() const { return ctas_; }

  // Returns once every member has called it the same number of times (the cluster barrier then
  // starts afresh), or false as soon as `stop` says the launch is over.
  bool gather(const std::function<bool()>& stop);

  // Shared memory of rank `rank` for the cluster about to run (between two gathers).
  void publish(uint32_t rank, uint8_t* shared, uint64_t bytes) {
    shared_[rank] = shared;
    sharedBytes_[rank] = bytes;
  }
  // Host pointer for [offset, offset + len) of rank `rank`'s shared memory, or null.
  uint8_t* sharedOf(uint32_t rank, uint64_t offset, uint64_t len) const {
    if (rank >= ctas_ || offset + len > sharedBytes_[rank] || offset + len < offset) return nullptr;
    return shared_[rank] + offset;
  }

  // ---- barrier.cluster: every non-exited thread of the cluster arrives, then the phase ends ----
  // `n` threads arrive; returns the phase they arrived in.
  uint64_t arrive(uint32_t n);
  // A thread exits: it no longer holds the barrier. `arrivedIn` is the phase of an arrival it has
  // not waited for, or ~0 for none.
  void exited(uint64_t arrivedIn);
  uint64_t phase() const { return phase_.load(std::memory_order_acquire); }

  enum class Wait { kReleased, kDeadlock, kStopped };
  // Blocks the calling CTA (all its running threads wait on the barrier) until the phase moves
  // past `arrivedIn`. kDeadlock: every CTA still running waits and none can arrive.
  Wait wait(uint64_t arrivedIn, const std::function<bool()>& stop);
  // The calling CTA's threads have all exited.
  void finished();

  // mbarrier words live in shared memory that other CTAs may update (remote arrive, complete_tx).
  std::mutex& mbarrierMutex() { return mbarrierMutex_; }

 private:
  void completePhaseLocked();

  const uint32_t ctas_;
  const uint32_t threadsPerCta_;
  uint8_t* shared_[kMaxClusterCtas] = {};
  uint64_t sharedBytes_[kMaxClusterCtas] = {};

  std::mutex mutex_;
  std::condition_variable changed_;
  uint64_t gathered_ = 0, gatherRound_ = 0;  // gate
  std::atomic<uint64_t> phase_{0};
  uint64_t arrived_ = 0;  // arrivals in the current phase by threads still running
  uint64_t exited_ = 0;   // threads of the cluster that have exited (they hold no phase)
  uint32_t running_ = 0;  // CTAs still running
  uint32_t blocked_ = 0;  // CTAs waiting in wait(), and the phase each waits to end
  uint64_t waiting_[kMaxClusterCtas] = {};
  std::mutex mbarrierMutex_;
};

}  // namespace gpupool::ptx
