// Metering with real processes: usage is recorded per tenant, survives a server restart, is
// reported by `gpupool usage`, and is scraped from /metrics.
#include <gtest/gtest.h>

#include <regex>

#include "build_paths.h"
#include "http_get.h"
#include "pool_fixture.h"

namespace gpupool::pooltest {
namespace {

using e2e::httpGet;
using std::chrono::seconds;

std::string poolConfig(const std::string& database) {
  return "[metering]\ndatabase = \"" + database +
         "\"\nflush_ms = 100\n"
         "[[device]]\nmemory = \"128MiB\"\n"
         "[[tenant]]\nname = \"alice\"\ntoken = \"a\"\nmemory_quota = \"64MiB\"\n"
         "[[tenant]]\nname = \"bob\"\ntoken = \"b\"\n";
}

nlohmann::json usageReport(const std::string& database,
                           const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"usage", "--db", database, "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  ProgramResult r = e2e::runProgram(e2e::gpupoolCliPath(), args, {}, seconds(30));
  if (!r.passed()) {
    ADD_FAILURE() << r.describe();
    return nlohmann::json::object();
  }
  return nlohmann::json::parse(r.out);
}

const nlohmann::json& reportFor(const nlohmann::json& report, const std::string& tenant) {
  for (const auto& t : report.at("tenants")) {
    if (t.at("tenant") == tenant) return t;
  }
  throw std::runtime_error("no " + tenant + " in " + report.dump(2));
}

TEST(MeteringTest, UsageIsRecordedPerTenantAndSurvivesARestart) {
  ScratchDirectory dir;
  std::string database = dir.file("usage.db");
  dir.write("pool.toml", poolConfig(database));
  long long launchesBefore = 0;
  {
    GpupoolServer server(poolServerOptions({"--config", dir.file("pool.toml")}));
    ChildProcess spinner({poolClientPath(),
                          {"spin", "300", "2000", "4"},
                          tenantEnvironment(server.endpoint(), "a"),
                          {}});
    ASSERT_TRUE(spinner.waitForStdout("READY", seconds(60)))
        << spinner.finish(seconds(1)).describe();
    spinner.writeStdin("go\n");
    ProgramResult spun = spinner.finish(seconds(60));
    ASSERT_TRUE(spun.passed()) << spun.describe();
    launchesBefore = valueAfter(spun.out, "LAUNCHED");
    ProgramResult bob = runClient(server.endpoint(), "b", {"hold", "32"});
    ASSERT_TRUE(bob.passed()) << bob.describe();
    // Stopped with SIGTERM: what is pending is flushed on the way out.
    EXPECT_TRUE(server.stop().passed());
  }
  nlohmann::json report = usageReport(database);
  const auto& alice = reportFor(report, "alice");
  EXPECT_EQ(alice.at("launches").get<long long>(), launchesBefore) << report.dump(2);
  EXPECT_GT(alice.at("gpu_seconds").get<double>(), 0.0);
  EXPECT_GT(alice.at("calls").get<long long>(), launchesBefore);
  const auto& bob = reportFor(report, "bob");
  EXPECT_EQ(bob.at("launches").get<long long>(), 0);
  EXPECT_GT(bob.at("calls").get<long long>(), 0);
  EXPECT_GT(alice.at("bytes_in").get<long long>(), 0)
      << "the kernel's module image crossed the wire";
  // Nothing recorded in the future.
  EXPECT_TRUE(usageReport(database, {"--since", "2999-01-01"}).at("tenants").empty());

  // The restarted server's totals include the earlier run.
  GpupoolServer again(poolServerOptions({"--config", dir.file("pool.toml")}));
  nlohmann::json status = queryStatus(again.endpoint());
  EXPECT_EQ(tenantIn(status, "alice").at("launches").get<long long>(), launchesBefore)
      << status.dump(2);
}

TEST(MeteringTest, MetricsAreScrapedInPrometheusFormat) {
  ScratchDirectory dir;
  dir.write("pool.toml", poolConfig(dir.file("usage.db")));
  GpupoolServer server(
      poolServerOptions({"--config", dir.file("pool.toml"), "--metrics-listen", "127.0.0.1:0"}));
  ChildProcess holder(
      {poolClientPath(), {"hold", "16"}, tenantEnvironment(server.endpoint(), "a"), {}});
  ASSERT_TRUE(holder.waitForStdout("READY", seconds(60))) << holder.finish(seconds(1)).describe();
  std::string response = httpGet(server.metricsUrl());
  EXPECT_EQ(response.rfind("HTTP/1.1 200 OK", 0), 0u) << response;
  EXPECT_NE(response.find("text/plain; version=0.0.4"), std::string::npos);
  EXPECT_NE(response.find("gpupool_device_memory_total_bytes{device=\"0\"} 134217728"),
            std::string::npos)
      << response;
  EXPECT_NE(response.find("gpupool_tenant_memory_used_bytes{tenant=\"alice\"} 16777216"),
            std::string::npos)
      << response;
  EXPECT_NE(response.find("gpupool_tenant_sessions{tenant=\"alice\"} 1"), std::string::npos)
      << response;
  EXPECT_NE(response.find("# TYPE gpupool_tenant_calls_total counter"), std::string::npos);
  std::string missing =
      httpGet(std::regex_replace(server.metricsUrl(), std::regex("/metrics$"), "/other"));
  EXPECT_EQ(missing.rfind("HTTP/1.1 404", 0), 0u) << missing;
  holder.closeStdin();
  EXPECT_TRUE(holder.finish(seconds(30)).passed());
}

// A request answered with an error counts against its tenant: alice's allocation past her 64 MiB
// quota fails (CUDA_ERROR_OUT_OF_MEMORY), bob's that fits does not.
TEST(MeteringTest, FailedCallsAreCountedPerTenant) {
  ScratchDirectory dir;
  dir.write("pool.toml", poolConfig(dir.file("usage.db")));
  GpupoolServer server(
      poolServerOptions({"--config", dir.file("pool.toml"), "--metrics-listen", "127.0.0.1:0"}));
  ASSERT_FALSE(server.metricsUrl().empty()) << server.log();
  std::string before = httpGet(server.metricsUrl());
  EXPECT_NE(before.find("# TYPE gpupool_tenant_failed_calls_total counter"), std::string::npos)
      << before;
  EXPECT_NE(before.find("gpupool_tenant_failed_calls_total{tenant=\"alice\"} 0\n"),
            std::string::npos)
      << before;
  ProgramResult refused = runClient(server.endpoint(), "a", {"try", "100"});
  ASSERT_TRUE(refused.passed()) << refused.describe();
  EXPECT_NE(refused.out.find("ALLOC 2\n"), std::string::npos) << refused.describe();  // OOM
  ProgramResult fits = runClient(server.endpoint(), "b", {"try", "16"});
  ASSERT_TRUE(fits.passed()) << fits.describe();
  EXPECT_NE(fits.out.find("ALLOC 0\n"), std::string::npos) << fits.describe();
  std::string after = httpGet(server.metricsUrl());
  std::smatch alice;
  ASSERT_TRUE(std::regex_search(
      after, alice, std::regex("gpupool_tenant_failed_calls_total\\{tenant=\"alice\"\\} (\\d+)\n")))
      << after;
  EXPECT_GE(std::stoll(alice[1]), 1) << after;
  EXPECT_NE(after.find("gpupool_tenant_failed_calls_total{tenant=\"bob\"} 0\n"), std::string::npos)
      << after;
}

// A graph launch is one message whatever its size: launching a graph of 50 kernels 8 times adds
// 8 calls (and one for the synchronize) to the tenant's count, and 400 kernels to its launches.
TEST(MeteringTest, AGraphLaunchIsOneMessage) {
  constexpr long long kNodes = 50, kLaunches = 8;
  ScratchDirectory dir;
  dir.write("pool.toml", poolConfig(dir.file("usage.db")));
  GpupoolServer server(poolServerOptions({"--config", dir.file("pool.toml")}));
  ChildProcess client({poolClientPath(),
                       {"graph", std::to_string(kNodes), std::to_string(kLaunches)},
                       tenantEnvironment(server.endpoint(), "a"),
                       {}});
  ASSERT_TRUE(client.waitForStdout("READY", seconds(60))) << client.finish(seconds(1)).describe();
  nlohmann::json before = tenantIn(queryStatus(server.endpoint()), "alice");
  client.writeStdin("go\n");
  ASSERT_TRUE(client.waitForStdout("DONE", seconds(120))) << client.finish(seconds(1)).describe();
  nlohmann::json after = tenantIn(queryStatus(server.endpoint()), "alice");
  client.writeStdin("check\n");
  ProgramResult done = client.finish(seconds(60));
  ASSERT_TRUE(done.passed()) << done.describe();
  // Every launch ran all its kernels: the capture's launches plus none from elsewhere.
  EXPECT_EQ(valueAfter(done.out, "COUNT"), kNodes * kLaunches) << done.describe();
  EXPECT_EQ(after.at("calls").get<long long>() - before.at("calls").get<long long>(), kLaunches + 1)
      << "before " << before.dump() << " after " << after.dump();
  EXPECT_EQ(after.at("launches").get<long long>() - before.at("launches").get<long long>(),
            kNodes * kLaunches)
      << "before " << before.dump() << " after " << after.dump();
}

}  // namespace
}  // namespace gpupool::pooltest
