// Tenants of a configured pool, with real gpupoold and CUDA processes: tokens are checked at
// cuInit, quotas hold across a tenant's sessions, cuMemGetInfo shows the tenant's view, overcommit
// fails only the allocation that does not fit, and SIGHUP reloads tenants without dropping
// sessions.
#include <gtest/gtest.h>
#include <signal.h>

#include "build_paths.h"
#include "pool_fixture.h"

namespace gpupool::pooltest {
namespace {

using std::chrono::seconds;

constexpr int kNotPermitted = 800;  // CUDA_ERROR_NOT_PERMITTED
constexpr int kCudaSuccess = 0;
constexpr int kCudartOutOfMemory = 2;  // cudaErrorMemoryAllocation
constexpr int kOutOfMemory = 2;        // CUDA_ERROR_OUT_OF_MEMORY
constexpr long long kMiB = 1 << 20;

std::string tenant(const std::string& name, const std::string& token,
                   const std::string& extra = "") {
  return "[[tenant]]\nname = \"" + name + "\"\ntoken = \"" + token + "\"\n" + extra;
}

TEST(TenancyTest, UnknownOrMissingTokensAreRefusedAtCuInit) {
  ScratchDirectory dir;
  dir.write("pool.toml", "[[device]]\nmemory = \"256MiB\"\n" + tenant("alice", "alice-secret"));
  GpupoolServer server(poolServerOptions({"--config", dir.file("pool.toml")}));

  ProgramResult wrong = runClient(server.endpoint(), "guess", {"init"});
  EXPECT_EQ(valueAfter(wrong.out, "CUINIT"), kNotPermitted) << wrong.describe();
  EXPECT_NE(wrong.err.find("token refused"), std::string::npos) << wrong.describe();

  ProgramResult missing = runClient(server.endpoint(), "", {"init"});
  EXPECT_EQ(valueAfter(missing.out, "CUINIT"), kNotPermitted) << missing.describe();
  EXPECT_NE(missing.err.find("GPU_POOL_TOKEN"), std::string::npos) << missing.describe();

  ProgramResult right = runClient(server.endpoint(), "alice-secret", {"init"});
  EXPECT_EQ(valueAfter(right.out, "CUINIT"), kCudaSuccess) << right.describe();
}

TEST(TenancyTest, QuotaHoldsAcrossSessionsAndMemGetInfoIsTheTenantsView) {
  ScratchDirectory dir;
  dir.write("pool.toml", "[[device]]\nmemory = \"512MiB\"\n" +
                             tenant("alice", "a", "memory_quota = \"64MiB\"\n") +
                             tenant("bob", "b"));
  GpupoolServer server(poolServerOptions({"--config", dir.file("pool.toml")}));

  ProgramResult fits = runClient(server.endpoint(), "a", {"try", "48"});
  EXPECT_EQ(valueAfter(fits.out, "ALLOC"), kCudaSuccess) << fits.describe();
  // total = the quota; free = the quota less what this tenant holds.
  EXPECT_NE(fits.out.find("MEMINFO " + std::to_string(16 * kMiB) + " " + std::to_string(64 * kMiB)),
            std::string::npos)
      << fits.describe();

  ProgramResult tooBig = runClient(server.endpoint(), "a", {"try", "80"});
  EXPECT_EQ(valueAfter(tooBig.out, "ALLOC"), kCudartOutOfMemory) << tooBig.describe();

  // The quota is the tenant's, not the session's: a second process sees what the first holds.
  ChildProcess holder(
      {poolClientPath(), {"hold", "48"}, tenantEnvironment(server.endpoint(), "a"), {}});
  ASSERT_TRUE(holder.waitForStdout("READY", seconds(60))) << holder.finish(seconds(1)).describe();
  ProgramResult second = runClient(server.endpoint(), "a", {"try", "32"});
  EXPECT_EQ(valueAfter(second.out, "ALLOC"), kCudartOutOfMemory) << second.describe();
  ProgramResult small = runClient(server.endpoint(), "a", {"try", "8"});
  EXPECT_EQ(valueAfter(small.out, "ALLOC"), kCudaSuccess) << small.describe();
  // Another tenant is not limited by alice's quota.
  ProgramResult other = runClient(server.endpoint(), "b", {"try", "200"});
  EXPECT_EQ(valueAfter(other.out, "ALLOC"), kCudaSuccess) << other.describe();

  nlohmann::json status = queryStatus(server.endpoint());
  EXPECT_EQ(tenantIn(status, "alice").at("memory_used").get<long long>(), 48 * kMiB)
      << status.dump(2);
  EXPECT_EQ(tenantIn(status, "alice").at("memory_quota").get<long long>(), 64 * kMiB);
  holder.closeStdin();
  EXPECT_TRUE(holder.finish(seconds(30)).passed());
  // Released when the session ends.
  ProgramResult after = runClient(server.endpoint(), "a", {"try", "60"});
  EXPECT_EQ(valueAfter(after.out, "ALLOC"), kCudaSuccess) << after.describe();
}

TEST(TenancyTest, PoolAllocationsCountAgainstTheQuota) {
  ScratchDirectory dir;
  dir.write("pool.toml", "[[device]]\nmemory = \"512MiB\"\n" +
                             tenant("alice", "a", "memory_quota = \"64MiB\"\n"));
  GpupoolServer server(poolServerOptions({"--config", dir.file("pool.toml")}));

  ProgramResult fits = runClient(server.endpoint(), "a", {"try-async", "48"});
  EXPECT_EQ(valueAfter(fits.out, "ALLOC"), kCudaSuccess) << fits.describe();
  EXPECT_NE(fits.out.find("MEMINFO " + std::to_string(16 * kMiB) + " " + std::to_string(64 * kMiB)),
            std::string::npos)
      << fits.describe();
  ProgramResult tooBig = runClient(server.endpoint(), "a", {"try-async", "80"});
  EXPECT_EQ(valueAfter(tooBig.out, "ALLOC"), kCudartOutOfMemory) << tooBig.describe();

  // Memory held in a pool limits plain allocations and other pool allocations alike.
  ChildProcess holder(
      {poolClientPath(), {"hold-async", "48"}, tenantEnvironment(server.endpoint(), "a"), {}});
  ASSERT_TRUE(holder.waitForStdout("READY", seconds(60))) << holder.finish(seconds(1)).describe();
  EXPECT_EQ(valueAfter(holder.capturedStdout(), "HELD"), kCudaSuccess);
  ProgramResult plain = runClient(server.endpoint(), "a", {"try", "32"});
  EXPECT_EQ(valueAfter(plain.out, "ALLOC"), kCudartOutOfMemory) << plain.describe();
  ProgramResult pooled = runClient(server.endpoint(), "a", {"try-async", "32"});
  EXPECT_EQ(valueAfter(pooled.out, "ALLOC"), kCudartOutOfMemory) << pooled.describe();
  nlohmann::json status = queryStatus(server.endpoint());
  EXPECT_EQ(tenantIn(status, "alice").at("memory_used").get<long long>(), 48 * kMiB)
      << status.dump(2);
  holder.closeStdin();
  EXPECT_TRUE(holder.finish(seconds(30)).passed());

  // Freed pool blocks are no longer charged: 4 x 48 MiB through the pool, then 48 MiB more.
  ProgramResult recycled = runClient(server.endpoint(), "a", {"recycle-async", "48"});
  EXPECT_EQ(valueAfter(recycled.out, "ALLOC"), kCudaSuccess) << recycled.describe();
}

TEST(TenancyTest, GraphMemoryCountsAgainstTheQuotaUntilTrimmed) {
  ScratchDirectory dir;
  dir.write("pool.toml", "[[device]]\nmemory = \"512MiB\"\n" +
                             tenant("alice", "a", "memory_quota = \"64MiB\"\n"));
  GpupoolServer server(poolServerOptions({"--config", dir.file("pool.toml")}));

  // An alloc node holds its memory from its creation (its address is fixed): 48 + 32 > 64 MiB.
  // Destroyed, its block stays in the graph pool, charged, until cuDeviceGraphMemTrim.
  ProgramResult held = runClient(server.endpoint(), "a", {"graph-alloc", "48"});
  EXPECT_EQ(valueAfter(held.out, "ALLOC"), kCudaSuccess) << held.describe();
  EXPECT_EQ(valueAfter(held.out, "PLAIN"), kCudartOutOfMemory) << held.describe();
  EXPECT_EQ(valueAfter(held.out, "TRIMMED"), kCudaSuccess) << held.describe();
  ProgramResult tooBig = runClient(server.endpoint(), "a", {"graph-alloc", "80"});
  EXPECT_EQ(valueAfter(tooBig.out, "ALLOC"), kCudartOutOfMemory) << tooBig.describe();
}

TEST(TenancyTest, VirtualMemoryCountsAgainstTheQuotaUntilFreed) {
  ScratchDirectory dir;
  dir.write("pool.toml", "[[device]]\nmemory = \"512MiB\"\n" +
                             tenant("alice", "a", "memory_quota = \"64MiB\"\n"));
  GpupoolServer server(poolServerOptions({"--config", dir.file("pool.toml")}));

  // 48 MiB created fit; while they stay mapped (their handle released), 48 MiB more do not; once
  // unmapped they are freed and 48 MiB fit again.
  ProgramResult vmm = runClient(server.endpoint(), "a", {"vmm", "48"});
  EXPECT_EQ(valueAfter(vmm.out, "CREATE"), kCudaSuccess) << vmm.describe();
  EXPECT_EQ(valueAfter(vmm.out, "WHILE_MAPPED"), kOutOfMemory) << vmm.describe();
  EXPECT_EQ(valueAfter(vmm.out, "AFTER_UNMAP"), kCudaSuccess) << vmm.describe();
  ProgramResult tooBig = runClient(server.endpoint(), "a", {"vmm", "80"});
  EXPECT_EQ(valueAfter(tooBig.out, "CREATE"), kOutOfMemory) << tooBig.describe();
  nlohmann::json status = queryStatus(server.endpoint());
  EXPECT_EQ(tenantIn(status, "alice").at("memory_used").get<long long>(), 0) << status.dump(2);
}

TEST(TenancyTest, ArrayMemoryCountsAgainstTheQuotaUntilDestroyed) {
  ScratchDirectory dir;
  dir.write("pool.toml", "[[device]]\nmemory = \"512MiB\"\n" +
                             tenant("alice", "a", "memory_quota = \"64MiB\"\n"));
  GpupoolServer server(poolServerOptions({"--config", dir.file("pool.toml")}));

  // A 48 MiB array fits; while it lives, 48 MiB more do not; once destroyed they do.
  ProgramResult array = runClient(server.endpoint(), "a", {"array", "48"});
  EXPECT_EQ(valueAfter(array.out, "CREATE"), kCudaSuccess) << array.describe();
  EXPECT_EQ(valueAfter(array.out, "SECOND"), kCudartOutOfMemory) << array.describe();
  EXPECT_EQ(valueAfter(array.out, "AFTER_DESTROY"), kCudaSuccess) << array.describe();
  ProgramResult tooBig = runClient(server.endpoint(), "a", {"array", "80"});
  EXPECT_EQ(valueAfter(tooBig.out, "CREATE"), kOutOfMemory) << tooBig.describe();
  nlohmann::json status = queryStatus(server.endpoint());
  EXPECT_EQ(tenantIn(status, "alice").at("memory_used").get<long long>(), 0) << status.dump(2);
}

TEST(TenancyTest, OvercommitFailsOnlyTheAllocationThatDoesNotFit) {
  ScratchDirectory dir;
  dir.write("pool.toml", "overcommit = 2.0\n[[device]]\nmemory = \"256MiB\"\n" +
                             tenant("alice", "a", "memory_quota = \"256MiB\"\n") +
                             tenant("bob", "b", "memory_quota = \"256MiB\"\n"));
  GpupoolServer server(poolServerOptions({"--config", dir.file("pool.toml")}));
  ChildProcess alice(
      {poolClientPath(), {"hold", "200"}, tenantEnvironment(server.endpoint(), "a"), {}});
  ASSERT_TRUE(alice.waitForStdout("READY", seconds(60))) << alice.finish(seconds(1)).describe();
  EXPECT_EQ(valueAfter(alice.capturedStdout(), "HELD"), kCudaSuccess);

  // Within bob's quota, but the device is really full: this allocation fails, nothing else.
  ProgramResult big = runClient(server.endpoint(), "b", {"try", "100"});
  EXPECT_EQ(valueAfter(big.out, "ALLOC"), kCudartOutOfMemory) << big.describe();
  ProgramResult fits = runClient(server.endpoint(), "b", {"try", "32"});
  EXPECT_EQ(valueAfter(fits.out, "ALLOC"), kCudaSuccess) << fits.describe();

  nlohmann::json status = queryStatus(server.endpoint());
  EXPECT_EQ(tenantIn(status, "alice").at("memory_used").get<long long>(), 200 * kMiB);
  EXPECT_EQ(tenantIn(status, "bob").at("memory_used").get<long long>(), 0)
      << "bob's failed "
         "allocation was charged";
  alice.closeStdin();
  EXPECT_TRUE(alice.finish(seconds(30)).passed()) << "alice was harmed";
}

TEST(TenancyTest, DeviceAllowListIsEnforced) {
  ScratchDirectory dir;
  dir.write("pool.toml", "[[device]]\nmemory = \"128MiB\"\n[[device]]\nmemory = \"128MiB\"\n" +
                             tenant("alice", "a", "devices = [1]\n"));
  GpupoolServer server(poolServerOptions({"--config", dir.file("pool.toml")}));
  // The program uses device 0, which alice may not.
  ProgramResult r = runClient(server.endpoint(), "a", {"try", "1"});
  EXPECT_NE(valueAfter(r.out, "ALLOC"), kCudaSuccess) << r.describe();
  EXPECT_NE(valueAfter(r.out, "ALLOC"), -1) << r.describe();
}

TEST(TenancyTest, SighupReloadsTenantsWithoutDroppingSessions) {
  ScratchDirectory dir;
  std::string device = "[[device]]\nmemory = \"256MiB\"\n";
  dir.write("pool.toml", device + tenant("alice", "a"));
  GpupoolServer server(poolServerOptions({"--config", dir.file("pool.toml")}));
  EXPECT_EQ(valueAfter(runClient(server.endpoint(), "b", {"init"}).out, "CUINIT"), kNotPermitted);

  ChildProcess alice(
      {poolClientPath(), {"hold", "16"}, tenantEnvironment(server.endpoint(), "a"), {}});
  ASSERT_TRUE(alice.waitForStdout("READY", seconds(60))) << alice.finish(seconds(1)).describe();

  // Bob is added, alice removed: bob gets in, alice's new sessions do not, her open one goes on.
  dir.write("pool.toml", device + tenant("bob", "b"));
  server.signal(SIGHUP);
  ASSERT_TRUE(server.waitForLog("reloaded")) << server.log();
  EXPECT_EQ(valueAfter(runClient(server.endpoint(), "b", {"init"}).out, "CUINIT"), kCudaSuccess);
  EXPECT_EQ(valueAfter(runClient(server.endpoint(), "a", {"init"}).out, "CUINIT"), kNotPermitted);
  alice.closeStdin();
  EXPECT_TRUE(alice.finish(seconds(30)).passed()) << "alice's session was dropped";

  // A broken file changes nothing and says why.
  dir.write("pool.toml", device + "[[tenant]]\nname = 7\n");
  server.signal(SIGHUP);
  ASSERT_TRUE(server.waitForLog("reload failed")) << server.log();
  EXPECT_NE(server.log().find("pool.toml:4: tenant[0].name"), std::string::npos) << server.log();
  EXPECT_EQ(valueAfter(runClient(server.endpoint(), "b", {"init"}).out, "CUINIT"), kCudaSuccess);
}

TEST(TenancyTest, BadConfigurationStopsTheDaemonWithFileLineAndKey) {
  ScratchDirectory dir;
  dir.write("pool.toml", "[[device]]\nmemory = \"lots\"\n");
  ProgramResult r =
      e2e::runProgram(e2e::gpupooldPath(), {"--config", dir.file("pool.toml")}, {}, seconds(30));
  EXPECT_EQ(r.exitCode, 2) << r.describe();
  EXPECT_NE(r.err.find("pool.toml:2: device[0].memory"), std::string::npos) << r.describe();
}

TEST(TenancyTest, WithoutConfigTheServerRunsOpenAndSaysSo) {
  GpupoolServer server(poolServerOptions({"--memory", "64MiB"}));
  EXPECT_NE(server.log().find("no --config: serving without authentication"), std::string::npos);
  EXPECT_EQ(valueAfter(runClient(server.endpoint(), "", {"init"}).out, "CUINIT"), kCudaSuccess);
}

}  // namespace
}  // namespace gpupool::pooltest
