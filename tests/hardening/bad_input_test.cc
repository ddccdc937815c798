// Bad input from users: each mistake gets one clear message that says what is wrong.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "build_paths.h"
#include "child_process.h"
#include "gpupool_server.h"
#include "protocol/sha256.h"
#include "wire_client.h"

namespace gpupool::hardening {
namespace {

using std::chrono::seconds;

// The lines of `text` that are not empty.
size_t lineCount(const std::string& text) {
  size_t n = 0;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) ++n;
    start = end + 1;
  }
  return n;
}

struct BadFlag {
  std::vector<std::string> args;
  std::string mentions;  // what the message must name
};

TEST(BadInputTest, WrongGpupooldFlagsSayWhatIsWrong) {
  std::vector<BadFlag> cases = {
      {{"--max-sessions", "many"}, "--max-sessions"},
      {{"--memory", "12XB"}, "--memory"},
      {{"--listen", "tcp//127.0.0.1:7000"}, "tcp://HOST:PORT"},
      {{"--backend", "gpu"}, "--backend"},
      {{"--no-such-flag"}, "--no-such-flag"},
  };
  for (const auto& c : cases) {
    auto result = e2e::runProgram(e2e::gpupooldPath(), c.args, {}, seconds(30));
    std::string all = result.out + result.err;
    EXPECT_TRUE(result.exited && result.exitCode != 0) << result.describe();
    EXPECT_NE(all.find(c.mentions), std::string::npos) << c.args[0] << ": " << all;
    // One message, not a wall of usage text.
    EXPECT_LE(lineCount(result.err), 3u) << c.args[0] << ": " << result.err;
  }
}

TEST(BadInputTest, MalformedEndpointIsNamedByTheClient) {
  std::string program = e2e::programPath("device_query");
  if (!std::filesystem::exists(program)) GTEST_SKIP() << "test programs not built";
  for (std::string endpoint : {"tcp//127.0.0.1:7000", "tcp://127.0.0.1:notaport", "udp://x:1"}) {
    auto environment = e2e::clientEnvironment(endpoint);
    auto result = e2e::runProgram(program, {}, environment, seconds(60));
    EXPECT_FALSE(result.timedOut) << result.describe();
    EXPECT_TRUE(result.exited && result.exitCode != 0) << result.describe();
    EXPECT_NE(result.err.find("GPU_POOL_ENDPOINT"), std::string::npos) << result.describe();
    EXPECT_NE(result.err.find(endpoint), std::string::npos) << result.describe();
  }
}

std::vector<uint8_t> corpusFile(const std::string& name) {
  std::ifstream in(std::string(FUZZ_CORPUS_DIR) + "/" + name, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(BadInputTest, TruncatedFatbinIsRefusedAsAnInvalidImage) {
  auto fatbin = corpusFile("fatbin/k_mixed.fatbin");
  ASSERT_GT(fatbin.size(), 200u);
  e2e::GpupoolServer server;
  WireClient client(server.endpoint());
  auto ctx = client.createContext().handle;
  for (size_t keep : {fatbin.size() / 2, size_t{40}, size_t{10}}) {
    std::vector<uint8_t> cut(fatbin.begin(), fatbin.begin() + static_cast<long>(keep));
    auto digest = protocol::Sha256::of(cut);
    auto reply = client.call(
        [&](wire::Request::Builder r) {
          auto m = r.initModuleLoad();
          m.setContext(ctx);
          m.setHash(kj::arrayPtr(digest.data(), digest.size()));
          m.setImageBytes(cut.size());
          m.setHasImage(true);
        },
        cut);
    EXPECT_NE(reply.result, CUDA_SUCCESS) << keep;
    EXPECT_FALSE(reply.message.empty()) << keep;
  }
  // The session is still fine.
  EXPECT_EQ(client.alloc(ctx, 64).result, CUDA_SUCCESS);
}

TEST(BadInputTest, UnknownPtxInstructionIsNamedWithItsLine) {
  e2e::GpupoolServer server;
  WireClient client(server.endpoint());
  auto ctx = client.createContext().handle;
  auto reply = client.loadPtx(ctx, R"(
.version 7.0
.target sm_50
.address_size 64
.visible .entry k()
{
  .reg .b32 %r<3>;
  frobnicate.u32 %r1, %r2;
  ret;
}
)");
  EXPECT_TRUE(reply.result == CUDA_ERROR_NOT_SUPPORTED || reply.result == CUDA_ERROR_INVALID_PTX)
      << reply.result;
  EXPECT_NE(reply.message.find("frobnicate"), std::string::npos) << reply.message;
  EXPECT_NE(reply.message.find("line 8"), std::string::npos) << reply.message;
}

}  // namespace
}  // namespace gpupool::hardening
