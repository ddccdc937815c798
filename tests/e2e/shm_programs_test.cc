// The CUDA test programs (tests/programs, built by nvcc, unmodified) over shm:// against a gpupoold
// on the emu backend that listens on TCP and on a Unix socket (--shm-listen): each prints what it
// prints over TCP; the programs of threads and streams at once pass over it. A client killed
// while it holds a session leaves none of its shared memory mapped in gpupoold, and its pinned
// memory is mapped there while it is allocated, as files copies name instead of carrying bytes.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "build_paths.h"
#include "child_process.h"
#include "gpupool_server.h"
#include "http_get.h"
#include "scratch_directory.h"
#include "status_json.h"
#include "test_programs.h"

namespace gpupool::e2e {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;

constexpr auto kProgramTimeout = seconds(400);

// How many distinct memory files named `name` process `pid` maps (by inode).
int distinctMappedFiles(pid_t pid, const std::string& name) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::set<std::string> inodes;
  for (std::string line; std::getline(maps, line);) {
    if (line.find("memfd:" + name + " ") == std::string::npos) continue;
    std::istringstream fields(line);
    std::string range, permissions, offset, device, inode;
    fields >> range >> permissions >> offset >> device >> inode;
    inodes.insert(inode);
  }
  return static_cast<int>(inodes.size());
}

// A gpupoold on tcp://127.0.0.1 that also listens on shm://<scratch>/gpupool.sock.
struct ShmServer {
  ScratchDirectory scratch;
  std::string url = "shm://" + scratch.file("gpupool.sock");
  std::unique_ptr<GpupoolServer> server;

  explicit ShmServer(std::vector<std::string> moreArgs = {}) {
    ServerOptions options;
    options.extraArgs = {"--shm-listen", url};
    options.extraArgs.insert(options.extraArgs.end(), moreArgs.begin(), moreArgs.end());
    server = std::make_unique<GpupoolServer>(options);
  }
  // Sessions that came in over shm: their peer is named by the client's user and pid.
  bool sawShmSession() const { return server->log().find("from local-uid-") != std::string::npos; }
  // The client memory files gpupoold maps, each counted once however often it is mapped (the emu
  // maps pinned memory twice: for copies, and into device addresses): rings (gpupool-shm) or
  // pinned memory (gpupool-pinned).
  int mappedClientFiles(const std::string& name = "gpupool-shm") const {
    return distinctMappedFiles(server->pid(), name);
  }
  // Waits up to 10 s for `n` mappings of pinned memory (a release is posted, so it comes soon
  // after the free, not at once).
  bool awaitPinnedFiles(int n) const {
    auto deadline = steady_clock::now() + seconds(10);
    while (mappedClientFiles("gpupool-pinned") != n) {
      if (steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(milliseconds(20));
    }
    return true;
  }
};

// A program's output without its timing lines (events prints measured milliseconds).
std::string withoutTimings(const std::string& text) {
  std::istringstream lines(text);
  std::string out;
  for (std::string l; std::getline(lines, l);) {
    if (l.find("elapsed") == std::string::npos) out += l + "\n";
  }
  return out;
}

class ShmProgramTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ShmProgramTest, RunsOverShmWithTheSameOutputAsOverTcp) {
  ShmServer shm;
  ProgramResult overShm =
      runProgram(programPath(GetParam()), {}, clientEnvironment(shm.url), kProgramTimeout);
  ASSERT_TRUE(overShm.passed()) << overShm.describe() << shm.server->log();
  EXPECT_TRUE(shm.sawShmSession()) << shm.server->log();

  EnvironmentChanges tcpEnvironment = clientEnvironment(shm.server->endpoint());
  tcpEnvironment["GPU_POOL_TRANSPORT"] = "tcp";  // else it moves to shm on its own
  ProgramResult overTcp = runProgram(programPath(GetParam()), {}, tcpEnvironment, kProgramTimeout);
  ASSERT_TRUE(overTcp.passed()) << overTcp.describe();
  EXPECT_EQ(withoutTimings(overShm.out), withoutTimings(overTcp.out));
}

