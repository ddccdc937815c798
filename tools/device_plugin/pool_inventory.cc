#include "tools/device_plugin/pool_inventory.h"

#include <set>

namespace gpupool::device_plugin {

ResourceMap advertisedResources(const std::vector<ServerSnapshot>& servers, MigStrategy strategy,
                                bool memoryShares, std::vector<std::string>* duplicates) {
  ResourceMap resources;
  resources[kGpuResource];
  if (memoryShares) resources[kMemoryResource];
  std::set<std::string> seen;
  for (const ServerSnapshot& server : servers) {
    // A GPU whose MIG instances are listed is a parent: never offered whole while split.
    std::set<std::string> parents;
    for (const PoolDevice& d : server.devices) {
      if (!d.parent.empty()) parents.insert(d.parent);
    }
    for (const PoolDevice& d : server.devices) {
      if (!seen.insert(d.uuid).second) {
        if (duplicates) duplicates->push_back(d.uuid + " (again at " + server.endpoint + ")");
        continue;
      }
      bool mig = !d.parent.empty();
      std::string resource;
      if (!mig) {
        // Under "none" a parent's instances are not offered, and neither is the parent: its
        // memory and SMs belong to the instances.
        if (parents.count(d.uuid)) continue;
        resource = kGpuResource;
      } else if (strategy == MigStrategy::kSingle) {
        resource = kGpuResource;
      } else if (strategy == MigStrategy::kMixed && !d.profile.empty()) {
        resource = kMigResourcePrefix + d.profile;
      } else {
        continue;
      }
      AdvertisedDevice device{d.uuid, server.reachable, server.endpoint, d.uuid};
      resources[resource].push_back(device);
      if (memoryShares) {
        for (uint64_t share = 0; share < d.memoryTotal / kGiB; ++share) {
          device.id = d.uuid + "::" + std::to_string(share);
          resources[kMemoryResource].push_back(device);
        }
      }
    }
  }
  return resources;
}

std::string socketNameOf(const std::string& resource) {
  std::string name = resource;
  if (auto slash = name.find('/'); slash != std::string::npos) name = name.substr(slash + 1);
  return "gpupool-" + name + ".sock";
}

std::string deviceOfId(const std::string& id) {
  auto sep = id.find("::");
  return sep == std::string::npos ? id : id.substr(0, sep);
}

}  // namespace gpupool::device_plugin
