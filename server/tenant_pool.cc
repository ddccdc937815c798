#include "server/tenant_pool.h"

#include <chrono>
#include <iostream>
#include <stdexcept>

namespace gpupool::server {

TenantPool::TenantPool(const PoolConfig& config, size_t deviceCount)
    : path_(config.path),
      flushInterval_(config.meteringFlush),
      utilization_(deviceCount),
      lastSample_(std::chrono::steady_clock::now()) {
  tenants_.apply(config.tenants);
  for (size_t i = 0; i < deviceCount; ++i) {
    schedulers_.push_back(std::make_unique<DeviceScheduler>(config.starvationBound));
  }
  std::string error;
  store_ = MeteringStore::open(config.meteringDatabase, false, &error);
  if (!store_) throw std::runtime_error("metering database " + error);
  UsageByKey earlier = store_->report(0, &error);
  if (!error.empty())
    throw std::runtime_error("metering database " + config.meteringDatabase + ": " + error);
  usage_.seed(earlier);
  flusher_ = std::thread([this] { flushLoop(); });
}

TenantPool::~TenantPool() {
  {
    std::lock_guard lock(stopMutex_);
    stopping_ = true;
  }
  stopWake_.notify_all();
  flusher_.join();
  flush();
}

bool TenantPool::reload(std::string* error) {
  try {
    PoolConfig config = loadPoolConfig(path_);
    if (config.devices.size() != schedulers_.size()) {
      *error = path_ + ": the device list changed; restart gpupoold to change devices";
      return false;
    }
    tenants_.apply(config.tenants);
    for (auto& s : schedulers_) s->setStarvationBound(config.starvationBound);
    return true;
  } catch (const PoolConfigError& e) {
    *error = e.what();
    return false;
  }
}

double TenantPool::utilization(int device) const {
  if (device < 0 || static_cast<size_t>(device) >= utilization_.size()) return 0;
  return utilization_[static_cast<size_t>(device)].load();
}

void TenantPool::flush() {
  std::lock_guard lock(storeMutex_);
  // Memory held since the last sample, charged at its current size.
  auto now = std::chrono::steady_clock::now();
  double seconds = std::chrono::duration<double>(now - lastSample_).count();
  lastSample_ = now;
  for (const auto& account : tenants_.accounts()) {
    for (auto [device, bytes] : account->memoryByDevice()) {
      usage_.addMemoryTime(account->name(), device,
                           static_cast<double>(bytes) / double(1ull << 30) * seconds);
    }
  }
  for (size_t i = 0; i < schedulers_.size(); ++i) {
    utilization_[i].store(schedulers_[i]->sampleUtilization());
  }
  UsageByKey batch = usage_.takePending();
  std::string error;
  double unixNow =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  if (!store_->append(unixNow, batch, &error)) {
    std::cerr << "gpupoold: metering: cannot write usage (kept for the next try): " << error
              << "\n";
    usage_.restorePending(batch);
  }
}

void TenantPool::flushLoop() {
  std::unique_lock lock(stopMutex_);
  while (!stopping_) {
    stopWake_.wait_for(lock, flushInterval_);
    if (stopping_) break;
    lock.unlock();
    flush();
    lock.lock();
  }
}

}  // namespace gpupool::server