INSTANTIATE_TEST_SUITE_P(Programs, ShmProgramTest, ::testing::ValuesIn(testProgramNames()),
                         [](const auto& info) { return info.param; });

// The programs of threads and streams working at once (issue 22) over shm://: the connection is
// full duplex, so one thread's synchronize does not hold up the others (concurrent_flag_handoff
// never finishes where calls are serialized). Left out, as over RDMA: the two that judge by elapsed
// time, which a shared 2-core machine makes flaky.
std::vector<std::string> shmConcurrencyProgramNames() {
  std::vector<std::string> names;
  for (const auto& name : concurrencyProgramNames()) {
    if (name != "stream_overlap" && name != "concurrent_calls_during_sync") names.push_back(name);
  }
  return names;
}

class ShmConcurrentProgramTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ShmConcurrentProgramTest, RunsOverShmOnEmu) {
  ShmServer shm;
  ProgramResult result =
      runProgram(programPath(GetParam()), {}, clientEnvironment(shm.url), kProgramTimeout);
  ASSERT_TRUE(result.passed()) << result.describe() << shm.server->log();
  EXPECT_NE(result.out.find("PASS"), std::string::npos) << result.describe();
  EXPECT_TRUE(shm.sawShmSession()) << shm.server->log();
}

INSTANTIATE_TEST_SUITE_P(Concurrency, ShmConcurrentProgramTest,
                         ::testing::ValuesIn(shmConcurrencyProgramNames()),
                         [](const auto& info) { return info.param; });

TEST(ShmSessionTest, KilledClientLeavesNothingMappedInTheServer) {
  ShmServer shm;
  ASSERT_EQ(shm.mappedClientFiles(), 0);
  ChildProcess program({e2eProgramPath("hold_memory"), {}, clientEnvironment(shm.url), {}});
  ASSERT_TRUE(program.waitForStdout("READY", seconds(60))) << program.finish(seconds(1)).describe();
  EXPECT_EQ(shm.mappedClientFiles(), 1);
  program.signal(SIGKILL);
  program.finish(seconds(10));
  auto deadline = steady_clock::now() + seconds(10);
  while (shm.mappedClientFiles() != 0 && steady_clock::now() < deadline)
    std::this_thread::sleep_for(milliseconds(50));
  EXPECT_EQ(shm.mappedClientFiles(), 0) << shm.server->log();
  // The server goes on serving shm clients.
  ProgramResult next =
      runProgram(programPath("vector_add"), {}, clientEnvironment(shm.url), kProgramTimeout);
  EXPECT_TRUE(next.passed()) << next.describe() << shm.server->log();
}

// Pinned memory of an shm client lives in memory files gpupoold maps: mapped there from the
// first copy that names it until cuMemFreeHost, and the program's copies (sync, async, at
// offsets, around kernels) are right byte for byte.
TEST(ShmSessionTest, PinnedMemoryIsMappedByTheServerUntilFreed) {
  ShmServer shm;
  ChildProcess program({e2eProgramPath("pinned_files"), {}, clientEnvironment(shm.url), {}});
  ASSERT_TRUE(program.waitForStdout("READY", seconds(120)))
      << program.finish(seconds(1)).describe();
  EXPECT_TRUE(shm.awaitPinnedFiles(2)) << shm.mappedClientFiles("gpupool-pinned");
  program.writeStdin("\n");
  ASSERT_TRUE(program.waitForStdout("FREED", seconds(60))) << program.finish(seconds(1)).describe();
  EXPECT_TRUE(shm.awaitPinnedFiles(1)) << shm.mappedClientFiles("gpupool-pinned");
  program.writeStdin("\n");
  ProgramResult result = program.finish(seconds(60));
  EXPECT_TRUE(result.passed()) << result.describe() << shm.server->log();
  EXPECT_TRUE(shm.awaitPinnedFiles(0)) << shm.mappedClientFiles("gpupool-pinned");
}

