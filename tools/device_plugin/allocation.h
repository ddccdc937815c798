// What a container granted pool devices gets (Allocate), which devices the plugin would rather
// grant (GetPreferredAllocation), and the namespace's token handed over before the container starts
// (PreStartContainer). Plain types: resource_server.cc turns them into the kubelet's messages.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "tools/device_plugin/plugin_config.h"
#include "tools/device_plugin/pool_inventory.h"

namespace gpupool::device_plugin {

// Where the allocation directory appears in the container, and the token in it.
inline constexpr const char* kContainerRunDir = "/run/gpupool";
inline constexpr const char* kContainerTokenFile = "/run/gpupool/token";
inline constexpr const char* kContainerTlsCaFile = "/run/gpupool/ca.pem";

struct GrantMount {
  std::string containerPath;
  std::string hostPath;
  bool readOnly = true;
};

struct ContainerGrant {
  std::map<std::string, std::string> envs;
  std::vector<GrantMount> mounts;
};

// The namespace of the pod that holds `ids` of `resource` (the kubelet's PodResources List);
// empty and *error when none does or the kubelet cannot be asked.
using NamespaceLookup = std::function<std::string(
    const std::string& resource, const std::vector<std::string>& ids, std::string* error)>;

// The IDs to grant: every ID of `mustInclude`, then up to `size` in all from `available`. For
// memory shares, shares of one device are packed together (the device already holding the most
// chosen shares first, then the one with the fewest free shares that still fits the rest, else the
// one with the most); for whole devices, devices of the server already chosen, then of the server
// offering the most.
std::vector<std::string> preferredAllocation(const std::vector<AdvertisedDevice>& available,
                                             const std::vector<std::string>& mustInclude,
                                             size_t size);

class AllocationBook {
 public:
  explicit AllocationBook(const PluginConfig& config) : config_(config) {}

  // The environment and mounts for a container granted `ids` of `resource` (devices of `known`),
  // with a fresh allocation directory for its token. false and *error for an unknown ID or a
  // directory that cannot be made.
  bool allocate(const std::string& resource, const std::vector<std::string>& ids,
                const std::vector<AdvertisedDevice>& known, ContainerGrant* grant,
                std::string* error);

  // Finds the namespace holding `ids` and writes its token (<token_dir>/<namespace>) into the
  // allocation directory Allocate made for them, mode 0400. false and *error (what to do next)
  // when the IDs were not allocated by this process, no pod holds them, or the namespace has no
  // token file. *ns is the namespace found.
  bool preStart(const std::string& resource, const std::vector<std::string>& ids,
                const NamespaceLookup& lookup, std::string* ns, std::string* error);

 private:
  const PluginConfig& config_;
  std::mutex mutex_;
  // "resource|id,id" -> the allocation directory Allocate made for them.
  std::map<std::string, std::string> directories_;
  uint64_t sequence_ = 0;
};

}  // namespace gpupool::device_plugin
