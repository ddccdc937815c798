// gpupool-device-plugin's configuration file (TOML): where the kubelet's sockets are, which pool
// servers to advertise, how MIG instances and memory shares become resources, and what Allocate
// puts into a container. docs/device-plugin.md describes every key.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::device_plugin {

// How MIG instances are offered, as NVIDIA's device plugin's --mig-strategy: "none" offers whole
// GPUs only (no MIG instance), "single" offers MIG instances as gpupool.io/gpu (their parents
// hidden), "mixed" offers each profile as gpupool.io/mig-<profile>.
enum class MigStrategy { kNone, kSingle, kMixed };

struct PoolServerConfig {
  std::string endpoint;   // tcp://HOST:PORT or tls://HOST:PORT, as GPU_POOL_ENDPOINT
  std::string tokenFile;  // token for the status connection; empty = none
};

struct PluginConfig {
  std::string path;
  std::string kubeletDir = "/var/lib/kubelet/device-plugins";
  std::string podResourcesSocket = "/var/lib/kubelet/pod-resources/kubelet.sock";
  MigStrategy migStrategy = MigStrategy::kNone;
  std::string libraryDir = "/opt/gpupool/lib";
  std::string containerLibraryDir = "/usr/local/gpupool/lib";
  std::string tokenDir = "/etc/gpupool/tenant-tokens";
  std::string allocationDir = "/var/lib/gpupool/allocations";
  // The CA bundle (PEM) that verifies tls:// servers; copied into each allocation directory and
  // named by GPU_POOL_TLS_CA. Empty: containers are given none.
  std::string tlsCa;
  int pollSeconds = 5;
  bool memoryShares = true;
  std::vector<PoolServerConfig> servers;
};

// "FILE:LINE: key: problem".
class PluginConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

PluginConfig parsePluginConfig(std::string_view text, const std::string& path);
PluginConfig loadPluginConfig(const std::string& path);

const char* migStrategyName(MigStrategy strategy);

}  // namespace gpupool::device_plugin
