// The pool as the plugin last saw it: each configured server's status polled every poll_seconds
// (tools/status_query), turned into resources (pool_inventory.h) and published to the resource
// servers, which stream every change to the kubelet.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "tools/device_plugin/plugin_config.h"
#include "tools/device_plugin/pool_inventory.h"

namespace gpupool::device_plugin {

class Inventory {
 public:
  // Replaces the resources; wakes the waiters when anything changed.
  void publish(ResourceMap resources);
  ResourceMap snapshot() const;
  std::vector<AdvertisedDevice> devicesOf(const std::string& resource) const;
  uint64_t generation() const;
  // Returns when the generation differs from `seen`, wake() is called or `timeout` passes.
  uint64_t waitForChange(uint64_t seen, std::chrono::milliseconds timeout);
  void wake();

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  ResourceMap resources_;
  uint64_t generation_ = 0;
  bool woken_ = false;
};

class InventoryPoller {
 public:
  InventoryPoller(const PluginConfig& config, Inventory& inventory);
  // Asks every server once and publishes the result, logging what changed.
  void pollOnce();
  // pollOnce every poll_seconds until `stop`.
  void run(const std::atomic<bool>& stop);

 private:
  const PluginConfig& config_;
  Inventory& inventory_;
  std::vector<ServerSnapshot> servers_;
  std::vector<bool> polled_;
};

}  // namespace gpupool::device_plugin
