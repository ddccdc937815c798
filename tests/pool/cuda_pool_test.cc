// A pool on the cuda backend, without a GPU: the cuda backend's driver is our libcuda.so.1 talking
// to an emu gpupoold (a chained pool). Kernels pass the pool's launch gate there too, so tenants
// are metered in GPU-seconds; [[device]] index and uuid select the driver's devices; a device the
// driver does not have stops the daemon with the file, line and key, as do quotas that the
// driver's devices cannot hold.
#include <gtest/gtest.h>

#include "build_paths.h"
#include "harness_paths.h"
#include "pool_fixture.h"

namespace gpupool::pooltest {
namespace {

using std::chrono::seconds;

const char kTenants[] =
    "[[tenant]]\nname = \"alice\"\ntoken = \"a\"\n"
    "[[tenant]]\nname = \"bob\"\ntoken = \"b\"\n";

std::vector<std::string> uuidsOf(const nlohmann::json& status) {
  std::vector<std::string> out;
  for (const auto& d : status.at("devices")) out.push_back(d.at("uuid"));
  return out;
}

TEST(CudaPoolTest, KernelsPassTheGateAndAreMeteredForTheTenantThatLaunched) {
  ScratchDirectory dir;
  dir.write("pool.toml", std::string("[metering]\nflush_ms = 100\n"
                                     "[[device]]\nbackend = \"cuda\"\n") +
                             kTenants);
  ChainedServers pool = startChainedPool(dir.file("pool.toml"), {"--memory", "256MiB"});

  ChildProcess spinner({poolClientPath(),
                        {"spin", "300", "2000", "4"},
                        tenantEnvironment(pool.cuda->endpoint(), "a"),
                        {}});
  ASSERT_TRUE(spinner.waitForStdout("READY", seconds(60))) << spinner.finish(seconds(1)).describe();
  spinner.writeStdin("go\n");
  ProgramResult spun = spinner.finish(seconds(60));
  ASSERT_TRUE(spun.passed()) << spun.describe();
  long long launches = valueAfter(spun.out, "LAUNCHED");
  ProgramResult bob = runClient(pool.cuda->endpoint(), "b", {"try", "16"});
  ASSERT_TRUE(bob.passed()) << bob.describe();

  nlohmann::json status = queryStatus(pool.cuda->endpoint());
  EXPECT_EQ(status.at("backend"), "cuda");
  const auto& alice = tenantIn(status, "alice");
  EXPECT_EQ(alice.at("launches").get<long long>(), launches) << status.dump(2);
  EXPECT_GT(alice.at("gpu_seconds").get<double>(), 0.0) << status.dump(2);
  const auto& bobStatus = tenantIn(status, "bob");
  EXPECT_EQ(bobStatus.at("launches").get<long long>(), 0) << status.dump(2);
  EXPECT_EQ(bobStatus.at("gpu_seconds").get<double>(), 0.0) << status.dump(2);
  EXPECT_GT(bobStatus.at("calls").get<long long>(), 0) << status.dump(2);
}

// A kernel queued behind a stream wait that only another stream's kernel meets: the kernel's
// admission by the device's scheduler waits on the device, so the session goes on serving and the
// kernel that meets the wait gets the device. (Admitting on the serving thread held the device, one
// kernel at a time, and the session until the wait was met: never, here.) A graph with a wait node
// is replayed under the scheduler, each kernel its own admission. The programs check their results.
TEST(CudaPoolTest, KernelsAndGraphsBehindStreamWaitsDoNotHoldTheDevice) {
  ScratchDirectory dir;
  dir.write("pool.toml",
            std::string("[metering]\nflush_ms = 100\n[[device]]\nbackend = \"cuda\"\n") + kTenants);
  ChainedServers pool = startChainedPool(dir.file("pool.toml"), {"--memory", "256MiB"});
  for (const char* program : {"stream_memops_driver", "graph_batch_memop_driver"}) {
    ProgramResult result = e2e::runProgram(
        e2e::programPath(program), {}, tenantEnvironment(pool.cuda->endpoint(), "a"), seconds(90));
    ASSERT_TRUE(result.passed()) << program << ": " << result.describe();
    EXPECT_NE(result.out.find("PASS"), std::string::npos) << program << ": " << result.describe();
  }
  nlohmann::json status = queryStatus(pool.cuda->endpoint());
  EXPECT_GT(tenantIn(status, "alice").at("launches").get<long long>(), 0) << status.dump(2);
}

TEST(CudaPoolTest, DevicesAreSelectedByUuidAndIndex) {
  ScratchDirectory dir;
  GpupoolServer emu(poolServerOptions({"--memory", "128MiB", "--devices", "2"}));
  std::vector<std::string> emuUuids = uuidsOf(queryStatus(emu.endpoint()));
  ASSERT_EQ(emuUuids.size(), 2u);
  ASSERT_NE(emuUuids[0], emuUuids[1]);
  EXPECT_EQ(emuUuids[1].rfind("GPU-", 0), 0u) << emuUuids[1];

  // Pool device 0 is the driver's device 1, by UUID; pool device 1 the driver's device 0.
  dir.write("pool.toml", "[[device]]\nbackend = \"cuda\"\nuuid = \"" + emuUuids[1] +
                             "\"\n[[device]]\nbackend = \"cuda\"\nindex = 0\n" + kTenants);
  GpupoolServer cuda(e2e::chainedCudaOptions(
      emu.endpoint(), poolServerOptions({"--config", dir.file("pool.toml")})));
  nlohmann::json status = queryStatus(cuda.endpoint());
  EXPECT_EQ(uuidsOf(status), (std::vector<std::string>{emuUuids[1], emuUuids[0]}))
      << status.dump(2);
  // No NVML here: MIG parent and profile are absent, not empty.
  EXPECT_FALSE(status.at("devices")[0].contains("parent")) << status.dump(2);

  // A program on pool device 0 allocates on the emu server's device 1.
  ProgramResult held = runClient(cuda.endpoint(), "a", {"try", "16"});
  EXPECT_EQ(valueAfter(held.out, "ALLOC"), 0) << held.describe();
}

// Starts the cuda server on `config` and expects it to refuse: exit 2, the message on stderr.
std::string refusal(const ScratchDirectory& dir, const std::string& config,
                    const std::string& emuEndpoint) {
  dir.write("pool.toml", config + kTenants);
  ServerOptions cuda =
      e2e::chainedCudaOptions(emuEndpoint, poolServerOptions({"--config", dir.file("pool.toml")}));
  ProgramResult r =
      e2e::runProgram(e2e::gpupooldPath(), cuda.arguments(), cuda.environment, seconds(60));
  EXPECT_EQ(r.exitCode, 2) << r.describe();
  EXPECT_EQ(r.out.find("listening on"), std::string::npos) << r.describe();
  return r.err;
}

TEST(CudaPoolTest, ADeviceTheDriverDoesNotHaveStopsTheDaemonNamingFileLineAndKey) {
  ScratchDirectory dir;
  GpupoolServer emu(poolServerOptions({"--memory", "128MiB"}));
  std::string where = dir.file("pool.toml") + ":4: device[0].";

  std::string uuid = refusal(dir,
                             "[[device]]\nbackend = \"cuda\"\n\n"
                             "uuid = \"GPU-00000000-1111-2222-3333-444444444444\"\n",
                             emu.endpoint());
  EXPECT_NE(uuid.find(where + "uuid: no CUDA device has uuid GPU-00000000-1111-2222-3333-"),
            std::string::npos)
      << uuid;

  std::string index = refusal(dir, "[[device]]\nbackend = \"cuda\"\n\nindex = 3\n", emu.endpoint());
  EXPECT_NE(index.find(where + "index: no CUDA device 3"), std::string::npos) << index;

  // The driver's devices are known only at start: quotas are checked against them then.
  std::string quota = refusal(dir,
                              "[[device]]\nbackend = \"cuda\"\n"
                              "[[tenant]]\nname = \"carol\"\ntoken = \"c\"\n"
                              "memory_quota = \"1GiB\"\n",
                              emu.endpoint());
  EXPECT_NE(quota.find(dir.file("pool.toml") + ": tenant.memory_quota: quotas add up to " +
                       std::to_string(1ull << 30) + " bytes, more than the pool's " +
                       std::to_string(128ull << 20)),
            std::string::npos)
      << quota;

  // A MIG instance is made visible through CUDA_VISIBLE_DEVICES before cuInit; a driver that has
  // no such instance (ours knows no MIG at all) finds no device.
  std::string mig = refusal(dir,
                            "[[device]]\nbackend = \"cuda\"\n\n"
                            "uuid = \"MIG-0a1b2c3d-1111-2222-3333-444444444444\"\n",
                            emu.endpoint());
  EXPECT_NE(mig.find(where + "uuid: "), std::string::npos) << mig;
  EXPECT_NE(mig.find("CUDA_VISIBLE_DEVICES=MIG-0a1b2c3d-1111-2222-3333-444444444444"),
            std::string::npos)
      << mig;
}

}  // namespace
}  // namespace gpupool::pooltest
