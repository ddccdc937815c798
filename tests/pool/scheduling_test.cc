// Two tenants sharing one emu device: measured launch counts show weighted fair share inside a
// priority class, high priority overtaking low, and the starvation bound keeping low alive.
#include <gtest/gtest.h>

#include <sstream>

#include "pool_fixture.h"

namespace gpupool::pooltest {
namespace {

using std::chrono::seconds;

// Loop steps per kernel: a few milliseconds of interpreter time (about 5 ms on the development
// machine), so a 2.5 s window holds hundreds.
const std::string kIterations = "200000";
const std::string kWindowMs = "2500";
// Kernels each client keeps queued: its queue never runs dry (a device with one tenant waiting
// runs that tenant's work, whatever its class), so the scheduler alone decides the share.
const std::string kBatch = "16";

struct Counts {
  long long alice = -1, bob = -1;
  // Kernel time each tenant got during the window (`gpu_seconds` in status, which the scheduler's
  // share is made of): unlike launch counts, it does not move when a loaded machine slows some
  // kernels more than others.
  double aliceSeconds = 0, bobSeconds = 0;
};

double gpuSecondsOf(const GpupoolServer& server, const std::string& tenant) {
  return tenantIn(queryStatus(server.endpoint()), tenant).at("gpu_seconds").get<double>();
}

// Starts both tenants' spinners, waits until both are warm, then lets them compete for the window.
Counts compete(const GpupoolServer& server) {
  ChildProcess alice({poolClientPath(),
                      {"spin", kWindowMs, kIterations, kBatch},
                      tenantEnvironment(server.endpoint(), "a"),
                      {}});
  ChildProcess bob({poolClientPath(),
                    {"spin", kWindowMs, kIterations, kBatch},
                    tenantEnvironment(server.endpoint(), "b"),
                    {}});
  EXPECT_TRUE(alice.waitForStdout("READY", seconds(60))) << alice.finish(seconds(1)).describe();
  EXPECT_TRUE(bob.waitForStdout("READY", seconds(60))) << bob.finish(seconds(1)).describe();
  const double aliceBefore = gpuSecondsOf(server, "alice");
  const double bobBefore = gpuSecondsOf(server, "bob");
  alice.writeStdin("go\n");
  bob.writeStdin("go\n");
  // Kernel time is read when both windows have ended, before the queues drain: the drain's tail
  // (a tenant's last kernels running alone) would pull the share toward 1:1, the more so the
  // fewer kernels a window holds (a sanitizer build on a loaded machine: 1.47 for weights 2:1).
  EXPECT_TRUE(alice.waitForStdout("WINDOW_END", seconds(60)));
  EXPECT_TRUE(bob.waitForStdout("WINDOW_END", seconds(60)));
  const double aliceSeconds = gpuSecondsOf(server, "alice") - aliceBefore;
  const double bobSeconds = gpuSecondsOf(server, "bob") - bobBefore;
  ProgramResult a = alice.finish(seconds(60)), b = bob.finish(seconds(60));
  EXPECT_TRUE(a.passed()) << a.describe();
  EXPECT_TRUE(b.passed()) << b.describe();
  return {valueAfter(a.out, "LAUNCHES"), valueAfter(b.out, "LAUNCHES"), aliceSeconds, bobSeconds};
}

std::string config(const std::string& alice, const std::string& bob) {
  return "[scheduler]\nstarvation_ms = 300\n[[device]]\nmemory = \"64MiB\"\n"
         "[[tenant]]\nname = \"alice\"\ntoken = \"a\"\n" +
         alice + "[[tenant]]\nname = \"bob\"\ntoken = \"b\"\n" + bob;
}

TEST(SchedulingTest, WeightsSplitTheDeviceInsideAPriorityClass) {
  ScratchDirectory dir;
  dir.write("pool.toml", config("weight = 2\n", "weight = 1\n"));
  GpupoolServer server(poolServerOptions({"--config", dir.file("pool.toml")}));
  Counts c = compete(server);
  ASSERT_GT(c.bob, 0);
  ASSERT_GT(c.bobSeconds, 0);
  std::ostringstream seen;
  seen << "launches alice " << c.alice << ", bob " << c.bob << "; kernel seconds alice "
       << c.aliceSeconds << ", bob " << c.bobSeconds;
  // 2:1 is the scheduler's aim; on a loaded machine kernels' times stretch unevenly and the share
  // comes out lower (1.46 to 1.76 here with CI's ThreadSanitizer stage running beside it), while
  // equal weights give about 1: the bound separates the two.
  const double ratio = c.aliceSeconds / c.bobSeconds;
  EXPECT_GT(ratio, 1.3) << seen.str();
  EXPECT_LT(ratio, 2.8) << seen.str();
  // The launches follow, looser: their lengths vary with the machine's load.
  EXPECT_GT(double(c.alice) / double(c.bob), 1.2) << seen.str();
  std::cout << "weights 2:1 -> " << seen.str() << "\n";
}

TEST(SchedulingTest, HighPriorityOvertakesLowAndLowIsNotStarved) {
  ScratchDirectory dir;
  dir.write("pool.toml", config("priority = \"high\"\n", "priority = \"low\"\nweight = 10\n"));
  GpupoolServer server(poolServerOptions({"--config", dir.file("pool.toml")}));
  Counts c = compete(server);
  std::cout << "high vs low -> launches alice " << c.alice << ", bob " << c.bob << "\n";
  // Without priorities bob (weight 10) would get ten times alice's share; with them alice gets
  // most of the device (hundreds to a handful on an idle machine; the margin is for loaded ones).
  EXPECT_GT(c.alice, 2 * c.bob) << "alice " << c.alice << ", bob " << c.bob;
  EXPECT_GE(c.bob, 4) << "low priority work starved beyond the bound";
  // The wait is recorded per tenant: bob's kernels queued far longer than alice's.
  nlohmann::json status = queryStatus(server.endpoint());
  double bobWait = tenantIn(status, "bob").at("queue_seconds").get<double>();
  double aliceWait = tenantIn(status, "alice").at("queue_seconds").get<double>();
  EXPECT_GT(bobWait, 0.3) << status.dump(2);
  EXPECT_GT(bobWait / std::max<long long>(1, c.bob), aliceWait / std::max<long long>(1, c.alice))
      << status.dump(2);
}

}  // namespace
}  // namespace gpupool::pooltest
