// libnvidia-ml.so.1 against real servers: nvml_check (a program written against nvml.h) answers
// what `gpupool status --json` shows (device count, names, UUIDs, memory totals), refuses the
// sensors an emu does not have, shows a tenant's quota as its memory total (as cuMemGetInfo does),
// follows CUDA_VISIBLE_DEVICES, and answers on the chained cuda backend too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "child_process.h"
#include "gpupool_server.h"
#include "harness_paths.h"
#include "scratch_directory.h"
#include "status_json.h"

namespace gpupool::e2e {
namespace {

using std::chrono::seconds;

// Runs nvml_check against `endpoint`; the program's own checks must hold.
nlohmann::json nvmlAnswers(const std::string& endpoint, bool emu, EnvironmentChanges extra = {}) {
  EnvironmentChanges environment = clientEnvironment(endpoint);
  for (auto& [name, value] : extra) environment[name] = value;
  ProgramResult result = runProgram(
      NVML_CHECK_PATH, emu ? std::vector<std::string>{"--emu"} : std::vector<std::string>{},
      environment, seconds(60));
  EXPECT_TRUE(result.passed()) << result.describe();
  return parseJson(result.out, "nvml_check");
}

void expectSameDevices(const nlohmann::json& nvml, const nlohmann::json& status) {
  ASSERT_TRUE(nvml.contains("devices")) << nvml.dump(2);
  ASSERT_EQ(nvml.at("devices").size(), status.at("devices").size())
      << nvml.dump(2) << status.dump(2);
  for (size_t i = 0; i < nvml.at("devices").size(); ++i) {
    const auto& mine = nvml.at("devices").at(i);
    const auto& theirs = status.at("devices").at(i);
    EXPECT_EQ(mine.at("name"), theirs.at("name"));
    EXPECT_EQ(mine.at("uuid"), theirs.at("uuid"));
    EXPECT_EQ(mine.at("memory_total"), theirs.at("memory_total"));
    EXPECT_EQ(mine.at("memory_total").get<uint64_t>() - mine.at("memory_free").get<uint64_t>(),
              theirs.at("memory_used").get<uint64_t>());
    // What the server's NVML read: the same figures answered, none made up where it read none.
    nlohmann::json serverSensors = theirs.value("sensors", nlohmann::json::object());
    nlohmann::json utilization = nlohmann::json::object();
    for (const char* key : {"gpu_utilization_percent", "memory_utilization_percent"}) {
      if (serverSensors.contains(key)) utilization[key] = serverSensors[key];
      serverSensors.erase(key);
    }
    EXPECT_EQ(mine.at("sensors"), serverSensors) << "nvml: " << mine.dump(2);
    if (!utilization.empty()) {
      EXPECT_EQ(mine.at("utilization_gpu"), utilization.at("gpu_utilization_percent"));
      EXPECT_EQ(mine.at("utilization_memory"), utilization.at("memory_utilization_percent"));
    } else if (!theirs.at("utilization_measured").get<bool>()) {
      // Neither the server's NVML nor a pool's meter measured it: refused, never a made-up 0.
      EXPECT_TRUE(mine.at("utilization_gpu").is_null()) << mine.dump(2);
    } else {
      EXPECT_TRUE(mine.at("utilization_gpu").is_number()) << mine.dump(2);
    }
  }
}

// An emu server running as a pool, configured by `toml` (written to dir/pool.toml).
ServerOptions poolOptions(ScratchDirectory& dir, const std::string& toml) {
  dir.write("pool.toml", toml);
  ServerOptions options;
  options.backend = "";
  options.extraArgs = {"--config", dir.file("pool.toml")};
  return options;
}

TEST(NvmlTest, EmuAnswersMatchStatus) {
  GpupoolServer server;
  nlohmann::json nvml = nvmlAnswers(server.endpoint(), /*emu=*/true);
  expectSameDevices(nvml, statusOf(server.endpoint()));
}

TEST(NvmlTest, FollowsCudaVisibleDevices) {
  ScratchDirectory dir;
  GpupoolServer server(
      poolOptions(dir, "[[device]]\nmemory = \"256MiB\"\n[[device]]\nmemory = \"256MiB\"\n"));
  nlohmann::json status = statusOf(server.endpoint());
  ASSERT_EQ(status.at("devices").size(), 2u) << status.dump(2);
  expectSameDevices(nvmlAnswers(server.endpoint(), true), status);

  nlohmann::json second = nvmlAnswers(server.endpoint(), true, {{"CUDA_VISIBLE_DEVICES", "1"}});
  ASSERT_EQ(second.at("devices").size(), 1u) << second.dump(2);
  EXPECT_EQ(second.at("devices").at(0).at("uuid"), status.at("devices").at(1).at("uuid"));
  EXPECT_NE(second.at("devices").at(0).at("uuid"), status.at("devices").at(0).at("uuid"));
}

TEST(NvmlTest, TenantQuotaIsTheMemoryTotal) {
  ScratchDirectory dir;
  GpupoolServer server(
      poolOptions(dir,
                  "[[device]]\nmemory = \"256MiB\"\n[[tenant]]\nname = \"alice\"\ntoken = \"a\"\n"
                  "memory_quota = \"64MiB\"\n"));
  nlohmann::json nvml = nvmlAnswers(server.endpoint(), true, {{"GPU_POOL_TOKEN", "a"}});
  ASSERT_EQ(nvml.at("devices").size(), 1u) << nvml.dump(2);
  EXPECT_EQ(nvml.at("devices").at(0).at("memory_total"), 64u << 20);
  EXPECT_EQ(nvml.at("devices").at(0).at("memory_free"), 64u << 20);
}

// tls:// as libcuda speaks it (GPU_POOL_TLS_CA), with the token's tenant: a client that trusts the
// server's certificate sees its quota; one that does not gets no answers, and says why.
TEST(NvmlTest, SpeaksTlsAsTheTokensTenant) {
  ScratchDirectory dir;
  ASSERT_TRUE(makeSelfSignedCertificate(dir, "server"));
  ASSERT_TRUE(makeSelfSignedCertificate(dir, "stranger"));
  dir.write("pool.toml",
            "[[device]]\nmemory = \"256MiB\"\n[[tenant]]\nname = \"alice\"\ntoken = \"a\"\n"
            "memory_quota = \"32MiB\"\n");
  ServerOptions options;
  options.backend = "";
  options.listen = "tls://127.0.0.1:0";
  options.extraArgs = {"--tls-cert", dir.file("server.pem"), "--tls-key", dir.file("server.key"),
                       "--config",   dir.file("pool.toml")};
  GpupoolServer server(options);
  ASSERT_EQ(server.endpoint().rfind("tls://", 0), 0u) << server.endpoint();

  nlohmann::json nvml =
      nvmlAnswers(server.endpoint(), true,
                  {{"GPU_POOL_TOKEN", "a"}, {"GPU_POOL_TLS_CA", dir.file("server.pem")}});
  ASSERT_EQ(nvml.at("devices").size(), 1u) << nvml.dump(2);
  EXPECT_EQ(nvml.at("devices").at(0).at("memory_total"), 32u << 20);

  EnvironmentChanges untrusted = clientEnvironment(server.endpoint());
  untrusted["GPU_POOL_TOKEN"] = "a";
  untrusted["GPU_POOL_TLS_CA"] = dir.file("stranger.pem");
  untrusted["GPU_POOL_LOG"] = "1";
  ProgramResult refused = runProgram(NVML_CHECK_PATH, {}, untrusted, seconds(60));
  EXPECT_FALSE(refused.passed()) << refused.describe();
  EXPECT_NE(refused.err.find("nvmlInit_v2() returned 9"), std::string::npos) << refused.describe();
  EXPECT_NE(refused.err.find("certificate"), std::string::npos) << refused.describe();
}

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// A monitoring loop at 100 Hz for one second costs the server about one status and one memory
// request per second (the 1 s cache), not two hundred. GPU_POOL_LOG=2 logs each request.
TEST(NvmlTest, MonitoringLoopIsCached) {
  GpupoolServer server;
  EnvironmentChanges environment = clientEnvironment(server.endpoint());
  environment["GPU_POOL_LOG"] = "2";
  ProgramResult result =
      runProgram(NVML_CHECK_PATH, {"--emu", "--poll", "100"}, environment, seconds(60));
  ASSERT_TRUE(result.passed()) << result.describe();
  size_t statuses = occurrences(result.err, "NVML: request status");
  size_t memories = occurrences(result.err, "NVML: request nvmlMemoryInfo");
  EXPECT_GE(statuses, 1u) << result.err;
  EXPECT_GE(memories, 1u) << result.err;
  // 100 polls over >= 1 s: the init's status, then at most one per started second (slow machines
  // stretch the loop; 10 allows 9 s).
  EXPECT_LE(statuses, 10u) << result.err;
  EXPECT_LE(memories, 10u) << result.err;
}

// The load test: 16 monitoring loops at 10 Hz (nvidia-smi dmon's rate, times a node's
// worth of exporters) for 3 s at once against one server. Each loop stays cached (at most one
// status and one memory request per started second of its run), and the test prints what the 16
// cost the server in requests per second, against the 320 NVML calls per second they made.
TEST(NvmlTest, SixteenMonitoringLoopsAt10HzStayCached) {
  GpupoolServer server;
  ScratchDirectory logs;
  EnvironmentChanges environment = clientEnvironment(server.endpoint());
  environment["GPU_POOL_LOG"] = "2";
  constexpr int kClients = 16, kPolls = 30;
  std::vector<std::unique_ptr<ChildProcess>> clients;
  for (int c = 0; c < kClients; ++c) {
    // Output to files: 16 children must never block on pipes read one after another.
    clients.push_back(std::make_unique<ChildProcess>(
        ChildProcess::Options{NVML_CHECK_PATH,
                              {"--emu", "--poll", std::to_string(kPolls), "--interval-ms", "100"},
                              environment,
                              logs.file("client-" + std::to_string(c) + ".log")}));
  }
  size_t totalRequests = 0;
  double longestSeconds = 0;
  for (int c = 0; c < kClients; ++c) {
    ProgramResult result = clients[c]->finish(seconds(120));
    std::ifstream file(logs.file("client-" + std::to_string(c) + ".log"));
    const std::string log((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    ASSERT_TRUE(result.passed()) << result.describe() << log;
    const double elapsed = std::chrono::duration<double>(result.elapsed).count();
    longestSeconds = std::max(longestSeconds, elapsed);
    const size_t statuses = occurrences(log, "NVML: request status");
    const size_t memories = occurrences(log, "NVML: request nvmlMemoryInfo");
    EXPECT_GE(statuses, 1u) << log;
    EXPECT_GE(memories, 1u) << log;
    const size_t bound = static_cast<size_t>(std::ceil(elapsed)) + 1;
    EXPECT_LE(statuses, bound) << "client " << c << " ran " << elapsed << " s\n" << log;
    EXPECT_LE(memories, bound) << "client " << c << " ran " << elapsed << " s\n" << log;
    totalRequests += statuses + memories;
  }
  std::printf(
      "16 clients x 10 Hz x 2 NVML calls for %.1f s: %zu requests reached the server "
      "(%.1f per second; the loops made %d calls)\n",
      longestSeconds, totalRequests, totalRequests / longestSeconds, kClients * kPolls * 2);
}

// The caller's own sessions are its running processes, with their memory; cudaMemGetInfo and
// nvmlDeviceGetMemoryInfo agree on the total (tests/nvml/nvml_processes.cu checks both).
TEST(NvmlTest, ListsTheCallersOwnSession) {
  GpupoolServer server;
  ProgramResult result =
      runProgram(NVML_PROCESSES_PATH, {}, clientEnvironment(server.endpoint()), seconds(60));
  EXPECT_TRUE(result.passed()) << result.describe();
  EXPECT_NE(result.out.find("PASS"), std::string::npos) << result.describe();
}

// A process that has libcuda's session and asks NVML too opens one connection, not two: NVML's
// requests travel on the driver session (client/shared_session_channel.cc).
TEST(NvmlTest, SharesLibcudasConnection) {
  GpupoolServer server;
  auto connections = [&] {
    std::string log = server.log();
    size_t count = 0;
    for (size_t at = log.find("gpupoold: session "); at != std::string::npos;
         at = log.find("gpupoold: session ", at + 1)) {
      size_t end = log.find('\n', at);
      if (log.substr(at, end - at).find(" from ") != std::string::npos) ++count;
    }
    return count;
  };
  size_t before = connections();
  EnvironmentChanges environment = clientEnvironment(server.endpoint());
  environment["GPU_POOL_LOG"] = "2";
  ProgramResult result = runProgram(NVML_PROCESSES_PATH, {}, environment, seconds(60));
  ASSERT_TRUE(result.passed()) << result.describe();
  EXPECT_NE(result.err.find("NVML: sharing libcuda's session to " + server.endpoint()),
            std::string::npos)
      << result.err;
  EXPECT_NE(result.err.find("NVML: request status (shared)"), std::string::npos) << result.err;
  EXPECT_EQ(connections() - before, 1u) << server.log();
}

// NVML asked before the first CUDA call opens its own connection, then moves onto libcuda's
// session once cuInit has connected, and uses its own no more.
TEST(NvmlTest, MovesOntoLibcudasSessionOnceItConnects) {
  GpupoolServer server;
  EnvironmentChanges environment = clientEnvironment(server.endpoint());
  environment["GPU_POOL_LOG"] = "2";
  ProgramResult result =
      runProgram(NVML_PROCESSES_PATH, {"--nvml-first"}, environment, seconds(60));
  ASSERT_TRUE(result.passed()) << result.describe();
  size_t own = result.err.find("NVML: request nvmlMemoryInfo\n");
  size_t sharing = result.err.find("NVML: sharing libcuda's session to " + server.endpoint());
  size_t shared = result.err.find("NVML: request status (shared)");
  ASSERT_NE(own, std::string::npos) << result.err;
  ASSERT_NE(sharing, std::string::npos) << result.err;
  ASSERT_NE(shared, std::string::npos) << result.err;
  EXPECT_LT(own, sharing);
  EXPECT_LT(sharing, shared);
  // Once it shares, nothing more travels on its own connection.
  EXPECT_EQ(result.err.find("NVML: request status\n", sharing), std::string::npos) << result.err;
  EXPECT_EQ(result.err.find("NVML: request nvmlMemoryInfo\n", sharing), std::string::npos)
      << result.err;
}

// The pool's accounting of a session (tests/nvml/nvml_accounting.cu): running, then ended, seen by
// another process of the same tenant. `measured`: the server runs as a pool, whose launch gate
// measures kernel time.
unsigned accountedPid(const std::string& endpoint, bool measured, EnvironmentChanges extra = {}) {
  EnvironmentChanges environment = clientEnvironment(endpoint);
  for (auto& [name, value] : extra) environment[name] = value;
  std::vector<std::string> args;
  if (measured) args.push_back("--measured");
  ProgramResult run = runProgram(NVML_ACCOUNTING_PATH, args, environment, seconds(120));
  EXPECT_TRUE(run.passed()) << run.describe();
  size_t at = run.out.find("\npid ");
  if (at == std::string::npos) {
    ADD_FAILURE() << "no pid printed:\n" << run.describe();
    return 0;
  }
  return static_cast<unsigned>(std::stoul(run.out.substr(at + 5)));
}

void expectEnded(const std::string& endpoint, unsigned pid, bool measured,
                 EnvironmentChanges extra = {}, const char* mode = "--ended") {
  EnvironmentChanges environment = clientEnvironment(endpoint);
  for (auto& [name, value] : extra) environment[name] = value;
  std::vector<std::string> args = {mode, std::to_string(pid)};
  if (measured) args.push_back("--measured");
  ProgramResult ended = runProgram(NVML_ACCOUNTING_PATH, args, environment, seconds(60));
  EXPECT_TRUE(ended.passed()) << ended.describe();
}

TEST(NvmlTest, AccountsForSessionsRunningAndEnded) {
  GpupoolServer server;
  unsigned pid = accountedPid(server.endpoint(), /*measured=*/false);
  ASSERT_NE(pid, 0u);
  expectEnded(server.endpoint(), pid, false);
}

// A pool measures kernel time, so the accounting has a utilization; another tenant sees none of
// it.
TEST(NvmlTest, PoolAccountingMeasuresKernelsPerTenant) {
  ScratchDirectory dir;
  GpupoolServer server(
      poolOptions(dir,
                  "[[device]]\nmemory = \"256MiB\"\n[[tenant]]\nname = \"alice\"\ntoken = \"a\"\n"
                  "[[tenant]]\nname = \"bob\"\ntoken = \"b\"\n"));
  unsigned pid = accountedPid(server.endpoint(), /*measured=*/true, {{"GPU_POOL_TOKEN", "a"}});
  ASSERT_NE(pid, 0u);
  expectEnded(server.endpoint(), pid, true, {{"GPU_POOL_TOKEN", "a"}});
  expectEnded(server.endpoint(), pid, true, {{"GPU_POOL_TOKEN", "b"}}, "--absent");
}

TEST(NvmlTest, ChainedCudaBackendAccounts) {
  ChainedServers servers = startChainedServers();
  unsigned pid = accountedPid(servers.cuda->endpoint(), /*measured=*/false);
  ASSERT_NE(pid, 0u);
  expectEnded(servers.cuda->endpoint(), pid, false);
}

TEST(NvmlTest, ChainedCudaBackendAnswersMatchStatus) {
  ChainedServers servers = startChainedServers();
  nlohmann::json nvml = nvmlAnswers(servers.cuda->endpoint(), /*emu=*/false);
  expectSameDevices(nvml, statusOf(servers.cuda->endpoint()));
}

// The cuda backend reads its GPUs' sensors from the server's NVML (here a recorded one,
// tests/nvml/recorded_nvml.cc, naming the chained device by its UUID) and the client's NVML
// answers them: the same figures as `gpupool status --json`, the driver version NVIDIA's, the fan
// refused as the recorded board refuses it. Readings are cached a second on the server.
TEST(NvmlTest, ChainedCudaBackendForwardsTheServersNvml) {
  ScratchDirectory scratch;
  std::string readings = scratch.file("readings.log");
  GpupoolServer emu;
  std::string uuid = statusOf(emu.endpoint()).at("devices").at(0).at("uuid");
  ServerOptions cudaOptions;
  cudaOptions.extraArgs = {"--nvml-library", RECORDED_NVML_PATH};
  cudaOptions.environment["GPU_POOL_RECORDED_NVML_UUID"] = uuid;
  cudaOptions.environment["GPU_POOL_RECORDED_NVML_LOG"] = readings;
  GpupoolServer cuda(chainedCudaOptions(emu.endpoint(), cudaOptions));

  auto started = std::chrono::steady_clock::now();
  nlohmann::json status = statusOf(cuda.endpoint());
  EXPECT_EQ(status.value("nvidia_driver_version", ""), "535.183.01") << status.dump(2);
  const nlohmann::json& sensors = status.at("devices").at(0).at("sensors");
  EXPECT_EQ(sensors.at("temperature_c"), 34);
  EXPECT_EQ(sensors.at("power_usage_mw"), 71502);
  EXPECT_EQ(sensors.at("power_limit_mw"), 700000);
  EXPECT_EQ(sensors.at("sm_clock_mhz"), 345);
  EXPECT_EQ(sensors.at("memory_clock_mhz"), 2619);
  EXPECT_EQ(sensors.at("performance_state"), 0);
  EXPECT_EQ(sensors.at("ecc_corrected_aggregate"), 2);
  EXPECT_EQ(sensors.at("bar1_used"), 2097152);
  EXPECT_EQ(sensors.at("serial"), "1654922006536");
  EXPECT_FALSE(sensors.contains("fan_speed_percent")) << sensors.dump(2);

  nlohmann::json nvml = nvmlAnswers(cuda.endpoint(), /*emu=*/false);
  EXPECT_EQ(nvml.at("driver_version"), "535.183.01");
  expectSameDevices(nvml, statusOf(cuda.endpoint()));
  EXPECT_EQ(nvml.at("devices").at(0).at("utilization_gpu"), 17);

  // However many status requests come (here ten, and nvml_check's), the server's NVML reads the
  // device at most once a second.
  for (int i = 0; i < 10; ++i) statusOf(cuda.endpoint());
  double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::ifstream log(readings);
  size_t lines = std::count(std::istreambuf_iterator<char>(log), {}, '\n');
  EXPECT_GE(lines, 1u);
  EXPECT_LE(static_cast<double>(lines), std::ceil(elapsed) + 1)
      << "NVML readings: " << lines << " in " << elapsed << " s";
}

// When the server's NVML says the pooled device is a MIG instance, NVML on the client shows it as
// NVIDIA's does: its GPU at the top (MIG enabled, the GPU's name and UUID), the instance under it
// at its slot, with its GPU and compute instance ids; `gpupool status --json` says the same.
TEST(NvmlTest, ChainedMigInstanceSitsUnderItsGpu) {
  GpupoolServer emu;
  std::string uuid = statusOf(emu.endpoint()).at("devices").at(0).at("uuid");
  ServerOptions cudaOptions;
  cudaOptions.extraArgs = {"--nvml-library", RECORDED_NVML_PATH};
  cudaOptions.environment["GPU_POOL_RECORDED_NVML_UUID"] = uuid;
  cudaOptions.environment["GPU_POOL_RECORDED_NVML_MIG_INDEX"] = "3";
  GpupoolServer cuda(chainedCudaOptions(emu.endpoint(), cudaOptions));

  nlohmann::json status = statusOf(cuda.endpoint());
  const nlohmann::json& device = status.at("devices").at(0);
  std::string migUuid = "MIG-" + uuid.substr(4);
  EXPECT_EQ(device.at("uuid"), migUuid) << status.dump(2);
  EXPECT_EQ(device.at("parent"), "GPU-5a1c7e2b-0d4f-4c3e-9a8b-1f2e3d4c5b6a");
  EXPECT_EQ(device.at("profile"), "1g.10gb");
  const nlohmann::json& mig = device.at("mig");
  EXPECT_EQ(mig.at("parent_name"), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(mig.at("parent_memory_total"), 85520809984ull);
  EXPECT_EQ(mig.at("index"), 3);
  EXPECT_EQ(mig.at("max_devices"), 7);
  EXPECT_EQ(mig.at("gpu_instance_id"), 13);
  EXPECT_EQ(mig.at("compute_instance_id"), 0);
  EXPECT_EQ(mig.at("mode_change_pending"), false);

  nlohmann::json nvml = nvmlAnswers(cuda.endpoint(), /*emu=*/false);
  ASSERT_EQ(nvml.at("devices").size(), 1u) << nvml.dump(2);
  const nlohmann::json& gpu = nvml.at("devices").at(0);
  EXPECT_EQ(gpu.at("name"), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(gpu.at("uuid"), "GPU-5a1c7e2b-0d4f-4c3e-9a8b-1f2e3d4c5b6a");
  EXPECT_EQ(gpu.at("mig_enabled"), true);
  EXPECT_FALSE(gpu.contains("memory_total")) << "a MIG-enabled GPU's aggregate is privileged";
  // The GPU's sensors are the server's readings of it.
  EXPECT_EQ(gpu.at("sensors").at("temperature_c"), device.at("sensors").at("temperature_c"));
  ASSERT_EQ(gpu.at("mig_devices").size(), 1u) << nvml.dump(2);
  const nlohmann::json& instance = gpu.at("mig_devices").at(0);
  EXPECT_EQ(instance.at("index"), 3);
  EXPECT_EQ(instance.at("uuid"), migUuid);
  EXPECT_EQ(instance.at("name"), device.at("name"));
  EXPECT_EQ(instance.at("memory_total"), device.at("memory_total"));
  EXPECT_EQ(
      instance.at("memory_total").get<uint64_t>() - instance.at("memory_free").get<uint64_t>(),
      device.at("memory_used").get<uint64_t>());
  EXPECT_EQ(instance.at("gpu_instance_id"), 13);
  EXPECT_EQ(instance.at("compute_instance_id"), 0);

  // gpupool smi, built on the library: the GPU's power (the server's readings), then the MIG
  // devices table with the instance's ids, slot and UUID.
  ProgramResult smi =
      runProgram(gpupoolCliPath(), {"smi"}, clientEnvironment(cuda.endpoint()), seconds(60));
  ASSERT_TRUE(smi.passed()) << smi.describe();
  EXPECT_NE(smi.out.find("71.50W / 700.00W"), std::string::npos) << smi.out;
  EXPECT_NE(smi.out.find("MIG devices:"), std::string::npos) << smi.out;
  EXPECT_NE(smi.out.find("    0  13   0    3  "), std::string::npos) << smi.out;
  EXPECT_NE(smi.out.find(migUuid), std::string::npos) << smi.out;
  ProgramResult listing =
      runProgram(gpupoolCliPath(), {"smi", "-L"}, clientEnvironment(cuda.endpoint()), seconds(60));
  EXPECT_NE(listing.out.find("GPU 0: NVIDIA H100 80GB HBM3 (UUID: "
                             "GPU-5a1c7e2b-0d4f-4c3e-9a8b-1f2e3d4c5b6a)\n  MIG "),
            std::string::npos)
      << listing.out;
  EXPECT_NE(listing.out.find("Device 3: (UUID: " + migUuid + ")"), std::string::npos)
      << listing.out;
}

}  // namespace
}  // namespace gpupool::e2e
