// NVML's per-process accounting (nvmlDeviceGetAccountingStats), kept by the pool: for each driver
// session and each device it had a context on, when it started there, how long its kernels ran,
// the most memory its contexts held, and when it ended. A session keeps its own records
// (SessionAccounting); when it ends they move to the server's AccountingHistory, which keeps the
// newest kRecordsPerDevice per device, as NVIDIA's driver keeps a circular buffer.
//
// Kernel time is what the launch gate measures, so it is known only where a gate runs (a pool
// with --config); elsewhere it is unmeasured (negative), never 0.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace gpupool::server {

struct AccountingRecord {
  uint64_t sessionId = 0;
  std::string clientName;  // "<program> (pid N)", as the client's Hello named it
  std::string tenant;      // empty when the server runs without --config
  int device = 0;
  uint64_t startUs = 0;       // wallClockMicros() (common/wall_clock.h)
  uint64_t endUs = 0;         // 0 while the session runs
  double kernelSeconds = -1;  // negative: not measured
  uint64_t peakBytes = 0;
};

// Kernel time on one device, added by the launch gate's threads.
using KernelClock = std::atomic<uint64_t>;  // nanoseconds

class SessionAccounting {
 public:
  // A context on `device` was created: the device's record starts (the first time). Returns the
  // clock its kernels add to, which the caller gives the launch gate when it has one (`measured`).
  std::shared_ptr<KernelClock> contextCreated(int device, bool measured);
  // A context on `device` that held at most `peakBytes` is gone.
  void contextDestroyed(int device, uint64_t peakBytes);
  // The records, one per device used; `livePeaks` holds, per device, the sum of the peaks of the
  // contexts alive now; `endUs` 0 while the session runs.
  std::vector<AccountingRecord> records(uint64_t sessionId, const std::string& clientName,
                                        const std::string& tenant,
                                        const std::map<int, uint64_t>& livePeaks,
                                        uint64_t endUs) const;

 private:
  struct DeviceUse {
    uint64_t startUs = 0;
    std::shared_ptr<KernelClock> kernelNs = std::make_shared<KernelClock>(0);
    bool measured = true;        // every context on the device had a gate
    uint64_t destroyedPeak = 0;  // the largest peak of a context destroyed
  };
  mutable std::mutex mutex_;  // status and accounting requests of other sessions read
  std::map<int, DeviceUse> devices_;
};

class AccountingHistory {
 public:
  static constexpr unsigned kRecordsPerDevice = 4000;

  void add(const std::vector<AccountingRecord>& ended);
  // The ended sessions' records on `device` of `tenant`, oldest first.
  std::vector<AccountingRecord> onDevice(int device, const std::string& tenant) const;

 private:
  mutable std::mutex mutex_;
  std::map<int, std::deque<AccountingRecord>> byDevice_;
};

}  // namespace gpupool::server
