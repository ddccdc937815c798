// The cuda backend driving our own libcuda.so.1, which talks to an emu server: programs must
// behave exactly as they do against the emu server directly.
#include <gtest/gtest.h>

#include <sstream>

#include "build_paths.h"
#include "child_process.h"
#include "gpupool_server.h"
#include "test_programs.h"

namespace gpupool::e2e {
namespace {

using std::chrono::seconds;

class ChainedProgramTest : public ::testing::TestWithParam<ProgramFlavour> {};

TEST_P(ChainedProgramTest, Runs) {
  ChainedServers servers = startChainedServers();
  ProgramResult result = runProgram(programPath(GetParam().binary()), {},
                                    clientEnvironment(servers.cuda->endpoint()), seconds(240));
  ASSERT_TRUE(result.passed()) << result.describe();
  EXPECT_NE(result.out.find("PASS"), std::string::npos) << result.describe();
  // Both hops saw a session: the program's, and the cuda backend's own driver session.
  EXPECT_NE(servers.cuda->log().find("gpupoold: session "), std::string::npos);
  EXPECT_NE(servers.emu->log().find("gpupoold: session "), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Chained, ChainedProgramTest,
                         ::testing::ValuesIn(cudaBackendProgramFlavours()),
                         [](const auto& info) { return info.param.testName(); });

TEST(ChainedDeviceQueryTest, MatchesTheDirectEmuServer) {
  ChainedServers servers = startChainedServers();
  ProgramResult direct =
      runProgram(programPath("device_query"), {}, clientEnvironment(servers.emu->endpoint()));
  ProgramResult chained =
      runProgram(programPath("device_query"), {}, clientEnvironment(servers.cuda->endpoint()));
  ASSERT_TRUE(direct.passed()) << direct.describe();
  ASSERT_TRUE(chained.passed()) << chained.describe();
  auto directLines = keyValueLines(direct.out);
  EXPECT_FALSE(directLines.empty());
  EXPECT_EQ(directLines, keyValueLines(chained.out));
}

}  // namespace
}  // namespace gpupool::e2e
