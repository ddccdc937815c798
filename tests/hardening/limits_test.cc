// Enforced limits (docs/hardening.md): sessions per server, modules per session, message size.
// Each refusal carries a message that names the limit.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <thread>

#include "gpupool_server.h"
#include "transport/tcp_transport.h"
#include "wire_client.h"

namespace gpupool::hardening {
namespace {

constexpr const char* kEmptyKernelPtx = R"(
.version 7.0
.target sm_50
.address_size 64
.visible .entry empty()
{
  ret;
}
)";

TEST(LimitsTest, SessionsBeyondMaxSessionsAreRefusedWithTheReason) {
  e2e::ServerOptions options;
  options.extraArgs = {"--max-sessions", "2"};
  e2e::GpupoolServer server(options);
  auto first = std::make_unique<WireClient>(server.endpoint());
  WireClient second(server.endpoint());
  try {
    WireClient third(server.endpoint());
    FAIL() << "a third session was admitted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("--max-sessions"), std::string::npos) << e.what();
  }
  // Status probes are not sessions: monitoring still works on a full server.
  WireClient monitor(server.endpoint(), wire::Hello::Purpose::STATUS);
  EXPECT_EQ(monitor.serverMemoryUsed(), 0u);
  // A slot frees when a session ends.
  first.reset();
  bool admitted = false;
  for (int i = 0; i < 100 && !admitted; ++i) {
    try {
      WireClient again(server.endpoint());
      admitted = true;
    } catch (const std::runtime_error&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  EXPECT_TRUE(admitted);
}

TEST(LimitsTest, SessionsPerTenantAreCountedPerTenant) {
  const std::string config = ::testing::TempDir() + "/limits_tenants.toml";
  {
    std::ofstream out(config);
    out << "[[device]]\nbackend = \"emu\"\nmemory = \"256MiB\"\n"
           "[[tenant]]\nname = \"alice\"\ntoken = \"alice-token\"\nmax_sessions = 2\n"
           "[[tenant]]\nname = \"bob\"\ntoken = \"bob-token\"\n";
  }
  e2e::ServerOptions options;
  options.extraArgs = {"--config", config};
  e2e::GpupoolServer server(options);
  const auto driver = wire::Hello::Purpose::DRIVER;
  auto first = std::make_unique<WireClient>(server.endpoint(), driver, "alice-token");
  WireClient second(server.endpoint(), driver, "alice-token");
  try {
    WireClient third(server.endpoint(), driver, "alice-token");
    FAIL() << "alice's third session was admitted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("max_sessions"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("alice"), std::string::npos) << e.what();
  }
  // Another tenant is not held back by alice's limit, and status probes are not sessions.
  WireClient bob1(server.endpoint(), driver, "bob-token");
  WireClient bob2(server.endpoint(), driver, "bob-token");
  WireClient bob3(server.endpoint(), driver, "bob-token");
  WireClient monitor(server.endpoint(), wire::Hello::Purpose::STATUS, "alice-token");
  // Alice's slot comes back when one of her sessions ends.
  first.reset();
  bool admitted = false;
  for (int i = 0; i < 100 && !admitted; ++i) {
    try {
      WireClient again(server.endpoint(), driver, "alice-token");
      admitted = true;
    } catch (const std::runtime_error&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  EXPECT_TRUE(admitted);
}

TEST(LimitsTest, ModulesPerSessionAreCounted) {
  e2e::ServerOptions options;
  options.extraArgs = {"--max-modules-per-session", "3"};
  e2e::GpupoolServer server(options);
  WireClient client(server.endpoint());
  auto ctx = client.createContext().handle;
  std::vector<uint64_t> modules;
  for (int i = 0; i < 3; ++i) {
    auto m = client.loadPtx(ctx, kEmptyKernelPtx);
    ASSERT_EQ(m.result, CUDA_SUCCESS) << m.message;
    modules.push_back(m.handle);
  }
  auto refused = client.loadPtx(ctx, kEmptyKernelPtx);
  EXPECT_EQ(refused.result, CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_NE(refused.message.find("--max-modules-per-session"), std::string::npos)
      << refused.message;
  // Unloading gives the slot back.
  auto unload = client.call([&](wire::Request::Builder r) {
    auto m = r.initModuleUnload();
    m.setContext(ctx);
    m.setModule(modules[0]);
  });
  ASSERT_EQ(unload.result, CUDA_SUCCESS);
  EXPECT_EQ(client.loadPtx(ctx, kEmptyKernelPtx).result, CUDA_SUCCESS);
}

TEST(LimitsTest, OversizedMessageIsRefusedBeforeItIsRead) {
  e2e::GpupoolServer server;
  // A raw socket: a frame header announcing a message over transport::kMaxMessageBytes, and
  // nothing else. The server must drop the connection at once rather than wait for or buffer it.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(server.port());
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  transport::FrameHeader header{transport::kFrameMagic,
                                static_cast<uint32_t>(transport::kMaxMessageBytes + 8), 0};
  ASSERT_EQ(::send(fd, &header, sizeof header, 0), static_cast<ssize_t>(sizeof header));
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char byte;
  EXPECT_EQ(::recv(fd, &byte, 1, 0), 0) << "the server kept the connection open";
  ::close(fd);
  // Others are not affected.
  WireClient other(server.endpoint());
  EXPECT_EQ(other.createContext().result, CUDA_SUCCESS);
}

TEST(LimitsTest, PingBulkIsBounded) {
  e2e::GpupoolServer server;
  WireClient client(server.endpoint());
  std::vector<uint8_t> big((64u << 20) + 1);
  auto reply = client.call([](wire::Request::Builder r) { r.setPing(); }, big);
  EXPECT_EQ(reply.result, CUDA_ERROR_INVALID_VALUE);
  EXPECT_NE(reply.message.find("limit"), std::string::npos) << reply.message;
  EXPECT_TRUE(reply.bulk.empty());
}

}  // namespace
}  // namespace gpupool::hardening
