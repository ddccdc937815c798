#include "server/tenant_registry.h"

#include <algorithm>

namespace gpupool::server {
namespace {

// Compares in time independent of where the first difference is, so response timing does not
// reveal how much of a guessed token was right.
bool sameToken(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

TenantAccount::TenantAccount(TenantConfig policy)
    : name_(policy.name), policy_(std::move(policy)) {}

TenantConfig TenantAccount::policy() const {
  std::lock_guard lock(mutex_);
  return policy_;
}

void TenantAccount::setPolicy(TenantConfig policy) {
  std::lock_guard lock(mutex_);
  policy_ = std::move(policy);
}

bool TenantAccount::mayUseDevice(int device) const {
  std::lock_guard lock(mutex_);
  return policy_.devices.empty() ||
         std::find(policy_.devices.begin(), policy_.devices.end(), device) != policy_.devices.end();
}

bool TenantAccount::reserveMemory(int device, uint64_t bytes, std::string* why) {
  std::lock_guard lock(mutex_);
  if (policy_.memoryQuota &&
      (bytes > policy_.memoryQuota || total_ > policy_.memoryQuota - bytes)) {
    *why = "tenant '" + name_ + "' memory quota exceeded: holds " + std::to_string(total_) +
           " bytes, asked for " + std::to_string(bytes) + ", quota " +
           std::to_string(policy_.memoryQuota);
    return false;
  }
  used_[device] += bytes;
  total_ += bytes;
  return true;
}

bool TenantAccount::openSession(std::string* why) {
  std::lock_guard lock(mutex_);
  if (policy_.maxSessions && sessions_ >= policy_.maxSessions) {
    *why = "tenant '" + name_ + "' already has " + std::to_string(sessions_) +
           " sessions open, its limit (max_sessions in the pool configuration); end one and retry";
    return false;
  }
  ++sessions_;
  return true;
}

void TenantAccount::closeSession() {
  std::lock_guard lock(mutex_);
  if (sessions_) --sessions_;
}

void TenantAccount::chargeMemory(int device, uint64_t bytes) {
  std::lock_guard lock(mutex_);
  used_[device] += bytes;
  total_ += bytes;
}

void TenantAccount::releaseMemory(int device, uint64_t bytes) {
  std::lock_guard lock(mutex_);
  uint64_t& held = used_[device];
  bytes = std::min(bytes, held);
  held -= bytes;
  total_ -= bytes;
}

uint64_t TenantAccount::memoryUsed() const {
  std::lock_guard lock(mutex_);
  return total_;
}

uint64_t TenantAccount::memoryUsed(int device) const {
  std::lock_guard lock(mutex_);
  auto it = used_.find(device);
  return it == used_.end() ? 0 : it->second;
}

std::map<int, uint64_t> TenantAccount::memoryByDevice() const {
  std::lock_guard lock(mutex_);
  return used_;
}

uint64_t TenantAccount::memoryQuota() const {
  std::lock_guard lock(mutex_);
  return policy_.memoryQuota;
}

void TenantRegistry::apply(const std::vector<TenantConfig>& tenants) {
  std::lock_guard lock(mutex_);
  std::vector<std::shared_ptr<TenantAccount>> next;
  for (const auto& t : tenants) {
    std::shared_ptr<TenantAccount> account = byName_[t.name].lock();
    if (account) {
      account->setPolicy(t);
    } else {
      account = std::make_shared<TenantAccount>(t);
      byName_[t.name] = account;
    }
    next.push_back(std::move(account));
  }
  current_ = std::move(next);
  std::erase_if(byName_, [](const auto& entry) { return entry.second.expired(); });
}

std::shared_ptr<TenantAccount> TenantRegistry::authenticate(const std::string& token) const {
  std::lock_guard lock(mutex_);
  std::shared_ptr<TenantAccount> found;
  for (const auto& account : current_) {
    if (sameToken(account->policy().token, token) && !token.empty()) found = account;
  }
  return found;
}

std::vector<std::shared_ptr<TenantAccount>> TenantRegistry::accounts() const {
  std::lock_guard lock(mutex_);
  return current_;
}

}  // namespace gpupool::server
