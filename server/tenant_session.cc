#include "server/tenant_session.h"

#include <algorithm>
#include <chrono>

namespace gpupool::server {
namespace {

// A context's gate: the device's scheduler decides when its kernels start, and the meter hears how
// long they waited and ran.
class TenantLaunchGate final : public LaunchGate {
 public:
  TenantLaunchGate(TenantPool& pool, std::shared_ptr<TenantAccount> account, int device,
                   std::shared_ptr<KernelClock> kernelClock)
      : pool_(pool),
        account_(std::move(account)),
        device_(device),
        kernelClock_(std::move(kernelClock)) {}

  void enter() override {
    TenantConfig policy = account_->policy();  // read per kernel, so a reload applies at once
    waited() = std::chrono::duration<double>(pool_.scheduler(device_).acquire(
                                                 account_->name(), policy.priority, policy.weight))
                   .count();
  }
  void leave(double seconds) override {
    TenantConfig policy = account_->policy();
    pool_.scheduler(device_).release(account_->name(), policy.weight,
                                     std::chrono::duration_cast<DeviceScheduler::Clock::duration>(
                                         std::chrono::duration<double>(seconds)));
    pool_.usage().addKernel(account_->name(), device_, seconds, waited());
    if (kernelClock_) *kernelClock_ += static_cast<uint64_t>(std::max(seconds, 0.0) * 1e9);
  }

 private:
  // enter() and leave() of one kernel run on the same worker thread; kernels of other streams of
  // the same context run on other threads.
  static double& waited() {
    thread_local double value = 0;
    return value;
  }

  TenantPool& pool_;
  std::shared_ptr<TenantAccount> account_;
  int device_;
  std::shared_ptr<KernelClock> kernelClock_;
};

}  // namespace

TenantSession::TenantSession(TenantPool& pool, std::shared_ptr<TenantAccount> account)
    : pool_(pool), account_(std::move(account)) {}

TenantSession::~TenantSession() {
  for (auto& [id, held] : contexts_) account_->releaseMemory(held.device, held.bytes);
  if (countedSession_) account_->closeSession();
}

bool TenantSession::admitDriverSession(std::string* why) {
  if (!countedSession_) countedSession_ = account_->openSession(why);
  return countedSession_;
}

Status TenantSession::checkDevice(int device) const {
  if (!account_->mayUseDevice(device)) {
    return Status::error(CUDA_ERROR_INVALID_DEVICE,
                         "tenant '" + tenant() + "' may not use device " + std::to_string(device));
  }
  return Status::success();
}

bool TenantSession::gatesDevice(int device) const {
  return device >= 0 && static_cast<size_t>(device) < pool_.deviceCount();
}

void TenantSession::attachContext(uint64_t context, int device, BackendContext& backend,
                                  std::shared_ptr<KernelClock> kernelClock) {
  contexts_[context] = Held{device, 0};
  if (gatesDevice(device)) {
    backend.setLaunchGate(
        std::make_shared<TenantLaunchGate>(pool_, account_, device, std::move(kernelClock)));
  }
}

void TenantSession::contextDestroyed(uint64_t context) {
  auto it = contexts_.find(context);
  if (it == contexts_.end()) return;
  account_->releaseMemory(it->second.device, it->second.bytes);
  contexts_.erase(it);
}

Status TenantSession::reserve(uint64_t context, uint64_t bytes) {
  auto it = contexts_.find(context);
  if (it == contexts_.end()) return Status::success();
  std::string why;
  if (!account_->reserveMemory(it->second.device, bytes, &why)) {
    return Status::error(CUDA_ERROR_OUT_OF_MEMORY, why);
  }
  it->second.bytes += bytes;
  return Status::success();
}

void TenantSession::settle(uint64_t context, BackendContext& backend, uint64_t reserved, bool ok,
                           uint64_t address) {
  auto it = contexts_.find(context);
  if (it == contexts_.end()) return;
  Held& held = it->second;
  uint64_t actual = ok ? allocationSize(backend, address) : 0;
  if (ok && actual == 0) actual = reserved;
  if (actual > reserved) {
    account_->chargeMemory(held.device, actual - reserved);
  } else {
    account_->releaseMemory(held.device, reserved - actual);
  }
  held.bytes = held.bytes - reserved + actual;
}

uint64_t TenantSession::allocationSize(BackendContext& backend, uint64_t address) {
  uint64_t base = 0, bytes = 0;
  if (!backend.memGetAddressRange(address, &base, &bytes).ok() || base != address) return 0;
  return bytes;
}

void TenantSession::freed(uint64_t context, uint64_t bytes) {
  auto it = contexts_.find(context);
  if (it == contexts_.end()) return;
  bytes = std::min(bytes, it->second.bytes);
  it->second.bytes -= bytes;
  account_->releaseMemory(it->second.device, bytes);
}

void TenantSession::settlePoolIdle(uint64_t context, uint64_t bytes) {
  auto it = contexts_.find(context);
  if (it == contexts_.end()) return;
  Held& held = it->second;
  if (bytes > held.poolIdle) {
    account_->chargeMemory(held.device, bytes - held.poolIdle);
  } else {
    account_->releaseMemory(held.device, held.poolIdle - bytes);
  }
  held.bytes = held.bytes - held.poolIdle + bytes;
  held.poolIdle = bytes;
}

void TenantSession::memoryView(uint64_t* freeBytes, uint64_t* totalBytes) const {
  uint64_t quota = account_->memoryQuota();
  if (!quota) return;
  uint64_t used = account_->memoryUsed();
  *totalBytes = std::min(*totalBytes, quota);
  *freeBytes = std::min(*freeBytes, quota > used ? quota - used : 0);
}

void TenantSession::recordCall(uint64_t context, uint64_t bytesIn, uint64_t bytesOut,
                               CUresult result) {
  if (result != CUDA_SUCCESS && result != CUDA_ERROR_NOT_READY) account_->countFailedCall();
  auto it = contexts_.find(context);
  pool_.usage().addCall(tenant(), it == contexts_.end() ? -1 : it->second.device, bytesIn,
                        bytesOut);
}

}  // namespace gpupool::server
