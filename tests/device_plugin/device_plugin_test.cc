// gpupool-device-plugin, the real process, against a fake kubelet (fake_kubelet.h) and a real emu
// pool with a tenant: it registers each resource, lists the pool's devices Healthy, turns them
// Unhealthy when gpupoold is killed and Healthy when it is back, prefers packed memory shares,
// hands a container the environment and mounts a CUDA program then runs with (the namespace's
// token written by PreStartContainer), refuses a namespace without a token, and registers again
// when the kubelet restarts.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "fake_kubelet.h"
#include "gpupool_server.h"
#include "harness_paths.h"
#include "scratch_directory.h"

namespace gpupool::device_plugin::test {
namespace {

using e2e::ChildProcess;
using e2e::EnvironmentChanges;
using e2e::GpupoolServer;
using e2e::ProgramResult;
using e2e::ScratchDirectory;
using e2e::ServerOptions;
using std::chrono::seconds;

constexpr const char* kGpu = "gpupool.io/gpu";
constexpr const char* kMemory = "gpupool.io/gpu-memory";
constexpr const char* kContainerLibDir = "/usr/local/gpupool/lib";
constexpr const char* kAddressSlot = "7";  // the same on restart: the same device UUIDs

ServerOptions poolOptions(const std::string& config, const std::string& listen) {
  ServerOptions options;
  options.backend.clear();
  options.emuThreads = 1;
  options.listen = listen;
  options.extraArgs = {"--config", config, "--address-slot", kAddressSlot};
  return options;
}

bool allHealth(const v1beta1::ListAndWatchResponse& list, size_t count, const std::string& health) {
  if (static_cast<size_t>(list.devices_size()) != count) return false;
  for (const auto& d : list.devices()) {
    if (d.health() != health) return false;
  }
  return true;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class DevicePluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::mkdir(dir_.file("kubelet").c_str(), 0755);
    ::mkdir(dir_.file("tokens").c_str(), 0755);
    ::mkdir(dir_.file("allocations").c_str(), 0755);
    dir_.write("tokens/team-a", "team-a-secret\n");
    dir_.write("pool.toml",
               "[[device]]\nmemory = \"2GiB\"\n[[device]]\nmemory = \"2GiB\"\n"
               "[[tenant]]\nname = \"team-a\"\ntoken = \"team-a-secret\"\n"
               "memory_quota = \"1GiB\"\n"
               "[[tenant]]\nname = \"team-b\"\ntoken = \"team-b-secret\"\n");
    pool_ =
        std::make_unique<GpupoolServer>(poolOptions(dir_.file("pool.toml"), "tcp://127.0.0.1:0"));
    kubelet_ = std::make_unique<FakeKubelet>(dir_.file("kubelet"), dir_.file("pod-resources.sock"));
    dir_.write("plugin.toml",
               "kubelet_dir = \"" + dir_.file("kubelet") + "\"\npod_resources_socket = \"" +
                   dir_.file("pod-resources.sock") + "\"\nlibrary_dir = \"" + e2e::libcudaDir() +
                   "\"\ncontainer_library_dir = \"" + kContainerLibDir + "\"\ntoken_dir = \"" +
                   dir_.file("tokens") + "\"\nallocation_dir = \"" + dir_.file("allocations") +
                   "\"\npoll_seconds = 1\nmemory_shares = true\n"
                   "[[server]]\nendpoint = \"" +
                   pool_->endpoint() + "\"\n");
    plugin_ =
        std::make_unique<ChildProcess>(ChildProcess::Options{GPUPOOL_DEVICE_PLUGIN_PATH,
                                                             {"--config", dir_.file("plugin.toml")},
                                                             {},
                                                             dir_.file("plugin.log")});
  }

  void TearDown() override {
    plugin_->signal(SIGTERM);
    ProgramResult r = plugin_->finish(seconds(15));
    EXPECT_TRUE(r.passed()) << r.describe();
    if (HasFailure() || std::getenv("SHOW_PLUGIN_LOG"))
      std::cerr << "plugin log:\n" << readFile(dir_.file("plugin.log"));
  }

  std::string socketOf(const std::string& name) { return dir_.file("kubelet") + "/" + name; }

