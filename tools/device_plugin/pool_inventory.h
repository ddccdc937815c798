// What the pool's servers hold, turned into the kubelet's resources: the pure mapping from the
// servers' device lists (and whether each server answered) to resource names and device IDs, so
// the MIG strategies and memory shares are tested without a server (tests/device_plugin).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tools/device_plugin/plugin_config.h"

namespace gpupool::device_plugin {

inline constexpr const char* kGpuResource = "gpupool.io/gpu";
inline constexpr const char* kMemoryResource = "gpupool.io/gpu-memory";
inline constexpr const char* kMigResourcePrefix = "gpupool.io/mig-";
inline constexpr uint64_t kGiB = uint64_t{1} << 30;

// One device of a server's status (DeviceStatus).
struct PoolDevice {
  std::string uuid;  // "GPU-…" or "MIG-…"
  uint64_t memoryTotal = 0;
  std::string parent;   // MIG: the parent GPU's UUID
  std::string profile;  // MIG: e.g. "1g.10gb"
};

// The last thing known of one configured server: its devices as last answered, and whether it
// answered the latest poll. A server that never answered has no devices.
struct ServerSnapshot {
  std::string endpoint;
  bool reachable = false;
  std::vector<PoolDevice> devices;
};

// One kubelet device of a resource.
struct AdvertisedDevice {
  std::string id;        // the device's UUID; for a memory share "<uuid>::<n>"
  bool healthy = false;  // its server answered the latest poll
  std::string endpoint;  // the server holding it
  std::string uuid;      // the pool device (the same for every share of one device)
  bool operator==(const AdvertisedDevice&) const = default;
};

// Resource name -> its devices, in the servers' order. gpupool.io/gpu is always present (empty when
// the pool has nothing to offer as a whole device), gpupool.io/gpu-memory when memoryShares.
using ResourceMap = std::map<std::string, std::vector<AdvertisedDevice>>;

// A device UUID offered by two servers is offered once, by the first (IDs must be unique to the
// kubelet); *duplicates names the others.
ResourceMap advertisedResources(const std::vector<ServerSnapshot>& servers, MigStrategy strategy,
                                bool memoryShares, std::vector<std::string>* duplicates = nullptr);

// "gpupool.io/mig-1g.10gb" -> "gpupool-mig-1g.10gb.sock": the socket the resource's server
// listens on, in the kubelet's directory.
std::string socketNameOf(const std::string& resource);

// "GPU-…::3" -> "GPU-…"; an ID without "::" is its own device.
std::string deviceOfId(const std::string& id);

}  // namespace gpupool::device_plugin
