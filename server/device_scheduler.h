// Decides whose queued kernel runs next on one pool device.
//
// The device runs one kernel at a time (running kernels are never preempted). When it is free, the
// next kernel is chosen among those waiting:
// 1. a waiting kernel that has waited longer than the starvation bound goes first (oldest first),
// so
//    low-priority work is delayed by at most about the bound plus one kernel;
// 2. otherwise the highest priority class with waiting work wins (strict order between classes);
// 3. inside the class, weighted fair share: each tenant has a virtual time that grows by
//    kernelSeconds / weight, and the tenant with the smallest one goes next. A tenant that was idle
//    starts at the class's current virtual time, so idling banks no credit.
// Queueing delay (from asking to starting) is returned to the caller for metering.
//
// Thread-safe. acquire() blocks the calling thread (a stream worker) until its turn.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <map>
#include <mutex>
#include <string>

#include "server/pool_config.h"

namespace gpupool::server {

class DeviceScheduler {
 public:
  using Clock = std::chrono::steady_clock;

  explicit DeviceScheduler(std::chrono::milliseconds starvationBound);

  // Blocks until `tenant` may start a kernel. Returns how long it waited.
  Clock::duration acquire(const std::string& tenant, PriorityClass priority, double weight);
  // The kernel acquire() admitted has finished after running `ran`.
  void release(const std::string& tenant, double weight, Clock::duration ran);

  void setStarvationBound(std::chrono::milliseconds bound);
  // Fraction of the time the device ran kernels since the previous call (0..1).
  double sampleUtilization();
  // Seconds of kernel time since start.
  double busySeconds() const;

 private:
  struct Waiter {
    std::string tenant;
    PriorityClass priority;
    Clock::time_point arrived;
    bool granted = false;
  };
  // Picks the next waiter and marks it granted; the caller holds mutex_.
  void dispatchLocked();
  // The waiter rules 1-3 choose (end() when none waits); the caller holds mutex_.
  std::list<Waiter>::iterator bestWaiterLocked(Clock::time_point now);

  // How long the device is held for a tenant whose kernel just ended and who would go next anyway.
  static constexpr std::chrono::milliseconds kReservation{2};

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::list<Waiter> waiting_;
  bool busy_ = false;
  std::chrono::milliseconds starvationBound_;
  std::map<std::string, double> virtualTime_;
  std::map<std::string, PriorityClass> priorityOf_;  // each tenant's class at its last request
  std::string reserved_;  // the tenant the free device is held for, until reservedUntil_
  Clock::time_point reservedUntil_{};
  double classClock_[kPriorityClasses] = {0, 0, 0};
  Clock::duration busyTotal_{0};
  Clock::duration busyAtSample_{0};
  Clock::time_point runningSince_{};
  Clock::time_point lastSample_;
};

}  // namespace gpupool::server
