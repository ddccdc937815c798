// Load: many client processes (nvcc-built, on our libcuda.so.1) each doing mixed calls and copies
// with verification against one gpupoold. All must pass, and the server's device memory must be
// back to 0 afterwards; the server's RSS before and after is reported.
//
// GPUPOOL_LOAD_CLIENTS (default 64) and GPUPOOL_LOAD_ROUNDS (default 170: 2,040 calls per client,
// the size CI runs; the sanitizer stages use 40, the documented full run 500) size it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "build_paths.h"
#include "child_process.h"
#include "environment_knob.h"
#include "gpupool_server.h"
#include "wire_client.h"

namespace gpupool::hardening {
namespace {

using std::chrono::seconds;

using gpupool::test_knobs::envUnsigned;

// VmRSS of `pid` in KiB.
long rssKiB(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  long value = -1;
  while (status >> key) {
    if (key == "VmRSS:") {
      status >> value;
      break;
    }
  }
  return value;
}

TEST(LoadTest, ManyClientsFinishCorrectlyAndMemoryReturnsToZero) {
  std::string program = e2e::e2eProgramPath("mixed_load");
  if (!std::filesystem::exists(program)) GTEST_SKIP() << program << " not built";
  if (!std::filesystem::exists(e2e::libcudaPath())) GTEST_SKIP() << "libcuda.so.1 not built";
  unsigned clients = envUnsigned("GPUPOOL_LOAD_CLIENTS", 64);
  unsigned rounds = envUnsigned("GPUPOOL_LOAD_ROUNDS", 170);
  e2e::GpupoolServer server;
  // Find the server's pid through the port it printed (GpupoolServer keeps its pid private).
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  pid_t pid = -1;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::ifstream cmdline(entry.path() / "cmdline");
    std::string text((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
    if (text.find(e2e::gpupooldPath()) == 0) {
      // Several servers may run (other tests): the one whose log we own has our port open; the
      // newest one is ours in a serial test run.
      pid = std::max(pid, static_cast<pid_t>(std::stol(entry.path().filename())));
    }
  }
  long rssBefore = pid > 0 ? rssKiB(pid) : -1;

  auto started = std::chrono::steady_clock::now();
  std::vector<std::unique_ptr<e2e::ChildProcess>> running;
  for (unsigned i = 0; i < clients; ++i) {
    running.push_back(std::make_unique<e2e::ChildProcess>(
        e2e::ChildProcess::Options{program,
                                   {std::to_string(rounds), std::to_string(i + 1)},
                                   e2e::clientEnvironment(server.endpoint()),
                                   std::nullopt}));
  }
  unsigned passed = 0;
  for (auto& p : running) {
    auto result = p->finish(seconds(900));
    EXPECT_TRUE(result.passed()) << result.describe();
    if (result.passed()) ++passed;
  }
  double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_EQ(passed, clients);

  WireClient monitor(server.endpoint(), wire::Hello::Purpose::STATUS);
  uint64_t used = 0;
  for (int i = 0; i < 100; ++i) {  // sessions end asynchronously after their clients exit
    used = monitor.serverMemoryUsed();
    if (used == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(used, 0u) << "device memory still in use after every client exited";
  long rssAfter = pid > 0 ? rssKiB(pid) : -1;
  std::printf(
      "load: %u clients x %u rounds (%u calls each): %u passed in %.1f s; gpupoold RSS "
      "%ld KiB before, %ld KiB after; device memory in use after: %llu\n",
      clients, rounds, rounds * 12, passed, elapsed, rssBefore, rssAfter,
      static_cast<unsigned long long>(used));
  RecordProperty("gpupoold_rss_before_kib", std::to_string(rssBefore));
  RecordProperty("gpupoold_rss_after_kib", std::to_string(rssAfter));
}

}  // namespace
}  // namespace gpupool::hardening
