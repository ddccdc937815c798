// Managed memory moves only the pages that were written: measured by the tenant's metered bytes
// (bulk bytes to and from the server) while a program writes a few pages of a managed buffer on the
// host, a kernel changes the same pages, and the host reads them after cudaDeviceSynchronize.
#include <gtest/gtest.h>

#include <cstdio>

#include "build_paths.h"
#include "pool_fixture.h"

namespace gpupool::pooltest {
namespace {

using std::chrono::seconds;

constexpr long long kPage = 4096;
constexpr long long kBufferMiB = 32;

struct Traffic {
  long long in = 0, out = 0;
};

// Runs `pool_client managed` writing `pages` pages and returns the bytes metered in between.
Traffic managedRound(const std::string& endpoint, long long pages) {
  ChildProcess client({poolClientPath(),
                       {"managed", std::to_string(kBufferMiB), std::to_string(pages)},
                       tenantEnvironment(endpoint, "a"),
                       {}});
  if (!client.waitForStdout("READY", seconds(60))) {
    ADD_FAILURE() << client.finish(seconds(1)).describe();
    return {};
  }
  nlohmann::json before = tenantIn(queryStatus(endpoint), "alice");
  client.writeStdin("go\n");
  if (!client.waitForStdout("DONE", seconds(120))) {
    ADD_FAILURE() << client.finish(seconds(1)).describe();
    return {};
  }
  nlohmann::json after = tenantIn(queryStatus(endpoint), "alice");
  ProgramResult done = client.finish(seconds(60));
  EXPECT_TRUE(done.passed()) << done.describe();
  EXPECT_EQ(valueAfter(done.out, "CHECK"), 1) << done.describe();
  return {after.at("bytes_in").get<long long>() - before.at("bytes_in").get<long long>(),
          after.at("bytes_out").get<long long>() - before.at("bytes_out").get<long long>()};
}

TEST(ManagedTrafficTest, OnlyWrittenPagesTravel) {
  ScratchDirectory dir;
  dir.write("pool.toml",
            "[[device]]\nmemory = \"128MiB\"\n"
            "[[tenant]]\nname = \"alice\"\ntoken = \"a\"\nmemory_quota = \"64MiB\"\n");
  GpupoolServer server(poolServerOptions({"--config", dir.file("pool.toml")}));
  // Four pages of 8192: four pages each way (and 16 bytes per page of run headers back), plus
  // the launch's few bytes.
  Traffic few = managedRound(server.endpoint(), 4);
  EXPECT_GE(few.in, 4 * kPage);
  EXPECT_LE(few.in, 4 * kPage + 1024) << "bytes to the server";
  EXPECT_GE(few.out, 4 * kPage);
  EXPECT_LE(few.out, 4 * kPage + 1024) << "bytes from the server";
  // Every page written: the whole buffer travels each way, so the meter does see managed traffic.
  Traffic all = managedRound(server.endpoint(), kBufferMiB * 256);
  EXPECT_GE(all.in, kBufferMiB << 20);
  EXPECT_GE(all.out, kBufferMiB << 20);
  std::printf("metered bytes in/out: 4 pages %lld/%lld, every page %lld/%lld\n", few.in, few.out,
              all.in, all.out);
}

}  // namespace
}  // namespace gpupool::pooltest
