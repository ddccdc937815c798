// Bad input from users: each mistake gets one clear message that says what is wrong.
#include <gtest/gtest.h>

#include <cstring>
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

// A client that asks the emu device for thread-block clusters (our libcuda refuses before asking,
// since the device reports CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH 0) gets the reason, and the same
// kernel then runs without one.
TEST(BadInputTest, ClusterLaunchOnTheEmuDeviceIsRefusedWithTheReason) {
  e2e::GpupoolServer server;
  WireClient client(server.endpoint());
  auto ctx = client.createContext().handle;
  auto module = client.loadPtx(ctx, R"(
.version 7.0
.target sm_50
.address_size 64
.visible .entry mark(.param .u64 out)
{
  .reg .b32 %r<2>;
  .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, 7;
  st.global.u32 [%rd1], %r1;
  ret;
}
)");
  ASSERT_EQ(module.result, CUDA_SUCCESS) << module.message;
  auto function = client.function(ctx, module.handle, "mark");
  ASSERT_EQ(function.result, CUDA_SUCCESS) << function.message;
  auto out = client.alloc(ctx, 4).handle;
  std::vector<uint8_t> params(8);
  std::memcpy(params.data(), &out, 8);
  auto refused = client.launch(ctx, function.handle, params, 0, 2);
  EXPECT_EQ(refused.result, CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_NE(refused.message.find("CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH 0"), std::string::npos)
      << refused.message;
  ASSERT_EQ(client.launch(ctx, function.handle, params).result, CUDA_SUCCESS);
  ASSERT_EQ(client.synchronize(ctx).result, CUDA_SUCCESS);
  auto read = client.read(ctx, out, 4);
  ASSERT_EQ(read.result, CUDA_SUCCESS) << read.message;
  uint32_t value = 0;
  ASSERT_EQ(read.bulk.size(), 4u);
  std::memcpy(&value, read.bulk.data(), 4);
  EXPECT_EQ(value, 7u);
}

// Reads [mapa(shared, 1) + offset] between two cluster barriers: offset 0 is the other CTA's first
// word; beyond its 16 bytes of shared memory, or at a raw address naming rank 5, it is an illegal
// address.
constexpr const char* kPeekPtx = R"(
.version 7.8
.target sm_90
.address_size 64
.shared .align 4 .b8 words[16];
.visible .entry peek(.param .u64 out, .param .u32 offset, .param .u32 raw)
{
  .reg .b32 %a, %p, %o, %v, %raw; .reg .b64 %rd; .reg .pred %useRaw;
  mov.u32 %a, words; mapa.shared::cluster.u32 %p, %a, 1;
  ld.param.u32 %o, [offset]; add.u32 %p, %p, %o;
  ld.param.u32 %raw, [raw]; setp.ne.u32 %useRaw, %raw, 0; @%useRaw mov.u32 %p, %raw;
  barrier.cluster.arrive; barrier.cluster.wait;
  ld.shared::cluster.u32 %v, [%p];
  barrier.cluster.arrive; barrier.cluster.wait;
  ld.param.u64 %rd, [out]; st.global.u32 [%rd], %v;
  ret;
}
)";

// At compute capability 9.0 the emu device runs clusters; a client that asks for shapes the
// device does not allow, or whose kernel reaches past another CTA's shared memory or names a
// CTA outside its cluster, gets the error and the reason, and the server goes on serving.
TEST(BadInputTest, ClusterShapesAndDistributedSharedMemoryOutOfBoundsAreRefused) {
  e2e::ServerOptions options;
  options.extraArgs = {"--compute-capability", "90"};
  e2e::GpupoolServer server(options);
  WireClient client(server.endpoint());
  auto ctx = client.createContext().handle;
  auto module = client.loadPtx(ctx, kPeekPtx);
  ASSERT_EQ(module.result, CUDA_SUCCESS) << module.message;
  auto function = client.function(ctx, module.handle, "peek");
  ASSERT_EQ(function.result, CUDA_SUCCESS) << function.message;
  auto out = client.alloc(ctx, 4).handle;
  auto paramsFor = [&](uint32_t offset, uint32_t raw) {
    std::vector<uint8_t> params(16);
    std::memcpy(params.data(), &out, 8);
    std::memcpy(params.data() + 8, &offset, 4);
    std::memcpy(params.data() + 12, &raw, 4);
    return params;
  };
  auto tooLarge = client.launch(ctx, function.handle, paramsFor(0, 0), 0, 32);
  EXPECT_EQ(tooLarge.result, CUDA_ERROR_INVALID_CLUSTER_SIZE);
  EXPECT_NE(tooLarge.message.find("exceeds the limit"), std::string::npos) << tooLarge.message;
  // In bounds: runs.
  ASSERT_EQ(client.launch(ctx, function.handle, paramsFor(0, 0), 0, 2).result, CUDA_SUCCESS);
  ASSERT_EQ(client.synchronize(ctx).result, CUDA_SUCCESS);
  // Past the other CTA's shared memory, and a rank outside the cluster: the launch fails.
  for (auto params : {paramsFor(16, 0), paramsFor(0, 6u << 24)}) {
    WireClient fresh(server.endpoint());
    auto c = fresh.createContext().handle;
    auto m = fresh.loadPtx(c, kPeekPtx);
    ASSERT_EQ(m.result, CUDA_SUCCESS) << m.message;
    auto f = fresh.function(c, m.handle, "peek");
    auto o = fresh.alloc(c, 4).handle;
    std::memcpy(params.data(), &o, 8);
    ASSERT_EQ(fresh.launch(c, f.handle, params, 0, 2).result, CUDA_SUCCESS);
    auto failed = fresh.synchronize(c);
    EXPECT_EQ(failed.result, CUDA_ERROR_ILLEGAL_ADDRESS) << failed.message;
    EXPECT_NE(failed.message.find("shared access"), std::string::npos) << failed.message;
  }
  // The server still serves.
  WireClient after(server.endpoint());
  EXPECT_EQ(after.createContext().result, CUDA_SUCCESS);
}

}  // namespace
}  // namespace gpupool::hardening
