#include "cluster.h"

#include <chrono>

namespace gpupool::ptx {

namespace {
// How often a waiting host thread looks again at a launch that may have failed or been cancelled
// elsewhere (nothing notifies it of that).
constexpr std::chrono::milliseconds kStopPoll{5};
}  // namespace

bool ClusterGroup::gather(const std::function<bool()>& stop) {
  std::unique_lock lock(mutex_);
  const uint64_t round = gatherRound_;
  if (++gathered_ == ctas_) {
    gathered_ = 0;
    ++gatherRound_;
    arrived_ = exited_ = 0;
    blocked_ = 0;
    running_ = ctas_;
    phase_.fetch_add(1, std::memory_order_release);  // no arrival of a past cluster counts
    changed_.notify_all();
    return true;
  }
  while (gatherRound_ == round) {
    if (stop()) return false;
    changed_.wait_for(lock, kStopPoll);
  }
  return true;
}

void ClusterGroup::completePhaseLocked() {
  if (arrived_ == 0 || arrived_ + exited_ < uint64_t{ctas_} * threadsPerCta_) return;
  arrived_ = 0;
  phase_.fetch_add(1, std::memory_order_release);
  changed_.notify_all();
}

uint64_t ClusterGroup::arrive(uint32_t n) {
  std::lock_guard lock(mutex_);
  const uint64_t in = phase_.load(std::memory_order_relaxed);
  arrived_ += n;
  completePhaseLocked();
  return in;
}

void ClusterGroup::exited(uint64_t arrivedIn) {
  std::lock_guard lock(mutex_);
  // An arrival in the phase still open now counts as the exit does.
  if (arrivedIn == phase_.load(std::memory_order_relaxed) && arrived_ > 0) --arrived_;
  ++exited_;
  // Exits alone end no phase nobody arrived in; an open one ends once the rest are gone.
  if (arrived_ > 0) completePhaseLocked();
}

ClusterGroup::Wait ClusterGroup::wait(uint64_t arrivedIn, const std::function<bool()>& stop) {
  std::unique_lock lock(mutex_);
  waiting_[blocked_++] = arrivedIn;
  changed_.notify_all();  // a CTA already waiting may now see the whole cluster waiting
  Wait result = Wait::kReleased;
  while (phase_.load(std::memory_order_relaxed) == arrivedIn) {
    // Deadlock: every CTA still running waits for the phase still open (one that waits for a
    // phase already over has only to wake up).
    uint32_t stuck = 0;
    for (uint32_t i = 0; i < blocked_; ++i) stuck += waiting_[i] == arrivedIn ? 1 : 0;
    if (stuck == running_) {
      result = Wait::kDeadlock;
      break;
    }
    if (stop()) {
      result = Wait::kStopped;
      break;
    }
    changed_.wait_for(lock, kStopPoll);
  }
  for (uint32_t i = 0; i < blocked_; ++i) {
    if (waiting_[i] == arrivedIn) {
      waiting_[i] = waiting_[--blocked_];
      break;
    }
  }
  return result;
}

void ClusterGroup::finished() {
  std::lock_guard lock(mutex_);
  --running_;
  changed_.notify_all();
}

}  // namespace gpupool::ptx
