// One advertised resource (gpupool.io/gpu, gpupool.io/mig-<profile>, gpupool.io/gpu-memory): the
// kubelet's DevicePlugin service on its own Unix socket in the kubelet's directory, registered with
// the kubelet (Registration on kubelet.sock), streaming the resource's devices and their health.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "tools/device_plugin/allocation.h"
#include "tools/device_plugin/inventory_poller.h"
#include "tools/device_plugin/plugin_config.h"

namespace grpc {
class Server;
}

namespace gpupool::device_plugin {

class DevicePluginService;

class ResourceServer {
 public:
  ResourceServer(std::string resource, const PluginConfig& config, Inventory& inventory,
                 AllocationBook& allocations);
  ~ResourceServer();
  ResourceServer(const ResourceServer&) = delete;
  ResourceServer& operator=(const ResourceServer&) = delete;

  // Serves on <kubelet_dir>/<socket> (replacing a stale socket) and registers with the kubelet.
  // false and *error when either fails; the server is then stopped.
  bool start(std::string* error);
  // Ends the ListAndWatch streams and stops serving; the socket is removed.
  void stop();
  // Whether our socket is still the one we created (the kubelet removes every socket in its
  // directory when it restarts).
  bool socketPresent() const;

  const std::string& resource() const { return resource_; }
  std::string socketPath() const;

 private:
  std::string resource_;
  const PluginConfig& config_;
  std::unique_ptr<DevicePluginService> service_;
  std::unique_ptr<grpc::Server> server_;
  unsigned long socketInode_ = 0;
};

}  // namespace gpupool::device_plugin
