#include "server/session_accounting.h"

#include <algorithm>

#include "common/wall_clock.h"

namespace gpupool::server {

std::shared_ptr<KernelClock> SessionAccounting::contextCreated(int device, bool measured) {
  std::lock_guard lock(mutex_);
  auto [it, fresh] = devices_.try_emplace(device);
  if (fresh) it->second.startUs = wallClockMicros();
  it->second.measured = it->second.measured && measured;
  return it->second.kernelNs;
}

void SessionAccounting::contextDestroyed(int device, uint64_t peakBytes) {
  std::lock_guard lock(mutex_);
  auto it = devices_.find(device);
  if (it != devices_.end()) {
    it->second.destroyedPeak = std::max(it->second.destroyedPeak, peakBytes);
  }
}

std::vector<AccountingRecord> SessionAccounting::records(uint64_t sessionId,
                                                         const std::string& clientName,
                                                         const std::string& tenant,
                                                         const std::map<int, uint64_t>& livePeaks,
                                                         uint64_t endUs) const {
  std::lock_guard lock(mutex_);
  std::vector<AccountingRecord> out;
  for (const auto& [device, use] : devices_) {
    AccountingRecord r;
    r.sessionId = sessionId;
    r.clientName = clientName;
    r.tenant = tenant;
    r.device = device;
    r.startUs = use.startUs;
    r.endUs = endUs;
    r.kernelSeconds = use.measured ? static_cast<double>(use.kernelNs->load()) * 1e-9 : -1;
    auto live = livePeaks.find(device);
    // Contexts of one device that lived at different times: the largest of them; contexts alive
    // together: their peaks summed (an upper bound when they peaked at different moments).
    r.peakBytes = std::max(use.destroyedPeak, live == livePeaks.end() ? 0 : live->second);
    out.push_back(std::move(r));
  }
  return out;
}

void AccountingHistory::add(const std::vector<AccountingRecord>& ended) {
  std::lock_guard lock(mutex_);
  for (const AccountingRecord& r : ended) {
    auto& kept = byDevice_[r.device];
    kept.push_back(r);
    if (kept.size() > kRecordsPerDevice) kept.pop_front();
  }
}

std::vector<AccountingRecord> AccountingHistory::onDevice(int device,
                                                          const std::string& tenant) const {
  std::lock_guard lock(mutex_);
  std::vector<AccountingRecord> out;
  auto it = byDevice_.find(device);
  if (it == byDevice_.end()) return out;
  for (const AccountingRecord& r : it->second) {
    if (r.tenant == tenant) out.push_back(r);
  }
  return out;
}

}  // namespace gpupool::server
