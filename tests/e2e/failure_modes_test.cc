// What a CUDA program sees when there is no server, or when the server dies under it: a clear
// error and a prompt exit, never a hang.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include "build_paths.h"
#include "child_process.h"
#include "gpupool_server.h"

namespace gpupool::e2e {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;

constexpr char kUnreachable[] = "gpupool: cannot reach GPU_POOL_ENDPOINT=";

// A loopback port nobody listens on: bound, then released.
uint16_t closedPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t length = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length);
  ::close(fd);
  return ntohs(addr.sin_port);
}

TEST(NoServerTest, UnsetEndpointFailsWithAClearMessage) {
  EnvironmentChanges environment = clientEnvironment("");
  environment["GPU_POOL_ENDPOINT"] = std::nullopt;
  ProgramResult result = runProgram(programPath("device_query"), {}, environment, seconds(60));
  EXPECT_FALSE(result.timedOut) << result.describe();
  EXPECT_TRUE(result.exited && result.exitCode != 0) << result.describe();
  EXPECT_NE(result.err.find(kUnreachable), std::string::npos) << result.describe();
}

TEST(NoServerTest, ClosedPortFailsNamingTheEndpoint) {
  std::string endpoint = "tcp://127.0.0.1:" + std::to_string(closedPort());
  ProgramResult result =
      runProgram(programPath("device_query"), {}, clientEnvironment(endpoint), seconds(60));
  EXPECT_FALSE(result.timedOut) << result.describe();
  EXPECT_TRUE(result.exited && result.exitCode != 0) << result.describe();
  EXPECT_NE(result.err.find(std::string(kUnreachable) + endpoint), std::string::npos)
      << result.describe();
}

TEST(NoServerTest, SharedCudartFailsTheSameWay) {
  std::string endpoint = "tcp://127.0.0.1:" + std::to_string(closedPort());
  ProgramResult result =
      runProgram(programPath("device_query_shared"), {}, clientEnvironment(endpoint), seconds(60));
  EXPECT_FALSE(result.timedOut) << result.describe();
  EXPECT_TRUE(result.exited && result.exitCode != 0) << result.describe();
  EXPECT_NE(result.err.find(std::string(kUnreachable) + endpoint), std::string::npos)
      << result.describe();
}

TEST(DeadServerTest, ProgramExitsPromptlyWhenTheServerIsKilled) {
  auto server = std::make_unique<GpupoolServer>();
  ChildProcess program(
      {e2eProgramPath("copy_loop"), {"120"}, clientEnvironment(server->endpoint()), {}});
  ASSERT_TRUE(program.waitForStdout("RUNNING", seconds(60)))
      << program.finish(seconds(1)).describe() << server->log();
  server->signal(SIGKILL);
  auto killed = steady_clock::now();
  ProgramResult result = program.finish(seconds(60));
  auto exitDelay = std::chrono::duration_cast<milliseconds>(steady_clock::now() - killed);
  EXPECT_FALSE(result.timedOut) << "the program hung after the server died\n" << result.describe();
  EXPECT_LT(exitDelay, seconds(10)) << result.describe();
  // It ended through a failed CUDA call, not a crash of the client library.
  EXPECT_TRUE(result.exited && result.exitCode == 1) << result.describe();
  EXPECT_NE(result.err.find("copy_loop: cudaMemcpy"), std::string::npos) << result.describe();
}

}  // namespace
}  // namespace gpupool::e2e
