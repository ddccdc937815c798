// Everything a configured pool adds to gpupoold: the tenants, one scheduler per device, the usage
// ledger and its durable store, and a background flusher that samples memory held (GiB-seconds) and
// device utilization and writes usage to SQLite.
//
// Contract: constructing it loads earlier usage from the store (so totals survive restarts) or
// throws std::runtime_error naming the database. reload() re-reads the configuration file and
// applies the tenant part (and the starvation bound) without touching sessions; a bad file changes
// nothing. The destructor flushes what is pending. Thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "server/device_scheduler.h"
#include "server/metering_ledger.h"
#include "server/metering_store.h"
#include "server/pool_config.h"
#include "server/tenant_registry.h"

namespace gpupool::server {

class TenantPool {
 public:
  TenantPool(const PoolConfig& config, size_t deviceCount);
  ~TenantPool();

  bool reload(std::string* error);
  std::shared_ptr<TenantAccount> authenticate(const std::string& token) const {
    return tenants_.authenticate(token);
  }
  const TenantRegistry& tenants() const { return tenants_; }
  DeviceScheduler& scheduler(int device) { return *schedulers_.at(static_cast<size_t>(device)); }
  size_t deviceCount() const { return schedulers_.size(); }
  UsageLedger& usage() { return usage_; }
  // The device's busy fraction over the last flush interval.
  double utilization(int device) const;
  // Writes pending usage now (also done every flush interval).
  void flush();

 private:
  void flushLoop();

  std::string path_;
  std::chrono::milliseconds flushInterval_;
  TenantRegistry tenants_;
  std::vector<std::unique_ptr<DeviceScheduler>> schedulers_;
  std::vector<std::atomic<double>> utilization_;
  UsageLedger usage_;
  std::mutex storeMutex_;
  std::unique_ptr<MeteringStore> store_;
  std::chrono::steady_clock::time_point lastSample_;

  std::mutex stopMutex_;
  std::condition_variable stopWake_;
  bool stopping_ = false;
  std::thread flusher_;
};

}  // namespace gpupool::server
