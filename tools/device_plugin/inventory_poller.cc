#include "tools/device_plugin/inventory_poller.h"

#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <thread>

#include "client/pool_token.h"
#include "tools/status_query.h"

namespace gpupool::device_plugin {

void Inventory::publish(ResourceMap resources) {
  std::lock_guard lock(mutex_);
  if (resources == resources_) return;
  resources_ = std::move(resources);
  ++generation_;
  changed_.notify_all();
}

ResourceMap Inventory::snapshot() const {
  std::lock_guard lock(mutex_);
  return resources_;
}

std::vector<AdvertisedDevice> Inventory::devicesOf(const std::string& resource) const {
  std::lock_guard lock(mutex_);
  auto it = resources_.find(resource);
  return it == resources_.end() ? std::vector<AdvertisedDevice>{} : it->second;
}

uint64_t Inventory::generation() const {
  std::lock_guard lock(mutex_);
  return generation_;
}

uint64_t Inventory::waitForChange(uint64_t seen, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, timeout, [&] { return generation_ != seen || woken_; });
  woken_ = false;
  return generation_;
}

void Inventory::wake() {
  std::lock_guard lock(mutex_);
  woken_ = true;
  changed_.notify_all();
}

InventoryPoller::InventoryPoller(const PluginConfig& config, Inventory& inventory)
    : config_(config), inventory_(inventory), polled_(config.servers.size(), false) {
  for (const PoolServerConfig& server : config.servers) {
    servers_.push_back({server.endpoint, false, {}});
  }
}

void InventoryPoller::pollOnce() {
  for (size_t i = 0; i < servers_.size(); ++i) {
    ServerSnapshot& server = servers_[i];
    const PoolServerConfig& configured = config_.servers[i];
    std::string why;
    std::string token;
    if (!configured.tokenFile.empty()) {
      token = client::tokenFromFile(configured.tokenFile, &why);
      if (!why.empty()) why = configured.tokenFile + " " + why;
    }
    std::unique_ptr<tools::ServerStatus> status;
    if (why.empty()) {
      std::string error;
      auto endpoint = transport::parseEndpoint(server.endpoint, &error);
      tools::StatusFailure failure;
      if (endpoint) {
        status = tools::fetchStatus(*endpoint, "gpupool-device-plugin", &failure,
                                    configured.tokenFile.empty() ? nullptr : &token);
      }
      why = endpoint ? failure.message : error;
    } else {
      why = "token_file: " + why;
    }
    bool wasReachable = server.reachable;
    std::vector<PoolDevice> before = server.devices;
    if (status) {
      server.reachable = true;
      server.devices.clear();
      for (auto d : status->reader().getDevices()) {
        server.devices.push_back(
            {d.getUuid().cStr(), d.getMemoryTotal(), d.getParent().cStr(), d.getProfile().cStr()});
      }
    } else {
      server.reachable = false;
    }
    if (server.reachable != wasReachable || !polled_[i]) {
      if (server.reachable) {
        std::cerr << "gpupool-device-plugin: " << server.endpoint
                  << " answers: " << server.devices.size() << " device(s) Healthy\n";
      } else {
        std::cerr << "gpupool-device-plugin: " << server.endpoint << " does not answer (" << why
                  << "): "
                  << (server.devices.empty() ? std::string("none of its devices is listed")
                                             : "its " + std::to_string(server.devices.size()) +
                                                   " device(s) are Unhealthy")
                  << " until it does; check that gpupoold runs there and that this node can reach "
                     "it\n";
      }
    }
    if (server.reachable && polled_[i] && wasReachable) {
      std::set<std::string> old, now;
      for (const auto& d : before) old.insert(d.uuid);
      for (const auto& d : server.devices) now.insert(d.uuid);
      for (const auto& u : now) {
        if (!old.count(u)) {
          std::cerr << "gpupool-device-plugin: " << server.endpoint << ": device " << u
                    << " appeared\n";
        }
      }
      for (const auto& u : old) {
        if (!now.count(u)) {
          std::cerr << "gpupool-device-plugin: " << server.endpoint << ": device " << u
                    << " is gone\n";
        }
      }
    }
    polled_[i] = true;
  }
  std::vector<std::string> duplicates;
  ResourceMap resources =
      advertisedResources(servers_, config_.migStrategy, config_.memoryShares, &duplicates);
  for (const std::string& d : duplicates) {
    std::cerr << "gpupool-device-plugin: device " << d
              << " is offered once only: two servers name the same UUID\n";
  }
  inventory_.publish(std::move(resources));
}

void InventoryPoller::run(const std::atomic<bool>& stop) {
  while (!stop) {
    auto next = std::chrono::steady_clock::now() + std::chrono::seconds(config_.pollSeconds);
    pollOnce();
    while (!stop && std::chrono::steady_clock::now() < next) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
}

}  // namespace gpupool::device_plugin
