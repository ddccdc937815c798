#include "server/device_scheduler.h"

#include <algorithm>

namespace gpupool::server {

DeviceScheduler::DeviceScheduler(std::chrono::milliseconds starvationBound)
    : starvationBound_(starvationBound), lastSample_(Clock::now()) {}

void DeviceScheduler::setStarvationBound(std::chrono::milliseconds bound) {
  std::lock_guard lock(mutex_);
  starvationBound_ = bound;
}

DeviceScheduler::Clock::duration DeviceScheduler::acquire(const std::string& tenant,
                                                          PriorityClass priority,
                                                          double /*weight*/) {
  std::unique_lock lock(mutex_);
  auto arrived = Clock::now();
  bool alreadyWaiting = std::any_of(waiting_.begin(), waiting_.end(),
                                    [&](const Waiter& w) { return w.tenant == tenant; });
  double& vt = virtualTime_[tenant];
  // Idle time earns nothing: a returning tenant starts no earlier than the class's clock.
  if (!alreadyWaiting) vt = std::max(vt, classClock_[static_cast<int>(priority)]);
  priorityOf_[tenant] = priority;
  auto me = waiting_.insert(waiting_.end(), Waiter{tenant, priority, arrived, false});
  dispatchLocked();
  // The device is busy whenever anyone waits, so every kernel's end re-runs the choice: starvation
  // deadlines need no timer of their own.
  while (!me->granted) {
    if (reserved_.empty()) {
      changed_.wait(lock);
    } else {
      // A reservation that runs out must hand the device on even if nobody else calls in.
      changed_.wait_until(lock, reservedUntil_);
      dispatchLocked();
    }
  }
  waiting_.erase(me);
  return runningSince_ - arrived;
}

void DeviceScheduler::release(const std::string& tenant, double weight, Clock::duration ran) {
  std::lock_guard lock(mutex_);
  busy_ = false;
  busyTotal_ += Clock::now() - runningSince_;
  double seconds = std::chrono::duration<double>(ran).count();
  virtualTime_[tenant] += seconds / std::max(weight, 1e-6);
  // The releasing tenant's next kernel usually asks a moment later (the stream worker picks it up
  // after this one). If it would win against everyone waiting, hold the device for it that long;
  // otherwise a tenant with a queue of kernels would alternate with any other, whatever weights.
  auto now = Clock::now();
  auto best = bestWaiterLocked(now);
  const Waiter* rival = best == waiting_.end() ? nullptr : &*best;
  bool rivalStarving = rival && now - rival->arrived > starvationBound_;
  bool releaserWins =
      !rival || (!rivalStarving && (priorityOf_[tenant] < rival->priority ||
                                    (priorityOf_[tenant] == rival->priority &&
                                     virtualTime_[tenant] <= virtualTime_[rival->tenant])));
  if (releaserWins && rival) {
    reserved_ = tenant;
    reservedUntil_ = now + kReservation;
    changed_.notify_all();  // waiters switch to waiting for the reservation's end
  }
  dispatchLocked();
}

std::list<DeviceScheduler::Waiter>::iterator DeviceScheduler::bestWaiterLocked(
    Clock::time_point now) {
  auto chosen = waiting_.end();
  // 1. Starving work, oldest first.
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
    if (now - it->arrived > starvationBound_ &&
        (chosen == waiting_.end() || it->arrived < chosen->arrived)) {
      chosen = it;
    }
  }
  if (chosen != waiting_.end()) return chosen;
  // 2. The best class, then 3. the smallest virtual time, then the earliest arrival.
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
    if (chosen == waiting_.end()) {
      chosen = it;
      continue;
    }
    if (it->priority != chosen->priority) {
      if (it->priority < chosen->priority) chosen = it;
      continue;
    }
    double a = virtualTime_[it->tenant], b = virtualTime_[chosen->tenant];
    if (a < b || (a == b && it->arrived < chosen->arrived)) chosen = it;
  }
  return chosen;
}

void DeviceScheduler::dispatchLocked() {
  if (busy_ || waiting_.empty()) return;
  auto now = Clock::now();
  auto chosen = waiting_.end();
  if (!reserved_.empty()) {
    if (now < reservedUntil_) {
      for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
        if (it->tenant == reserved_) chosen = it;
      }
      if (chosen == waiting_.end()) return;  // still held for the tenant that just ran
    }
    reserved_.clear();
  }
  if (chosen == waiting_.end()) chosen = bestWaiterLocked(now);
  int cls = static_cast<int>(chosen->priority);
  classClock_[cls] = std::max(classClock_[cls], virtualTime_[chosen->tenant]);
  chosen->granted = true;
  busy_ = true;
  runningSince_ = now;
  changed_.notify_all();
}

double DeviceScheduler::sampleUtilization() {
  std::lock_guard lock(mutex_);
  auto now = Clock::now();
  auto busy = busyTotal_ + (busy_ ? now - runningSince_ : Clock::duration{0});
  double window = std::chrono::duration<double>(now - lastSample_).count();
  double used = std::chrono::duration<double>(busy - busyAtSample_).count();
  lastSample_ = now;
  busyAtSample_ = busy;
  return window > 0 ? std::clamp(used / window, 0.0, 1.0) : 0.0;
}

double DeviceScheduler::busySeconds() const {
  std::lock_guard lock(mutex_);
  auto busy = busyTotal_ + (busy_ ? Clock::now() - runningSince_ : Clock::duration{0});
  return std::chrono::duration<double>(busy).count();
}

}  // namespace gpupool::server
