// The tenants of a configured pool: who may connect (by token), what each may hold (a memory quota
// across all devices), where (a device allow-list) and how its work is ordered (priority, weight).
//
// Contract:
// - authenticate() maps a token to its tenant's account, or null for an unknown token.
// - An account lives as long as any session uses it. apply() (SIGHUP reload) updates the policy of
//   accounts in place, adds new tenants and retires removed ones: a retired tenant's running
//   sessions go on (nothing is dropped), but its token no longer opens new sessions.
// - The memory ledger is exact: reserveMemory either takes the bytes within the quota or takes
//   nothing. All methods are thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "server/pool_config.h"

namespace gpupool::server {

class TenantAccount {
 public:
  explicit TenantAccount(TenantConfig policy);

  const std::string& name() const { return name_; }
  TenantConfig policy() const;
  void setPolicy(TenantConfig policy);
  bool mayUseDevice(int device) const;

  // Takes `bytes` on `device` against the quota. False, with the reason, when it would exceed it.
  bool reserveMemory(int device, uint64_t bytes, std::string* why);
  // Takes bytes without a quota check (rounding by the allocator of bytes already granted).
  void chargeMemory(int device, uint64_t bytes);
  void releaseMemory(int device, uint64_t bytes);
  uint64_t memoryUsed() const;
  uint64_t memoryUsed(int device) const;
  // Bytes held per device.
  std::map<int, uint64_t> memoryByDevice() const;
  // 0 = no quota.
  uint64_t memoryQuota() const;

  // Counts a driver session against the tenant's max_sessions. False, with the reason, when the
  // tenant already has that many open; every true is matched by one closeSession().
  bool openSession(std::string* why);
  void closeSession();

  // Requests answered with an error (not CUDA_ERROR_NOT_READY, which is a poll's normal answer),
  // for /metrics; counted since the server started, not metered.
  void countFailedCall() { failedCalls_.fetch_add(1, std::memory_order_relaxed); }
  uint64_t failedCalls() const { return failedCalls_.load(std::memory_order_relaxed); }

 private:
  const std::string name_;
  mutable std::mutex mutex_;
  TenantConfig policy_;
  std::map<int, uint64_t> used_;
  uint64_t total_ = 0;
  uint32_t sessions_ = 0;
  std::atomic<uint64_t> failedCalls_{0};
};

class TenantRegistry {
 public:
  // Replaces the tenant list (see the contract above).
  void apply(const std::vector<TenantConfig>& tenants);
  std::shared_ptr<TenantAccount> authenticate(const std::string& token) const;
  // The current (not retired) tenants, in configuration order.
  std::vector<std::shared_ptr<TenantAccount>> accounts() const;

 private:
  mutable std::mutex mutex_;
  std::vector<std::shared_ptr<TenantAccount>> current_;
  // Retired accounts stay reachable by name, so a tenant removed and added back keeps its ledger.
  std::map<std::string, std::weak_ptr<TenantAccount>> byName_;
};

}  // namespace gpupool::server
