// The device plugin's pure parts: the pool's devices as the kubelet's resources under each MIG
// strategy (the emu backend has no MIG instances, so the MIG mapping is tested here, on device
// lists as a server with MIG reports them), memory shares, the preferred allocation, and the
// configuration file.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tools/device_plugin/allocation.h"
#include "tools/device_plugin/plugin_config.h"
#include "tools/device_plugin/pool_inventory.h"

namespace gpupool::device_plugin {
namespace {

constexpr const char* kWhole = "GPU-00000000-0000-0000-0000-000000000001";
constexpr const char* kParent = "GPU-00000000-0000-0000-0000-000000000002";
constexpr const char* kMigSmall = "MIG-00000000-0000-0000-0000-00000000000a";
constexpr const char* kMigLarge = "MIG-00000000-0000-0000-0000-00000000000b";

// One server: a whole GPU of 4 GiB, and a GPU split into a 1g.10gb (1 GiB here) and a 3g.40gb
// (2 GiB) instance, as gpupoold's status lists them (the split GPU itself is not a pool device).
std::vector<ServerSnapshot> migServer(bool reachable = true) {
  return {{"tcp://a:7740",
           reachable,
           {{kWhole, 4 * kGiB, "", ""},
            {kMigSmall, 1 * kGiB, kParent, "1g.10gb"},
            {kMigLarge, 2 * kGiB + 5, kParent, "3g.40gb"}}}};
}

std::vector<std::string> idsOf(const std::vector<AdvertisedDevice>& devices) {
  std::vector<std::string> ids;
  for (const auto& d : devices) ids.push_back(d.id);
  return ids;
}

TEST(DevicePluginInventoryTest, NoneOffersWholeGpusOnly) {
  ResourceMap r = advertisedResources(migServer(), MigStrategy::kNone, false);
  EXPECT_EQ(r.size(), 1u);
  EXPECT_EQ(idsOf(r[kGpuResource]), std::vector<std::string>{kWhole});
}

TEST(DevicePluginInventoryTest, SingleOffersMigInstancesAsGpus) {
  ResourceMap r = advertisedResources(migServer(), MigStrategy::kSingle, false);
  EXPECT_EQ(r.size(), 1u);
  EXPECT_EQ(idsOf(r[kGpuResource]), (std::vector<std::string>{kWhole, kMigSmall, kMigLarge}));
}

TEST(DevicePluginInventoryTest, MixedOffersEachProfileAsItsOwnResource) {
  ResourceMap r = advertisedResources(migServer(), MigStrategy::kMixed, false);
  EXPECT_EQ(r.size(), 3u);
  EXPECT_EQ(idsOf(r[kGpuResource]), std::vector<std::string>{kWhole});
  EXPECT_EQ(idsOf(r["gpupool.io/mig-1g.10gb"]), std::vector<std::string>{kMigSmall});
  EXPECT_EQ(idsOf(r["gpupool.io/mig-3g.40gb"]), std::vector<std::string>{kMigLarge});
}

TEST(DevicePluginInventoryTest, AParentListedBesideItsInstancesIsNotOfferedWhole) {
  auto servers = migServer();
  servers[0].devices.push_back({kParent, 40 * kGiB, "", ""});
  ResourceMap r = advertisedResources(servers, MigStrategy::kNone, false);
  EXPECT_EQ(idsOf(r[kGpuResource]), std::vector<std::string>{kWhole});
}

TEST(DevicePluginInventoryTest, MemorySharesAreWholeGiBOfEachOfferedDevice) {
  ResourceMap r = advertisedResources(migServer(), MigStrategy::kMixed, true);
  std::vector<std::string> expected = {
      std::string(kWhole) + "::0",   std::string(kWhole) + "::1",    std::string(kWhole) + "::2",
      std::string(kWhole) + "::3",   std::string(kMigSmall) + "::0", std::string(kMigLarge) + "::0",
      std::string(kMigLarge) + "::1"};
  EXPECT_EQ(idsOf(r[kMemoryResource]), expected);
  for (const auto& d : r[kMemoryResource]) EXPECT_EQ(deviceOfId(d.id), d.uuid);
  // Under none, no share lies on a MIG instance.
  ResourceMap none = advertisedResources(migServer(), MigStrategy::kNone, true);
  EXPECT_EQ(none[kMemoryResource].size(), 4u);
}

TEST(DevicePluginInventoryTest, AnUnreachableServersDevicesAreUnhealthyAndDuplicatesOfferedOnce) {
  auto servers = migServer(false);
  servers.push_back({"tcp://b:7740", true, {{kWhole, kGiB, "", ""}}});
  std::vector<std::string> duplicates;
  ResourceMap r = advertisedResources(servers, MigStrategy::kNone, false, &duplicates);
  ASSERT_EQ(r[kGpuResource].size(), 1u);
  EXPECT_FALSE(r[kGpuResource][0].healthy);
  EXPECT_EQ(r[kGpuResource][0].endpoint, "tcp://a:7740");
  EXPECT_EQ(duplicates.size(), 1u);
}

TEST(DevicePluginInventoryTest, SocketNamesFollowTheResource) {
  EXPECT_EQ(socketNameOf("gpupool.io/gpu"), "gpupool-gpu.sock");
  EXPECT_EQ(socketNameOf("gpupool.io/mig-1g.10gb"), "gpupool-mig-1g.10gb.sock");
  EXPECT_EQ(socketNameOf("gpupool.io/gpu-memory"), "gpupool-gpu-memory.sock");
}

std::vector<AdvertisedDevice> shares(const std::string& uuid, int count,
                                     const std::string& endpoint = "tcp://a:1") {
  std::vector<AdvertisedDevice> out;
  for (int i = 0; i < count; ++i) {
    out.push_back({uuid + "::" + std::to_string(i), true, endpoint, uuid});
  }
  return out;
}

TEST(DevicePluginPreferredAllocationTest, MemorySharesArePackedOntoOneDevice) {
  auto available = shares("GPU-a", 4);
  auto more = shares("GPU-b", 2);
  available.insert(available.end(), more.begin(), more.end());
  // Two shares fit on GPU-b with nothing left over: the tighter fit.
  EXPECT_EQ(preferredAllocation(available, {}, 2),
            (std::vector<std::string>{"GPU-b::0", "GPU-b::1"}));
  // Three fit on GPU-a only.
  EXPECT_EQ(preferredAllocation(available, {}, 3),
            (std::vector<std::string>{"GPU-a::0", "GPU-a::1", "GPU-a::2"}));
  // A share that must be included pulls the rest onto its device.
  EXPECT_EQ(preferredAllocation(available, {"GPU-a::3"}, 2),
            (std::vector<std::string>{"GPU-a::3", "GPU-a::0"}));
  // More than any device holds: the largest first, then the next.
  EXPECT_EQ(preferredAllocation(available, {}, 5).size(), 5u);
  EXPECT_EQ(preferredAllocation(available, {}, 5)[0], "GPU-a::0");
}

TEST(DevicePluginPreferredAllocationTest, WholeDevicesComeFromOneServer) {
  std::vector<AdvertisedDevice> available = {{"GPU-1", true, "tcp://a:1", "GPU-1"},
                                             {"GPU-2", true, "tcp://b:1", "GPU-2"},
                                             {"GPU-3", true, "tcp://b:1", "GPU-3"}};
  EXPECT_EQ(preferredAllocation(available, {}, 2), (std::vector<std::string>{"GPU-2", "GPU-3"}));
  EXPECT_EQ(preferredAllocation(available, {"GPU-1"}, 1), std::vector<std::string>{"GPU-1"});
}

// With tls_ca set, each allocation directory holds a copy of the CA bundle (any user of the
// container reads it) and GPU_POOL_TLS_CA names it in the container; a tls_ca that cannot be read
// fails Allocate, saying what to fix.
TEST(DevicePluginAllocationTest, TlsCaIsCopiedIntoTheAllocationAndNamed) {
  char scratch[] = "/tmp/gpupool-plugin-XXXXXX";
  ASSERT_NE(::mkdtemp(scratch), nullptr);
  const std::filesystem::path dir = scratch;
  std::ofstream(dir / "ca.pem") << "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
  PluginConfig config = parsePluginConfig("allocation_dir = \"" + (dir / "allocations").string() +
                                              "\"\ntls_ca = \"" + (dir / "ca.pem").string() +
                                              "\"\n[[server]]\nendpoint = \"tls://a:7740\"\n",
                                          "plugin.toml");
  AllocationBook book(config);
  const std::vector<AdvertisedDevice> known = {{kWhole, true, "tls://a:7740", kWhole}};
  ContainerGrant grant;
  std::string error;
  ASSERT_TRUE(book.allocate("gpupool.io/gpu", {kWhole}, known, &grant, &error)) << error;
  EXPECT_EQ(grant.envs["GPU_POOL_TLS_CA"], "/run/gpupool/ca.pem");
  EXPECT_EQ(grant.envs["GPU_POOL_ENDPOINT"], "tls://a:7740");
  std::string hostRun;
  for (const GrantMount& m : grant.mounts) {
    if (m.containerPath == "/run/gpupool") hostRun = m.hostPath;
  }
  ASSERT_FALSE(hostRun.empty());
  std::ifstream copy(hostRun + "/ca.pem");
  std::stringstream text;
  text << copy.rdbuf();
  EXPECT_NE(text.str().find("BEGIN CERTIFICATE"), std::string::npos);
  struct stat st {};
  ASSERT_EQ(::stat((hostRun + "/ca.pem").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0444u);

  std::filesystem::remove(dir / "ca.pem");
  ContainerGrant again;
  EXPECT_FALSE(book.allocate("gpupool.io/gpu", {kWhole}, known, &again, &error));
  EXPECT_NE(error.find("tls_ca"), std::string::npos) << error;
  std::filesystem::remove_all(dir);
}

TEST(DevicePluginConfigTest, ReadsEveryKeyAndRefusesMistakes) {
  PluginConfig c = parsePluginConfig(
      "kubelet_dir = \"/k/\"\nmig_strategy = \"mixed\"\npoll_seconds = 2\nmemory_shares = false\n"
      "tls_ca = \"/etc/gpupool/ca.pem\"\n"
      "[[server]]\nendpoint = \"tcp://gpu-node-1:7740\"\ntoken_file = \"/t\"\n"
      "[[server]]\nendpoint = \"tls://gpu-node-2:7740\"\n",
      "plugin.toml");
  EXPECT_EQ(c.kubeletDir, "/k");
  EXPECT_EQ(c.podResourcesSocket, "/var/lib/kubelet/pod-resources/kubelet.sock");
  EXPECT_EQ(c.migStrategy, MigStrategy::kMixed);
  EXPECT_EQ(c.pollSeconds, 2);
  EXPECT_FALSE(c.memoryShares);
  EXPECT_EQ(c.tlsCa, "/etc/gpupool/ca.pem");
  ASSERT_EQ(c.servers.size(), 2u);
  EXPECT_EQ(c.servers[0].tokenFile, "/t");
  EXPECT_EQ(c.servers[1].endpoint, "tls://gpu-node-2:7740");

  auto refused = [](const std::string& text) {
    try {
      parsePluginConfig(text, "plugin.toml");
    } catch (const PluginConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string server = "[[server]]\nendpoint = \"tcp://h:1\"\n";
  EXPECT_NE(refused("").find("server"), std::string::npos);
  EXPECT_NE(refused("mig_strategy = \"all\"\n" + server).find("mig_strategy"), std::string::npos);
  EXPECT_NE(refused("poll = 1\n" + server).find("unknown key"), std::string::npos);
  EXPECT_NE(refused("token_dir = \"relative\"\n" + server).find("absolute"), std::string::npos);
  EXPECT_NE(refused("[[server]]\nendpoint = \"shm:///s\"\n").find("tcp://"), std::string::npos);
}

}  // namespace
}  // namespace gpupool::device_plugin
