// `gpupool top` against a real pool server: a CUDA program holding memory shows up on the device
// line, in its tenant's line and as a session; stdout that is not a terminal gets one plain frame;
// a server that is not there is exit code 2 with a message that says what to check.
#include <gtest/gtest.h>

#include <regex>

#include "build_paths.h"
#include "pool_fixture.h"

namespace gpupool::pooltest {
namespace {

using std::chrono::seconds;

ProgramResult runTop(const std::vector<std::string>& args) {
  return e2e::runProgram(e2e::gpupoolCliPath(), args, {{"GPU_POOL_ENDPOINT", std::nullopt}},
                         seconds(30));
}

size_t countOf(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(TopTest, ShowsTheMemoryAndSessionOfAProgramHoldingMemory) {
  ScratchDirectory dir;
  dir.write("pool.toml",
            "[[device]]\nmemory = \"128MiB\"\n"
            "[[tenant]]\nname = \"alice\"\ntoken = \"a\"\nmemory_quota = \"64MiB\"\n");
  GpupoolServer server(poolServerOptions({"--config", dir.file("pool.toml")}));
  ChildProcess holder(
      {poolClientPath(), {"hold", "16"}, tenantEnvironment(server.endpoint(), "a"), {}});
  ASSERT_TRUE(holder.waitForStdout("READY", seconds(60))) << holder.finish(seconds(1)).describe();

  ProgramResult top = runTop({"top", "--once", "--endpoint", server.endpoint()});
  ASSERT_TRUE(top.passed()) << top.describe();
  // Device 0: 16 MiB of 128 MiB used, one session.
  EXPECT_TRUE(std::regex_search(top.out, std::regex(R"(\n0 +16\.0 MiB / 128\.0 MiB +\d+% +1 +)")))
      << top.out;
  // The tenant's memory against its quota, and the session with its tenant.
  EXPECT_TRUE(std::regex_search(top.out, std::regex(R"(\nalice +16\.0 MiB / 64\.0 MiB +normal)")))
      << top.out;
  EXPECT_TRUE(std::regex_search(top.out, std::regex(R"(\n\d+ +.* alice +16\.0 MiB )"))) << top.out;
  EXPECT_EQ(top.out.find("\x1b["), std::string::npos) << "no screen control in --once output";

  holder.closeStdin();
  EXPECT_TRUE(holder.finish(seconds(30)).passed());
  ProgramResult after = runTop({"top", "--once", "--endpoint", server.endpoint()});
  EXPECT_TRUE(std::regex_search(after.out, std::regex(R"(\n0 +0 B / 128\.0 MiB +\d+% +0 +)")))
      << after.out;
}

TEST(TopTest, StdoutThatIsNotATerminalGetsPlainFramesAndAnEnd) {
  GpupoolServer server(poolServerOptions({"--memory", "64MiB"}));
  // No --once: stdout is a pipe here, so one frame and exit.
  ProgramResult one = runTop({"top", "--endpoint", server.endpoint()});
  ASSERT_TRUE(one.passed()) << one.describe();
  EXPECT_EQ(countOf(one.out, "gpupool top  " + server.endpoint()), 1u) << one.out;
  EXPECT_EQ(one.out.find("\x1b["), std::string::npos) << one.out;

  ProgramResult three =
      runTop({"top", "--iterations", "3", "--interval", "0.1", "--endpoint", server.endpoint()});
  ASSERT_TRUE(three.passed()) << three.describe();
  EXPECT_EQ(countOf(three.out, "gpupool top  " + server.endpoint()), 3u) << three.out;
}

TEST(TopTest, AServerThatIsNotThereIsExitCodeTwoWithWhatToCheck) {
  ProgramResult top = runTop({"top", "--once", "--endpoint", "tcp://127.0.0.1:1"});
  EXPECT_EQ(top.exitCode, 2) << top.describe();
  EXPECT_NE(top.err.find("gpupool: cannot reach tcp://127.0.0.1:1: "), std::string::npos)
      << top.describe();
  EXPECT_NE(top.err.find("is gpupoold running there?"), std::string::npos) << top.describe();
  EXPECT_TRUE(top.out.empty()) << top.out;

  ProgramResult noEndpoint = runTop({"top", "--once"});
  EXPECT_EQ(noEndpoint.exitCode, 2) << noEndpoint.describe();
  EXPECT_NE(noEndpoint.err.find("pass --endpoint or set GPU_POOL_ENDPOINT"), std::string::npos);
}

}  // namespace
}  // namespace gpupool::pooltest
