#include "server/metering_ledger.h"

namespace gpupool::server {

void UsageTotals::add(const UsageTotals& o) {
  gpuSeconds += o.gpuSeconds;
  gibSeconds += o.gibSeconds;
  queueSeconds += o.queueSeconds;
  bytesIn += o.bytesIn;
  bytesOut += o.bytesOut;
  calls += o.calls;
  launches += o.launches;
}

void UsageLedger::addKernel(const std::string& tenant, int device, double gpuSeconds,
                            double queueSeconds) {
  UsageTotals delta;
  delta.gpuSeconds = gpuSeconds;
  delta.queueSeconds = queueSeconds;
  delta.launches = 1;
  std::lock_guard lock(mutex_);
  pending_[{tenant, device}].add(delta);
  totals_[{tenant, device}].add(delta);
}

void UsageLedger::addCall(const std::string& tenant, int device, uint64_t bytesIn,
                          uint64_t bytesOut) {
  UsageTotals delta;
  delta.bytesIn = bytesIn;
  delta.bytesOut = bytesOut;
  delta.calls = 1;
  std::lock_guard lock(mutex_);
  pending_[{tenant, device}].add(delta);
  totals_[{tenant, device}].add(delta);
}

void UsageLedger::addMemoryTime(const std::string& tenant, int device, double gibSeconds) {
  if (gibSeconds <= 0) return;
  UsageTotals delta;
  delta.gibSeconds = gibSeconds;
  std::lock_guard lock(mutex_);
  pending_[{tenant, device}].add(delta);
  totals_[{tenant, device}].add(delta);
}

UsageByKey UsageLedger::takePending() {
  std::lock_guard lock(mutex_);
  UsageByKey batch;
  batch.swap(pending_);
  return batch;
}

void UsageLedger::restorePending(const UsageByKey& batch) {
  std::lock_guard lock(mutex_);
  for (const auto& [key, usage] : batch) pending_[key].add(usage);
}

UsageByKey UsageLedger::totals() const {
  std::lock_guard lock(mutex_);
  return totals_;
}

void UsageLedger::seed(const UsageByKey& stored) {
  std::lock_guard lock(mutex_);
  for (const auto& [key, usage] : stored) totals_[key].add(usage);
}

}  // namespace gpupool::server
