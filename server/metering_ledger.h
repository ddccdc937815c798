// Usage counters per (tenant, device), accumulated in memory as work happens and taken in batches
// by the metering flusher, which writes them to the MeteringStore.
//
// Contract: every amount added is returned by exactly one takePending() (nothing lost, nothing
// counted twice); totals() is everything ever added plus what seed() loaded. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace gpupool::server {

struct UsageTotals {
  double gpuSeconds = 0;    // kernel execution time measured by the backend
  double gibSeconds = 0;    // device memory held over time
  double queueSeconds = 0;  // time kernels waited for the device
  uint64_t bytesIn = 0;     // client to server (host-to-device copies, module images)
  uint64_t bytesOut = 0;    // server to client
  uint64_t calls = 0;       // requests served
  uint64_t launches = 0;    // kernels run

  void add(const UsageTotals& other);
};

// Device -1 holds what belongs to no device (requests outside a context).
using UsageKey = std::pair<std::string, int>;
using UsageByKey = std::map<UsageKey, UsageTotals>;

class UsageLedger {
 public:
  void addKernel(const std::string& tenant, int device, double gpuSeconds, double queueSeconds);
  void addCall(const std::string& tenant, int device, uint64_t bytesIn, uint64_t bytesOut);
  void addMemoryTime(const std::string& tenant, int device, double gibSeconds);
  // What was added since the previous call.
  UsageByKey takePending();
  // Gives back a batch that could not be stored, so the next flush retries it.
  void restorePending(const UsageByKey& batch);
  UsageByKey totals() const;
  // Adds earlier totals (from the store at start) to totals() only.
  void seed(const UsageByKey& stored);

 private:
  mutable std::mutex mutex_;
  UsageByKey pending_;
  UsageByKey totals_;
};

}  // namespace gpupool::server
