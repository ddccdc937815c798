// gpupool-device-plugin: advertises the pool's devices to the kubelet (docs/device-plugin.md). One
// resource server per resource; the inventory poller follows the servers; kubelet.sock is watched
// so that every resource registers again when the kubelet restarts.
#include <signal.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <iostream>
#include <map>
#include <memory>
#include <thread>

#include "tools/device_plugin/allocation.h"
#include "tools/device_plugin/inventory_poller.h"
#include "tools/device_plugin/plugin_config.h"
#include "tools/device_plugin/resource_server.h"

namespace {

std::atomic<bool> stopRequested{false};

void requestStop(int) { stopRequested = true; }

// The kubelet's socket's identity; 0 when it is absent. A new inode means a restarted kubelet.
unsigned long kubeletSocketInode(const std::string& kubeletDir) {
  struct stat st {};
  return ::stat((kubeletDir + "/kubelet.sock").c_str(), &st) == 0 ? st.st_ino : 0;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace gpupool::device_plugin;
  CLI::App app{
      "gpupool-device-plugin: advertises a gpupool pool's devices to the kubelet "
      "(gpupool.io/gpu, gpupool.io/mig-<profile>, gpupool.io/gpu-memory)",
      "gpupool-device-plugin"};
  std::string configPath;
  app.add_option("--config", configPath, "the plugin's TOML configuration (docs/device-plugin.md)")
      ->required();
  app.set_version_flag("--version", std::string("gpupool-device-plugin ") + GPUPOOL_VERSION);
  CLI11_PARSE(app, argc, argv);

  PluginConfig config;
  try {
    config = loadPluginConfig(configPath);
  } catch (const PluginConfigError& e) {
    std::cerr << "gpupool-device-plugin: " << e.what() << "\n";
    return 2;
  }
  ::signal(SIGINT, requestStop);
  ::signal(SIGTERM, requestStop);
  ::signal(SIGPIPE, SIG_IGN);
  std::cerr << "gpupool-device-plugin: " << config.servers.size() << " server(s), mig_strategy "
            << migStrategyName(config.migStrategy) << ", memory shares "
            << (config.memoryShares ? "on" : "off") << ", kubelet dir " << config.kubeletDir
            << "\n";

  Inventory inventory;
  InventoryPoller poller(config, inventory);
  poller.pollOnce();
  std::thread polling([&] { poller.run(stopRequested); });

  AllocationBook allocations(config);
  std::map<std::string, std::unique_ptr<ResourceServer>> servers;
  std::map<std::string, bool> registered;
  std::map<std::string, std::string> lastError;
  unsigned long kubeletInode = 0;
  bool firstLoop = true;
  while (!stopRequested) {
    unsigned long inode = kubeletSocketInode(config.kubeletDir);
    bool kubeletRestarted = inode != 0 && inode != kubeletInode;
    if (kubeletRestarted && kubeletInode != 0) {
      std::cerr << "gpupool-device-plugin: kubelet.sock was re-created (kubelet restart): "
                   "registering every resource again\n";
    }
    if (inode == 0 && (kubeletInode != 0 || firstLoop)) {
      std::cerr << "gpupool-device-plugin: no " << config.kubeletDir
                << "/kubelet.sock; waiting for the kubelet (is kubelet_dir the kubelet's "
                   "device-plugins directory, mounted from the host?)\n";
    }
    firstLoop = false;
    kubeletInode = inode;
    // A resource seen once is served from then on (a MIG profile whose devices are gone lists
    // none).
    for (const auto& [resource, devices] : inventory.snapshot()) {
      if (!servers.count(resource)) {
        servers[resource] =
            std::make_unique<ResourceServer>(resource, config, inventory, allocations);
        registered[resource] = false;
      }
    }
    for (auto& [resource, server] : servers) {
      bool lost = registered[resource] && !server->socketPresent();
      if (lost && !kubeletRestarted) {
        std::cerr << "gpupool-device-plugin: " << server->socketPath()
                  << " was removed: serving and registering " << resource << " again\n";
      }
      if (inode != 0 && (!registered[resource] || kubeletRestarted || lost)) {
        std::string error;
        registered[resource] = server->start(&error);
        // Retried every second; said once until it changes or succeeds.
        if (!registered[resource] && error != lastError[resource]) {
          std::cerr << "gpupool-device-plugin: " << error << "\n";
        }
        lastError[resource] = error;
      }
    }
    for (int i = 0; i < 10 && !stopRequested; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  std::cerr << "gpupool-device-plugin: stopping\n";
  servers.clear();
  polling.join();
  return 0;
}
