// Every CUDA test program, in both cudart flavours, against a direct emu server; and the
// properties that must not depend on the flavour or on other clients.
#include <gtest/gtest.h>

#include <sstream>

#include "build_paths.h"
#include "child_process.h"
#include "gpupool_server.h"
#include "test_programs.h"

namespace gpupool::e2e {
namespace {

using std::chrono::seconds;

bool hasLine(const std::string& text, const std::string& line) {
  std::istringstream lines(text);
  for (std::string l; std::getline(lines, l);) {
    if (l == line) return true;
  }
  return false;
}

class ProgramTest : public ::testing::TestWithParam<ProgramFlavour> {};

TEST_P(ProgramTest, Runs) {
  GpupoolServer server;
  ProgramResult result = runProgram(programPath(GetParam().binary()), {},
                                    clientEnvironment(server.endpoint()), seconds(240));
  ASSERT_TRUE(result.passed()) << result.describe();
  EXPECT_TRUE(hasLine(result.out, "PASS")) << result.describe();
  // The calls went through this server, not some other driver on the machine.
  EXPECT_NE(server.log().find("gpupoold: session "), std::string::npos) << server.log();
}

INSTANTIATE_TEST_SUITE_P(Programs, ProgramTest, ::testing::ValuesIn(allProgramFlavours()),
                         [](const auto& info) { return info.param.testName(); });

// The emu device at compute capability 9.0 runs thread-block clusters: the driver-API program
// takes its cluster branch (launches, occupancy, a clustered kernel node) in both flavours.
TEST(Sm90ProgramTest, ClusterLaunchDriverRunsClusters) {
  ServerOptions options;
  options.extraArgs = {"--compute-capability", "90"};
  GpupoolServer server(options);
  for (const char* program : {"cluster_launch_driver", "cluster_launch_driver_shared"}) {
    ProgramResult result =
        runProgram(programPath(program), {}, clientEnvironment(server.endpoint()), seconds(240));
    ASSERT_TRUE(result.passed()) << result.describe();
    EXPECT_NE(result.out.find("clusters of 2: every block saw its cluster"), std::string::npos)
        << result.describe();
    EXPECT_NE(result.out.find("a kernel node in clusters of 4: every block saw its cluster"),
              std::string::npos)
        << result.describe();
  }
}

TEST(DeviceQueryTest, StaticAndSharedCudartReportTheSameDevice) {
  GpupoolServer server;
  ProgramResult staticRun =
      runProgram(programPath("device_query"), {}, clientEnvironment(server.endpoint()));
  ProgramResult sharedRun =
      runProgram(programPath("device_query_shared"), {}, clientEnvironment(server.endpoint()));
  ASSERT_TRUE(staticRun.passed()) << staticRun.describe();
  ASSERT_TRUE(sharedRun.passed()) << sharedRun.describe();
  auto staticLines = keyValueLines(staticRun.out);
  EXPECT_TRUE(hasLine(staticRun.out, "device_count=1")) << staticRun.out;
  EXPECT_TRUE(hasLine(staticRun.out, "device0.name=gpupool emu device")) << staticRun.out;
  EXPECT_EQ(staticLines, keyValueLines(sharedRun.out));
}

TEST(ConcurrentClientsTest, TwoProgramsAtOnceBothPass) {
  GpupoolServer server;
  // copy_loop runs for a fixed time, so the two sessions overlap for sure.
  ChildProcess first(
      {e2eProgramPath("copy_loop"), {"4"}, clientEnvironment(server.endpoint()), {}});
  ChildProcess second(
      {e2eProgramPath("copy_loop"), {"4"}, clientEnvironment(server.endpoint()), {}});
  EXPECT_TRUE(first.waitForStdout("RUNNING", seconds(60))) << first.finish(seconds(1)).describe();
  EXPECT_TRUE(second.waitForStdout("RUNNING", seconds(60))) << second.finish(seconds(1)).describe();
  ProgramResult a = first.finish(seconds(120));
  ProgramResult b = second.finish(seconds(120));
  EXPECT_TRUE(a.passed()) << a.describe();
  EXPECT_TRUE(b.passed()) << b.describe();
}

TEST(ConcurrentClientsTest, DifferentProgramsAtOnceBothPass) {
  GpupoolServer server;
  ChildProcess roundtrip(
      {programPath("memory_roundtrip"), {}, clientEnvironment(server.endpoint()), {}});
  ChildProcess memset({programPath("memset_shared"), {}, clientEnvironment(server.endpoint()), {}});
  roundtrip.closeStdin();
  memset.closeStdin();
  ProgramResult a = roundtrip.finish(seconds(120));
  ProgramResult b = memset.finish(seconds(120));
  EXPECT_TRUE(a.passed()) << a.describe();
  EXPECT_TRUE(b.passed()) << b.describe();
}

}  // namespace
}  // namespace gpupool::e2e
