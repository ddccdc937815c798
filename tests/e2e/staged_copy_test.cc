// Large copies on the cuda backend, which moves them through pinned staging buffers chunk by chunk
// (server/staged_copy.h), run here chained to an emu server: sizes around the chunk boundaries
// round-trip exactly in order with kernels on streams, and a copy with a bad device range is
// refused whole, writes nothing, and leaves the session serving.
#include <capnp/message.h>
#include <cuda.h>
#include <gtest/gtest.h>

#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "build_paths.h"
#include "child_process.h"
#include "gpupool_server.h"
#include "protocol/message_codec.h"
#include "scratch_directory.h"
#include "server/backend.h"
#include "transport/tcp_transport.h"

namespace gpupool::e2e {
namespace {

using std::chrono::seconds;
constexpr uint64_t kChunk = server::BackendContext::kStagingBytes;

TEST(StagedCopyTest, SizesAroundChunkBoundariesRoundTripWithKernelsOnStreams) {
  ChainedServers servers = startChainedServers();
  ProgramResult result = runProgram(e2eProgramPath("staged_copies"), {std::to_string(kChunk)},
                                    clientEnvironment(servers.cuda->endpoint()), seconds(400));
  ASSERT_TRUE(result.passed()) << result.describe();
  EXPECT_NE(result.out.find("PASS"), std::string::npos) << result.describe();
}

// The same over tls://: device-to-host replies are streamed chunk by chunk through the TLS
// transport's framing as well.
TEST(StagedCopyTest, RoundTripsOverTls) {
  ScratchDirectory dir;
  ASSERT_TRUE(makeSelfSignedCertificate(dir, "server"));
  std::string cert = dir.file("server.pem"), key = dir.file("server.key");
  ServerOptions tls;
  tls.listen = "tls://127.0.0.1:0";
  tls.extraArgs = {"--tls-cert", cert, "--tls-key", key};
  ChainedServers servers = startChainedServers(tls);
  ASSERT_EQ(servers.cuda->endpoint().rfind("tls://", 0), 0u) << servers.cuda->endpoint();
  EnvironmentChanges environment = clientEnvironment(servers.cuda->endpoint());
  environment["GPU_POOL_TLS_CA"] = cert;
  ProgramResult result = runProgram(e2eProgramPath("staged_copies"), {std::to_string(kChunk)},
                                    environment, seconds(400));
  EXPECT_TRUE(result.passed()) << result.describe();
  EXPECT_NE(result.out.find("PASS"), std::string::npos) << result.describe();
}

// Speaks the protocol directly, so requests reach the server exactly as written (our libcuda
// would refuse a bad range itself before sending anything).
class RawDriverSession {
 public:
  explicit RawDriverSession(const std::string& url) {
    std::string error;
    auto endpoint = transport::parseEndpoint(url, &error);
    if (!endpoint) throw std::runtime_error(error);
    connection_ = transport::tcpConnect(*endpoint, 5000);
    connection_->setReceiveTimeoutMs(60000);  // a server that stops answering fails the test
    capnp::MallocMessageBuilder hello;
    auto h = hello.initRoot<wire::Request>().initHello();
    h.setProtocolVersion(wire::PROTOCOL_VERSION);
    h.setPurpose(wire::Hello::Purpose::DRIVER);
    h.setClientName("staged_copy_test");
    expectOk(call(hello), "Hello");
    capnp::MallocMessageBuilder create;
    create.initRoot<wire::Request>().initCtxCreate().setDevice(0);
    context_ = expectOk(call(create), "ctxCreate").handle;
  }

  struct Reply {
    CUresult result = CUDA_SUCCESS;
    std::string message;
    uint64_t handle = 0, address = 0;
    std::vector<uint8_t> bulk;
  };

  uint64_t alloc(uint64_t bytes) {
    capnp::MallocMessageBuilder m;
    auto a = m.initRoot<wire::Request>().initMemAlloc();
    a.setContext(context_);
    a.setBytes(bytes);
    return expectOk(call(m), "memAlloc").address;
  }

