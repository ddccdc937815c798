// `gpupool status --json` reflects what clients hold: memory and sessions appear while a program
// runs and are gone once it exits.
#include <gtest/gtest.h>
#include <signal.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "build_paths.h"
#include "child_process.h"
#include "gpupool_server.h"
#include "status_json.h"

namespace gpupool::e2e {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;

constexpr uint64_t kHeldBytes = 64u << 20;

nlohmann::json queryStatus(const GpupoolServer& server) { return statusOf(server.endpoint()); }

uint64_t deviceMemoryUsed(const nlohmann::json& status) {
  return status.at("devices").at(0).at("memory_used").get<uint64_t>();
}

// The status once no session and no memory is left, or after 30 s; empty if the server stopped
// answering. Sessions are torn down after their clients go: the server takes a moment, and under
// ThreadSanitizer on a loaded 2-core machine more than 10 s (a killed client's held stream, seen
// 2026-12-06 with two ctest runs at once; 6 s each when run alone).
nlohmann::json statusOnceIdle(const GpupoolServer& server) {
  nlohmann::json status;
  auto deadline = steady_clock::now() + seconds(30);
  do {
    status = queryStatus(server);
    if (status.empty()) break;
    if (deviceMemoryUsed(status) == 0 && status.at("sessions").empty()) break;
    std::this_thread::sleep_for(milliseconds(100));
  } while (steady_clock::now() < deadline);
  return status;
}

TEST(StatusTest, ShowsHeldMemoryAndSessionsUntilTheProgramExits) {
  GpupoolServer server;
  nlohmann::json idle = queryStatus(server);
  ASSERT_FALSE(idle.empty());
  EXPECT_EQ(idle.at("backend"), "emu");
  EXPECT_EQ(deviceMemoryUsed(idle), 0u) << idle.dump(2);
  EXPECT_TRUE(idle.at("sessions").empty()) << "a status probe is not a session: " << idle.dump(2);

  ChildProcess program(
      {e2eProgramPath("hold_memory"), {}, clientEnvironment(server.endpoint()), {}});
  ASSERT_TRUE(program.waitForStdout("READY", seconds(60))) << program.finish(seconds(1)).describe();

  nlohmann::json busy = queryStatus(server);
  ASSERT_FALSE(busy.empty());
  EXPECT_GE(deviceMemoryUsed(busy), kHeldBytes) << busy.dump(2);
  EXPECT_EQ(busy.at("devices").at(0).at("sessions"), 1) << busy.dump(2);
  ASSERT_EQ(busy.at("sessions").size(), 1u) << busy.dump(2);
  EXPECT_GE(busy.at("sessions").at(0).at("memory_used").get<uint64_t>(), kHeldBytes)
      << busy.dump(2);
  EXPECT_EQ(busy.at("sessions").at(0).at("transport"), "tcp") << busy.dump(2);
  EXPECT_NE(busy.at("sessions").at(0).at("client").get<std::string>().find("hold_memory"),
            std::string::npos)
      << busy.dump(2);

  program.writeStdin("done\n");
  ProgramResult result = program.finish(seconds(60));
  ASSERT_TRUE(result.passed()) << result.describe();

  nlohmann::json after = statusOnceIdle(server);
  ASSERT_FALSE(after.empty());
  EXPECT_EQ(deviceMemoryUsed(after), 0u) << after.dump(2);
  EXPECT_TRUE(after.at("sessions").empty()) << after.dump(2);
  EXPECT_EQ(after.at("devices").at(0).at("sessions"), 0) << after.dump(2);
}

TEST(StatusTest, MemoryIsReleasedWhenAProgramIsKilled) {
  GpupoolServer server;
  ChildProcess program(
      {e2eProgramPath("hold_memory"), {}, clientEnvironment(server.endpoint()), {}});
  ASSERT_TRUE(program.waitForStdout("READY", seconds(60))) << program.finish(seconds(1)).describe();
  nlohmann::json busy = queryStatus(server);
  ASSERT_FALSE(busy.empty());
  EXPECT_GE(deviceMemoryUsed(busy), kHeldBytes) << busy.dump(2);

  program.signal(SIGKILL);
  program.finish(seconds(10));
  nlohmann::json after = statusOnceIdle(server);
  ASSERT_FALSE(after.empty());
  EXPECT_EQ(deviceMemoryUsed(after), 0u) << after.dump(2);
  EXPECT_TRUE(after.at("sessions").empty()) << after.dump(2);
}

// A client killed while one of its streams waits at a host function's gate: the session ends, its
// memory is released, and the server goes on serving (teardown releases the gate).
TEST(StatusTest, AStreamHeldByAHostFunctionIsReleasedWhenTheProgramIsKilled) {
  GpupoolServer server;
  ChildProcess program(
      {e2eProgramPath("hold_host_func"), {}, clientEnvironment(server.endpoint()), {}});
  ASSERT_TRUE(program.waitForStdout("READY", seconds(60))) << program.finish(seconds(1)).describe();
  nlohmann::json busy = queryStatus(server);
  ASSERT_FALSE(busy.empty());
  EXPECT_GE(deviceMemoryUsed(busy), kHeldBytes) << busy.dump(2);

  program.signal(SIGKILL);
  program.finish(seconds(10));
  nlohmann::json after = statusOnceIdle(server);
  ASSERT_FALSE(after.empty()) << "the server stopped answering";
  EXPECT_EQ(deviceMemoryUsed(after), 0u) << after.dump(2);
  EXPECT_TRUE(after.at("sessions").empty()) << after.dump(2);
}

// A client killed while the server waits, for it, on a stream held by a stream wait nothing meets
// (the cuda backend, chained: the wait is its driver's): the session ends, its memory is
// released, and the server goes on serving. The backend's cancel meets the wait.
TEST(StatusTest, AStreamHeldByAStreamWaitIsReleasedWhenTheProgramIsKilled) {
  ChainedServers servers = startChainedServers();
  const GpupoolServer& server = *servers.cuda;
  ChildProcess program(
      {e2eProgramPath("hold_stream_wait"), {}, clientEnvironment(server.endpoint()), {}});
  ASSERT_TRUE(program.waitForStdout("READY", seconds(60))) << program.finish(seconds(1)).describe();
  std::this_thread::sleep_for(milliseconds(500));  // the synchronization reaches the server
  nlohmann::json busy = queryStatus(server);
  ASSERT_FALSE(busy.empty());
  EXPECT_GE(deviceMemoryUsed(busy), kHeldBytes) << busy.dump(2);

  program.signal(SIGKILL);
  program.finish(seconds(10));
  nlohmann::json after = statusOnceIdle(server);
  ASSERT_FALSE(after.empty()) << "the server stopped answering";
  EXPECT_EQ(deviceMemoryUsed(after), 0u) << after.dump(2);
  EXPECT_TRUE(after.at("sessions").empty()) << after.dump(2);
}

}  // namespace
}  // namespace gpupool::e2e