  // The registrations of the first start: gpu and gpu-memory, each with its socket and options.
  void expectRegistered() {
    auto registrations = kubelet_->waitForRegistrations(2, seconds(30));
    ASSERT_EQ(registrations.size(), 2u);
    std::map<std::string, v1beta1::RegisterRequest> byResource;
    for (const auto& r : registrations) byResource[r.resource_name()] = r;
    ASSERT_EQ(byResource.count(kGpu), 1u);
    ASSERT_EQ(byResource.count(kMemory), 1u);
    EXPECT_EQ(byResource[kGpu].version(), "v1beta1");
    EXPECT_EQ(byResource[kGpu].endpoint(), "gpupool-gpu.sock");
    EXPECT_EQ(byResource[kMemory].endpoint(), "gpupool-gpu-memory.sock");
    EXPECT_TRUE(byResource[kGpu].options().pre_start_required());
    EXPECT_TRUE(byResource[kGpu].options().get_preferred_allocation_available());
  }

  ScratchDirectory dir_;
  std::unique_ptr<GpupoolServer> pool_;
  std::unique_ptr<FakeKubelet> kubelet_;
  std::unique_ptr<ChildProcess> plugin_;
};

TEST_F(DevicePluginTest, ListAndWatchFollowsTheServerDownAndBack) {
  expectRegistered();
  PluginClient gpu(socketOf("gpupool-gpu.sock"));
  gpu.watch();
  auto healthy = [](const auto& l) { return allHealth(l, 2, "Healthy"); };
  auto list = gpu.waitForList(healthy, seconds(30));
  ASSERT_TRUE(healthy(list)) << list.DebugString();
  std::vector<std::string> ids = {list.devices(0).id(), list.devices(1).id()};
  EXPECT_EQ(ids[0].rfind("GPU-", 0), 0u);

  PluginClient memory(socketOf("gpupool-gpu-memory.sock"));
  memory.watch();
  auto shares =
      memory.waitForList([](const auto& l) { return allHealth(l, 4, "Healthy"); }, seconds(30));
  EXPECT_EQ(shares.devices_size(), 4) << shares.DebugString();  // 2 GiB on each of 2 devices

  uint16_t port = pool_->port();
  pool_->signal(SIGKILL);
  pool_->stop();
  auto unhealthy = [](const auto& l) { return allHealth(l, 2, "Unhealthy"); };
  list = gpu.waitForList(unhealthy, seconds(30));
  EXPECT_TRUE(unhealthy(list)) << list.DebugString();

  pool_ = std::make_unique<GpupoolServer>(
      poolOptions(dir_.file("pool.toml"), "tcp://127.0.0.1:" + std::to_string(port)));
  list = gpu.waitForList(healthy, seconds(30));
  ASSERT_TRUE(healthy(list)) << list.DebugString();
  EXPECT_EQ(list.devices(0).id(), ids[0]);
  EXPECT_EQ(list.devices(1).id(), ids[1]);

  // The kubelet restarts: every resource registers again, on a fresh socket.
  kubelet_->restart();
  auto again = kubelet_->waitForRegistrations(4, seconds(30));
  EXPECT_EQ(again.size(), 4u);
  PluginClient gpuAgain(socketOf("gpupool-gpu.sock"));
  gpuAgain.watch();
  list = gpuAgain.waitForList(healthy, seconds(30));
  EXPECT_TRUE(healthy(list)) << list.DebugString();
}

TEST_F(DevicePluginTest, AllocatedContainerRunsACudaProgramAsItsNamespacesTenant) {
  expectRegistered();
  PluginClient gpu(socketOf("gpupool-gpu.sock"));
  gpu.watch();
  auto healthy = [](const auto& l) { return allHealth(l, 2, "Healthy"); };
  auto list = gpu.waitForList(healthy, seconds(30));
  ASSERT_TRUE(healthy(list)) << list.DebugString();
  const std::string second = list.devices(1).id();

  grpc::ClientContext optionsContext;
  v1beta1::Empty empty;
  v1beta1::DevicePluginOptions options;
  ASSERT_TRUE(gpu.stub().GetDevicePluginOptions(&optionsContext, empty, &options).ok());
  EXPECT_TRUE(options.pre_start_required());
  EXPECT_TRUE(options.get_preferred_allocation_available());

  // Memory shares: two are packed onto the device that already holds a required one.
  PluginClient memory(socketOf("gpupool-gpu-memory.sock"));
  memory.watch();
  auto shares =
      memory.waitForList([](const auto& l) { return allHealth(l, 4, "Healthy"); }, seconds(30));
  ASSERT_EQ(shares.devices_size(), 4);
  {
    grpc::ClientContext context;
    v1beta1::PreferredAllocationRequest request;
    auto* container = request.add_container_requests();
    for (const auto& d : shares.devices()) container->add_available_deviceids(d.id());
    container->add_must_include_deviceids(second + "::1");
    container->set_allocation_size(2);
    v1beta1::PreferredAllocationResponse response;
    ASSERT_TRUE(memory.stub().GetPreferredAllocation(&context, request, &response).ok());
    ASSERT_EQ(response.container_responses_size(), 1);
    const auto& chosen = response.container_responses(0).deviceids();
    ASSERT_EQ(chosen.size(), 2);
    EXPECT_EQ(chosen[0], second + "::1");
    EXPECT_EQ(chosen[1], second + "::0");
  }

  // Allocate the second device whole.
  v1beta1::ContainerAllocateResponse grant;
  {
    grpc::ClientContext context;
    v1beta1::AllocateRequest request;
    request.add_container_requests()->add_devices_ids(second);
    v1beta1::AllocateResponse response;
    grpc::Status status = gpu.stub().Allocate(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(response.container_responses_size(), 1);
    grant = response.container_responses(0);
  }
  const auto& envs = grant.envs();
  EXPECT_EQ(envs.at("GPU_POOL_ENDPOINT"), pool_->endpoint());
  EXPECT_EQ(envs.at("CUDA_VISIBLE_DEVICES"), second);
  EXPECT_EQ(envs.at("LD_LIBRARY_PATH"), kContainerLibDir);
  EXPECT_EQ(envs.at("GPU_POOL_TOKEN_FILE"), "/run/gpupool/token");
  EXPECT_EQ(envs.size(), 4u);
  ASSERT_EQ(grant.mounts_size(), 2);
  std::map<std::string, std::string> hostOf;  // container path -> host path
  for (const auto& m : grant.mounts()) {
    EXPECT_TRUE(m.read_only()) << m.DebugString();
    hostOf[m.container_path()] = m.host_path();
  }
  EXPECT_EQ(hostOf.at(kContainerLibDir), e2e::libcudaDir());
  ASSERT_EQ(hostOf.count("/run/gpupool"), 1u);
  EXPECT_EQ(hostOf["/run/gpupool"].rfind(dir_.file("allocations") + "/", 0), 0u);

  // The kubelet recorded the allocation for a pod of team-a: PreStartContainer writes its token.
  kubelet_->assignDevices("team-a", "trainer", kGpu, {second});
  {
    grpc::ClientContext context;
    v1beta1::PreStartContainerRequest request;
    request.add_devices_ids(second);
    v1beta1::PreStartContainerResponse response;
    grpc::Status status = gpu.stub().PreStartContainer(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  std::string tokenPath = hostOf["/run/gpupool"] + "/token";
  EXPECT_EQ(readFile(tokenPath), "team-a-secret");
  struct stat st {};
  ASSERT_EQ(::stat(tokenPath.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0444u);  // any user of the container reads it
  // On the host, only root gets through the allocation directory to it.
  ASSERT_EQ(::stat(std::filesystem::path(hostOf["/run/gpupool"]).parent_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);

  // The container: exactly the returned environment, the mounts' container paths replaced by their
  // host paths as a container runtime's bind mounts would make them.
  auto onHost = [&](std::string value) {
    for (const auto& [container, host] : hostOf) {
      if (value.rfind(container, 0) == 0) return host + value.substr(container.size());
    }
    return value;
  };
  EnvironmentChanges environment = e2e::clientEnvironment("");
  for (auto& [name, value] : environment) value = std::nullopt;
  for (const auto& [name, value] : envs) environment[name] = onHost(value);
  ProgramResult run =
      e2e::runProgram(e2e::programPath("vector_add"), {}, environment, seconds(120));
  EXPECT_TRUE(run.passed()) << run.describe();

  // It ran as the tenant team-a: its launches are metered to team-a, none to team-b.
  ProgramResult status =
      e2e::runProgram(e2e::gpupoolCliPath(), {"status", "--json", "--endpoint", pool_->endpoint()},
                      {{"GPU_POOL_ENDPOINT", std::nullopt}}, seconds(30));
  ASSERT_TRUE(status.passed()) << status.describe();
  std::map<std::string, long long> launches;
  nlohmann::json answer = nlohmann::json::parse(status.out);
  for (const auto& tenant : answer.at("tenants")) {
    launches[tenant.at("name").get<std::string>()] = tenant.at("launches").get<long long>();
  }
  EXPECT_GT(launches["team-a"], 0) << status.out;
  EXPECT_EQ(launches["team-b"], 0) << status.out;

  // A namespace without a token file: PreStartContainer fails, saying what to do.
  {
    grpc::ClientContext context;
    v1beta1::AllocateRequest request;
    request.add_container_requests()->add_devices_ids(list.devices(0).id());
    v1beta1::AllocateResponse response;
    ASSERT_TRUE(gpu.stub().Allocate(&context, request, &response).ok());
  }
  kubelet_->assignDevices("team-c", "intruder", kGpu, {list.devices(0).id()});
  grpc::ClientContext context;
  v1beta1::PreStartContainerRequest request;
  request.add_devices_ids(list.devices(0).id());
  v1beta1::PreStartContainerResponse response;
  grpc::Status refused = gpu.stub().PreStartContainer(&context, request, &response);
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.error_message().find("no token for namespace team-c"), std::string::npos)
      << refused.error_message();

  // An ID the plugin never offered is refused by Allocate.
  grpc::ClientContext unknownContext;
  v1beta1::AllocateRequest unknown;
  unknown.add_container_requests()->add_devices_ids("GPU-not-a-device");
  v1beta1::AllocateResponse unknownResponse;
  EXPECT_FALSE(gpu.stub().Allocate(&unknownContext, unknown, &unknownResponse).ok());
}

TEST_F(DevicePluginTest, TokenFileAloneAdmitsATenantAndAWrongFileFailsClearly) {
  expectRegistered();
  // `path args...` with GPU_POOL_TOKEN_FILE (and no GPU_POOL_TOKEN) as the container has it.
  auto withTokenFile = [&](const std::string& tokenFile, const std::string& path,
                           const std::vector<std::string>& args) {
    EnvironmentChanges environment = e2e::clientEnvironment(pool_->endpoint());
    environment["GPU_POOL_TOKEN_FILE"] = tokenFile;
    return e2e::runProgram(path, args, environment, seconds(120));
  };
  const std::string teamA = dir_.file("tokens/team-a"), nobody = dir_.file("tokens/nobody");
  auto expectMissingFileNamed = [&](const ProgramResult& result) {
    EXPECT_FALSE(result.passed());
    EXPECT_NE(result.err.find("GPU_POOL_TOKEN_FILE=" + nobody + " cannot be read"),
              std::string::npos)
        << result.describe();
  };
  const std::string vectorAdd = e2e::programPath("vector_add");
  ProgramResult run = withTokenFile(teamA, vectorAdd, {});
  EXPECT_TRUE(run.passed()) << run.describe();
  expectMissingFileNamed(withTokenFile(nobody, vectorAdd, {}));

  // NVML reads the same file: the memory it reports is team-a's quota, not the device's 2 GiB.
  const std::vector<std::string> smi = {"smi",
                                        "--endpoint",
                                        pool_->endpoint(),
                                        "-i",
                                        "0",
                                        "--query-gpu=memory.total",
                                        "--format=csv,noheader,nounits"};
  ProgramResult quota = withTokenFile(teamA, e2e::gpupoolCliPath(), smi);
  EXPECT_TRUE(quota.passed()) << quota.describe();
  EXPECT_EQ(quota.out, "1024\n") << quota.describe();
  expectMissingFileNamed(withTokenFile(nobody, e2e::gpupoolCliPath(), smi));

  // So does the CLI (gpupool status, top, usage, bench): a missing file is a usage error (2).
  const std::vector<std::string> status = {"status", "--json", "--endpoint", pool_->endpoint()};
  ProgramResult statusAsTeamA = withTokenFile(teamA, e2e::gpupoolCliPath(), status);
  EXPECT_TRUE(statusAsTeamA.passed()) << statusAsTeamA.describe();
  ProgramResult statusNoFile = withTokenFile(nobody, e2e::gpupoolCliPath(), status);
  EXPECT_TRUE(statusNoFile.exited && statusNoFile.exitCode == 2) << statusNoFile.describe();
  expectMissingFileNamed(statusNoFile);

  dir_.write("wrong-token", "guess\n");
  ProgramResult wrong = withTokenFile(dir_.file("wrong-token"), vectorAdd, {});
  EXPECT_FALSE(wrong.passed());
  EXPECT_NE(wrong.err.find("token refused"), std::string::npos) << wrong.describe();
}

}  // namespace
}  // namespace gpupool::device_plugin::test