// The same program where pinned memory is not shared: over TCP (it travels through the socket),
// and over shm with GPU_POOL_SHM_HOST_FILES=0 (through the rings). Nothing is mapped, the bytes
// are the same.
TEST(ShmSessionTest, PinnedMemoryTravelsWhereItIsNotShared) {
  ShmServer shm;
  EnvironmentChanges overTcp = clientEnvironment(shm.server->endpoint());
  overTcp["GPU_POOL_TRANSPORT"] = "tcp";
  EnvironmentChanges unshared = clientEnvironment(shm.url);
  unshared["GPU_POOL_SHM_HOST_FILES"] = "0";
  for (const auto& environment : {overTcp, unshared}) {
    ChildProcess program({e2eProgramPath("pinned_files"), {}, environment, {}});
    ASSERT_TRUE(program.waitForStdout("READY", seconds(120)))
        << program.finish(seconds(1)).describe();
    EXPECT_EQ(shm.mappedClientFiles("gpupool-pinned"), 0);
    program.writeStdin("\n\n");
    ProgramResult result = program.finish(seconds(60));
    EXPECT_TRUE(result.passed()) << result.describe() << shm.server->log();
  }
}

// The cuda backend (chained onto our libcuda and an emu server) serves the same copies from the
// files it maps: through its staging slots host-to-device, straight into the mapping back.
TEST(ShmSessionTest, PinnedMemoryOnTheCudaBackend) {
  ScratchDirectory scratch;
  std::string url = "shm://" + scratch.file("gpupool.sock");
  ServerOptions cudaOptions;
  cudaOptions.extraArgs = {"--shm-listen", url};
  ChainedServers servers = startChainedServers(cudaOptions);
  ChildProcess program({e2eProgramPath("pinned_files"), {}, clientEnvironment(url), {}});
  ASSERT_TRUE(program.waitForStdout("READY", seconds(240)))
      << program.finish(seconds(1)).describe() << servers.cuda->log();
  EXPECT_EQ(distinctMappedFiles(servers.cuda->pid(), "gpupool-pinned"), 2);
  program.writeStdin("\n\n");
  ProgramResult result = program.finish(seconds(120));
  EXPECT_TRUE(result.passed()) << result.describe() << servers.cuda->log();
}

// Mapped pinned memory (cudaHostAllocMapped) is served over shm by a backend that maps the files
// into device addresses (the emu): zero-copy both ways, one pointer for host and device. Where it
// is not served (over TCP, with GPU_POOL_SHM_HOST_FILES=0, on the cuda backend) the device says
// it cannot map host memory and the allocation fails.
TEST(ShmSessionTest, MappedPinnedMemoryIsServedOnlyWhereTheServerMapsIt) {
  ShmServer shm;
  ProgramResult served =
      runProgram(e2eProgramPath("mapped_pinned"), {}, clientEnvironment(shm.url), kProgramTimeout);
  ASSERT_TRUE(served.passed()) << served.describe() << shm.server->log();
  EXPECT_NE(served.out.find("PASS"), std::string::npos) << served.describe();
  EXPECT_TRUE(shm.awaitPinnedFiles(0)) << shm.mappedClientFiles("gpupool-pinned");

  EnvironmentChanges overTcp = clientEnvironment(shm.server->endpoint());
  overTcp["GPU_POOL_TRANSPORT"] = "tcp";
  EnvironmentChanges unshared = clientEnvironment(shm.url);
  unshared["GPU_POOL_SHM_HOST_FILES"] = "0";
  for (const auto& environment : {overTcp, unshared}) {
    ProgramResult refused =
        runProgram(e2eProgramPath("mapped_pinned"), {}, environment, kProgramTimeout);
    ASSERT_TRUE(refused.passed()) << refused.describe();
    EXPECT_NE(refused.out.find("REFUSED"), std::string::npos) << refused.describe();
  }

  ScratchDirectory scratch;
  std::string url = "shm://" + scratch.file("gpupool.sock");
  ServerOptions cudaOptions;
  cudaOptions.extraArgs = {"--shm-listen", url};
  ChainedServers servers = startChainedServers(cudaOptions);
  ProgramResult onCuda =
      runProgram(e2eProgramPath("mapped_pinned"), {}, clientEnvironment(url), kProgramTimeout);
  ASSERT_TRUE(onCuda.passed()) << onCuda.describe();
  EXPECT_NE(onCuda.out.find("REFUSED"), std::string::npos) << onCuda.describe();
}

