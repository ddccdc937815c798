// Every input a fuzzer ever failed on (tests/hardening/reproducers/<target>/) is replayed through
// the same code the fuzzer ran, in a child process with a deadline, so a crash or a hang that
// comes back fails here without needing clang or libFuzzer.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <thread>
#include <vector>

#include "fuzz/fuzz_inputs.h"
#include "server/backends/emu/ptx/ptx_module.h"

namespace gpupool::hardening {
namespace {

namespace fs = std::filesystem;

std::vector<uint8_t> readFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Runs consume(bytes) in a child; returns "" when it finished in time, else how it failed.
std::string replayIsolated(const std::function<void(std::span<const uint8_t>)>& consume,
                           const std::vector<uint8_t>& bytes, std::chrono::seconds deadline) {
  pid_t pid = fork();
  if (pid < 0) return "fork failed";
  if (pid == 0) {
    consume(bytes);
    _exit(0);
  }
  auto until = std::chrono::steady_clock::now() + deadline;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > until) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return "did not finish within " + std::to_string(deadline.count()) + " s";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  if (WEXITSTATUS(status) != 0) return "exited with " + std::to_string(WEXITSTATUS(status));
  return "";
}

void replayAll(const std::string& target,
               const std::function<void(std::span<const uint8_t>)>& consume) {
  fs::path dir = fs::path(REPRODUCERS_DIR) / target;
  if (!fs::exists(dir)) GTEST_SKIP() << "no reproducers for " << target;
  int replayed = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    auto bytes = readFile(entry.path());
    EXPECT_EQ(replayIsolated(consume, bytes, std::chrono::seconds(20)), "") << entry.path();
    ++replayed;
  }
  if (replayed == 0) GTEST_SKIP() << "no reproducers for " << target;
}

TEST(ReproducerReplayTest, Ptx) { replayAll("ptx", fuzz::consumePtx); }
TEST(ReproducerReplayTest, Image) { replayAll("fatbin", fuzz::consumeImage); }
TEST(ReproducerReplayTest, ClientReply) { replayAll("client_reply", fuzz::consumeClientReply); }
TEST(ReproducerReplayTest, ServerSession) {
  replayAll("server_session", fuzz::consumeServerSession);
}
TEST(ReproducerReplayTest, ShmRing) { replayAll("shm_ring", fuzz::consumeShmRing); }

// The shm ring target's committed seeds (a hostile client's scripts: heads and tails outside the
// ring, scribbled words, a client gone mid-frame, round and round a 4 KiB ring) run here too,
// so they run where clang and libFuzzer do not: each must end, without tripping an invariant.
TEST(ReproducerReplayTest, ShmRingSeeds) {
  int replayed = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(FUZZ_CORPUS_DIR) / "shm_ring")) {
    auto bytes = readFile(entry.path());
    EXPECT_EQ(replayIsolated(fuzz::consumeShmRing, bytes, std::chrono::seconds(20)), "")
        << entry.path();
    ++replayed;
  }
  EXPECT_GE(replayed, 5);
}

// The PTX the fuzzer found (a section cut off by a stray character) used to spin forever; now it
// must be refused with a message that names the line.
TEST(ReproducerReplayTest, TruncatedPtxIsRefusedWithAReason) {
  auto bytes = readFile(fs::path(REPRODUCERS_DIR) / "ptx" / "timeout-unterminated-section");
  ASSERT_FALSE(bytes.empty());
  auto module = ptx::Module::load(
      std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  ASSERT_FALSE(module.ok());
  EXPECT_NE(module.status().code, CUDA_SUCCESS);
  EXPECT_NE(module.status().message.find("line "), std::string::npos) << module.status().message;
}

}  // namespace
}  // namespace gpupool::hardening