  Reply write(uint64_t dst, const std::vector<uint8_t>& bytes) {
    capnp::MallocMessageBuilder m;
    auto c = m.initRoot<wire::Request>().initMemcpyHtoD();
    c.setContext(context_);
    c.setDst(dst);
    c.setBytes(bytes.size());
    return call(m, bytes);
  }

  Reply read(uint64_t src, uint64_t bytes) {
    capnp::MallocMessageBuilder m;
    auto c = m.initRoot<wire::Request>().initMemcpyDtoH();
    c.setContext(context_);
    c.setSrc(src);
    c.setBytes(bytes);
    return call(m);
  }

  static Reply expectOk(Reply reply, const char* what) {
    EXPECT_EQ(reply.result, CUDA_SUCCESS) << what << ": " << reply.message;
    return reply;
  }

 private:
  Reply call(capnp::MessageBuilder& request, const std::vector<uint8_t>& bulk = {}) {
    transport::ConstBuffer part{bulk.data(), bulk.size()};
    protocol::sendMessage(*connection_, request,
                          bulk.empty() ? std::span<const transport::ConstBuffer>()
                                       : std::span<const transport::ConstBuffer>(&part, 1));
    protocol::IncomingMessage in(*connection_);
    auto r = in.root<wire::Response>();
    Reply reply;
    reply.result = static_cast<CUresult>(r.getResult());
    reply.message = r.getMessage().cStr();
    if (r.which() == wire::Response::HANDLE) reply.handle = r.getHandle();
    if (r.which() == wire::Response::MEM_ALLOC) reply.address = r.getMemAlloc().getAddress();
    reply.bulk.resize(in.bulkBytes());
    connection_->receiveBulk(reply.bulk.data(), reply.bulk.size());
    return reply;
  }

  std::unique_ptr<transport::Connection> connection_;
  uint64_t context_ = 0;
};

std::vector<uint8_t> pattern(uint64_t bytes, uint8_t seed) {
  std::vector<uint8_t> v(bytes);
  // Mixed, so that no two chunks (or chunk-sized shifts) of the pattern are alike.
  for (uint64_t i = 0; i < bytes; ++i) {
    uint64_t x = (i + seed) * 0x9E3779B97F4A7C15ull;
    v[i] = static_cast<uint8_t>((x ^ (x >> 29)) >> 32);
  }
  return v;
}

TEST(StagedCopyTest, BadRangeIsRefusedWholeAndTheSessionGoesOn) {
  ChainedServers servers = startChainedServers();
  RawDriverSession session(servers.cuda->endpoint());
  const uint64_t size = 3 * kChunk;
  uint64_t base = session.alloc(size);
  std::vector<uint8_t> original = pattern(size, 1);
  RawDriverSession::expectOk(session.write(base, original), "initial write");

  // Starts one chunk in and runs one byte past the allocation: the first two chunks would fit.
  std::vector<uint8_t> overflowing = pattern(2 * kChunk + 1, 2);
  auto refused = session.write(base + kChunk, overflowing);
  EXPECT_EQ(refused.result, CUDA_ERROR_INVALID_VALUE) << refused.message;
  auto refusedRead = session.read(base + kChunk + 7, 2 * kChunk);
  EXPECT_EQ(refusedRead.result, CUDA_ERROR_INVALID_VALUE) << refusedRead.message;
  EXPECT_TRUE(refusedRead.bulk.empty());
  auto unknown = session.read(base + (uint64_t{1} << 40), 16);
  EXPECT_EQ(unknown.result, CUDA_ERROR_INVALID_VALUE) << unknown.message;

  // Nothing of the refused copy landed, and later copies on the same session work.
  auto after = RawDriverSession::expectOk(session.read(base, size), "read after refusal");
  EXPECT_TRUE(after.bulk == original) << "the refused copy changed device memory";
  std::vector<uint8_t> odd = pattern(kChunk * 5 / 2 + 3, 3);
  RawDriverSession::expectOk(session.write(base + 5, odd), "write after refusal");
  auto back = RawDriverSession::expectOk(session.read(base + 5, odd.size()), "read back");
  EXPECT_TRUE(back.bulk == odd) << "an odd-offset copy did not round-trip";
}

}  // namespace
}  // namespace gpupool::e2e