// A client killed while the server maps its pinned memory leaves none of it mapped.
TEST(ShmSessionTest, KilledClientsPinnedMemoryIsUnmapped) {
  ShmServer shm;
  ChildProcess program({e2eProgramPath("pinned_files"), {}, clientEnvironment(shm.url), {}});
  ASSERT_TRUE(program.waitForStdout("READY", seconds(120)))
      << program.finish(seconds(1)).describe();
  EXPECT_TRUE(shm.awaitPinnedFiles(2)) << shm.mappedClientFiles("gpupool-pinned");
  program.signal(SIGKILL);
  program.finish(seconds(10));
  EXPECT_TRUE(shm.awaitPinnedFiles(0)) << shm.mappedClientFiles("gpupool-pinned");
}

// The bytes of the shm session's rings in memory, as `gpupool status --json` shows them (-1: no
// shm session).
int64_t ringBytesResident(const ShmServer& shm) {
  for (const auto& session : statusOf(shm.server->endpoint()).value("sessions", nlohmann::json())) {
    if (session.value("transport", "") == "shm")
      return session.at("shm").at("ring_bytes_resident").get<int64_t>();
  }
  return -1;
}

// An idle shm session gives its rings' pages back: after 8 MiB each way filled both 2 MiB rings,
// and a pause of one to two GPU_POOL_SHM_IDLE_RELEASE_MS, the server's status shows a few pages
// where there were megabytes, and the next copies are right again. With 0 the rings stay.
TEST(ShmSessionTest, IdleSessionGivesBackItsRingsPages) {
  ShmServer shm({"--metrics-listen", "127.0.0.1:0"});
  auto metric = [&] {
    std::smatch value;
    const std::string text = httpGet(shm.server->metricsUrl());
    static const std::regex line(R"(\ngpupool_shm_ring_bytes_resident (\d+)\n)");
    return std::regex_search(text, value, line) ? std::stoll(value[1]) : -1;
  };
  constexpr int64_t kFilled = 3 << 20, kGivenBack = 64 << 10;
  for (const char* releaseMs : {"1500", "0"}) {
    SCOPED_TRACE(std::string("GPU_POOL_SHM_IDLE_RELEASE_MS=") + releaseMs);
    EnvironmentChanges environment = clientEnvironment(shm.url);
    environment["GPU_POOL_SHM_IDLE_RELEASE_MS"] = releaseMs;
    ChildProcess program({e2eProgramPath("idle_rings"), {}, environment, {}});
    ASSERT_TRUE(program.waitForStdout("COPIED", seconds(120)))
        << program.finish(seconds(1)).describe();
    const auto copied = steady_clock::now();
    const int64_t busy = ringBytesResident(shm);
    const int64_t busyMetric = metric();
    if (steady_clock::now() - copied < milliseconds(1500)) {
      EXPECT_GE(busy, kFilled) << "status came within the idle period";
      EXPECT_GE(busyMetric, kFilled) << "/metrics came within the idle period";
    }
    int64_t idle = busy;
    // Given back one to two periods after the copies; 0 must keep the rings past two periods of
    // the default (1 s). The long wait leaves room for a loaded machine (sanitizer stages).
    const auto window = std::string(releaseMs) == "0" ? seconds(4) : seconds(12);
    while (steady_clock::now() - copied < window && idle > kGivenBack) {
      std::this_thread::sleep_for(milliseconds(250));
      idle = ringBytesResident(shm);
    }
    if (std::string(releaseMs) == "0") {
      EXPECT_GE(idle, kFilled) << "given back although GPU_POOL_SHM_IDLE_RELEASE_MS=0";
    } else {
      EXPECT_LE(idle, kGivenBack) << "still in memory 12 s after the copies";
      const int64_t idleMetric = metric();
      EXPECT_GE(idleMetric, 0) << "no gpupool_shm_ring_bytes_resident in /metrics";
      EXPECT_LE(idleMetric, kGivenBack) << "/metrics";
    }
    program.writeStdin("\n");
    ProgramResult result = program.finish(seconds(120));
    EXPECT_TRUE(result.passed()) << result.describe() << shm.server->log();
  }
}

