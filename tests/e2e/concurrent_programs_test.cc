// The programs that test threads and streams working at the same time (issue 22;
// tests/programs/concurrent_*.cu and stream_*.cu): one thread's calls go on while another waits,
// a copy on one stream reaches a kernel spinning on another, sixteen threads with a stream each,
// overlap measured with events, and CUDA's ordering between streams. Each runs against a direct
// emu server and through the cuda backend chained to one; each checks itself, with deadlines of
// its own, so that a driver that serializes them fails in seconds instead of hanging.
#include <gtest/gtest.h>

#include "build_paths.h"
#include "child_process.h"
#include "gpupool_server.h"
#include "test_programs.h"

namespace gpupool::e2e {
namespace {

using std::chrono::seconds;

// The programs take seconds; their own deadlines (10 s per wait) end them first.
constexpr seconds kProgramDeadline{60};

class ConcurrentProgramTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ConcurrentProgramTest, OnEmu) {
  GpupoolServer server;
  ProgramResult result = runProgram(programPath(GetParam()), {},
                                    clientEnvironment(server.endpoint()), kProgramDeadline);
  ASSERT_TRUE(result.passed()) << result.describe();
  EXPECT_NE(result.out.find("PASS"), std::string::npos) << result.describe();
}

TEST_P(ConcurrentProgramTest, ThroughChainedCudaBackend) {
  ChainedServers servers = startChainedServers();
  ProgramResult result = runProgram(programPath(GetParam()), {},
                                    clientEnvironment(servers.cuda->endpoint()), kProgramDeadline);
  ASSERT_TRUE(result.passed()) << result.describe();
  EXPECT_NE(result.out.find("PASS"), std::string::npos) << result.describe();
}

INSTANTIATE_TEST_SUITE_P(Concurrency, ConcurrentProgramTest,
                         ::testing::ValuesIn(concurrencyProgramNames()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gpupool::e2e