// By default a worker spins for a session's next call after each one it served, with the doorbell
// taken back meanwhile (the suite above); with --shm-poll-us 0 every call after the first of a
// turn comes through the doorbell and the event loop, and programs run the same.
TEST(ShmSessionTest, ServesWithoutPolling) {
  ShmServer shm({"--shm-poll-us", "0"});
  for (const char* name : {"vector_add", "graph_capture"}) {
    ProgramResult result =
        runProgram(programPath(name), {}, clientEnvironment(shm.url), kProgramTimeout);
    EXPECT_TRUE(result.passed()) << name << ": " << result.describe() << shm.server->log();
  }
  EXPECT_TRUE(shm.sawShmSession()) << shm.server->log();
}

// A client given the server's tcp:// endpoint on the server's own host moves to shm by itself.
TEST(ShmUpgradeTest, TcpClientOnTheServersHostMovesToShm) {
  ShmServer shm;
  ProgramResult result = runProgram(programPath("vector_add"), {},
                                    clientEnvironment(shm.server->endpoint()), kProgramTimeout);
  ASSERT_TRUE(result.passed()) << result.describe() << shm.server->log();
  EXPECT_TRUE(shm.sawShmSession()) << shm.server->log();
}

TEST(ShmUpgradeTest, GpuPoolTransportTcpKeepsTcp) {
  ShmServer shm;
  EnvironmentChanges environment = clientEnvironment(shm.server->endpoint());
  environment["GPU_POOL_TRANSPORT"] = "tcp";
  ProgramResult result = runProgram(programPath("vector_add"), {}, environment, kProgramTimeout);
  ASSERT_TRUE(result.passed()) << result.describe() << shm.server->log();
  EXPECT_FALSE(shm.sawShmSession()) << shm.server->log();
}

// The advertised path leads to another gpupoold (here: a link to its socket, as a path can in
// another mount namespace): the client sees a different server there and stays on TCP.
TEST(ShmUpgradeTest, AnotherServerBehindThePathIsNotUsed) {
  ShmServer advertising;
  ShmServer other;
  std::string advertisedPath = advertising.url.substr(std::string("shm://").size());
  std::string otherPath = other.url.substr(std::string("shm://").size());
  ASSERT_EQ(std::remove(advertisedPath.c_str()), 0);
  ASSERT_EQ(symlink(otherPath.c_str(), advertisedPath.c_str()), 0);

  EnvironmentChanges environment = clientEnvironment(advertising.server->endpoint());
  environment["GPU_POOL_LOG"] = "1";
  ProgramResult result = runProgram(programPath("vector_add"), {}, environment, kProgramTimeout);
  ASSERT_TRUE(result.passed()) << result.describe() << advertising.server->log();
  EXPECT_FALSE(advertising.sawShmSession()) << advertising.server->log();
  EXPECT_NE(result.err.find("staying on TCP instead of " + advertising.url +
                            ": another server answers there"),
            std::string::npos)
      << result.describe();
}

}  // namespace
}  // namespace gpupool::e2e
