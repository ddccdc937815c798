// CUDA IPC memory handles between sessions: a token opens the exported allocation only for a
// session of the exporter's tenant; forged tokens, other tenants and the exporter itself get
// errors and never access; a dead exporter's tokens open nothing, while what was opened stays
// reachable until it is closed, and then goes.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <fstream>
#include <thread>

#include "gpupool_server.h"
#include "wire_client.h"

namespace gpupool::hardening {
namespace {

using Token = std::array<uint8_t, 16>;
using Op = wire::Request::IpcMemOp;

std::vector<uint8_t> ipcPattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed ^ (i * 13));
  return v;
}

// The token a get answered, in its two halves.
Token tokenOf(const Reply& reply) {
  Token token{};
  for (size_t i = 0; i < 8; ++i) {
    token[i] = static_cast<uint8_t>(reply.handle >> (8 * i));
    token[8 + i] = static_cast<uint8_t>(reply.bytes >> (8 * i));
  }
  return token;
}

Reply exportAllocation(WireClient& client, uint64_t context, uint64_t address, Token* token) {
  Reply reply = client.call([&](wire::Request::Builder r) {
    auto m = r.initIpcMem();
    m.setContext(context);
    m.setOp(Op::GET);
    m.setAddress(address);
  });
  *token = tokenOf(reply);
  return reply;
}

Reply openToken(WireClient& client, uint64_t context, std::span<const uint8_t> token,
                unsigned flags = CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) {
  return client.call([&](wire::Request::Builder r) {
    auto m = r.initIpcMem();
    m.setContext(context);
    m.setOp(Op::OPEN);
    m.setToken(capnp::Data::Reader(token.data(), token.size()));
    m.setFlags(flags);
  });
}

Reply closeOpened(WireClient& client, uint64_t context, uint64_t address) {
  return client.call([&](wire::Request::Builder r) {
    auto m = r.initIpcMem();
    m.setContext(context);
    m.setOp(Op::CLOSE);
    m.setAddress(address);
  });
}

// A session with a context and an allocation holding `secret`, exported under `token`.
struct Exporter {
  std::unique_ptr<WireClient> client;
  uint64_t context = 0, address = 0;
  Token token{};
};

void startExporter(const std::string& endpoint, const std::string& tenantToken,
                   const std::vector<uint8_t>& secret, Exporter* exporter) {
  exporter->client =
      std::make_unique<WireClient>(endpoint, wire::Hello::Purpose::DRIVER, tenantToken);
  auto context = exporter->client->createContext();
  ASSERT_EQ(context.result, CUDA_SUCCESS) << context.message;
  exporter->context = context.handle;
  auto alloc = exporter->client->alloc(exporter->context, secret.size());
  ASSERT_EQ(alloc.result, CUDA_SUCCESS) << alloc.message;
  exporter->address = alloc.handle;
  ASSERT_EQ(exporter->client->write(exporter->context, exporter->address, secret).result,
            CUDA_SUCCESS);
  auto exported =
      exportAllocation(*exporter->client, exporter->context, exporter->address, &exporter->token);
  ASSERT_EQ(exported.result, CUDA_SUCCESS) << exported.message;
}

TEST(IpcMemoryTest, TokensOpenOnlyForSessionsOfTheExportersTenant) {
  const std::string config = ::testing::TempDir() + "/ipc_tenants.toml";
  {
    std::ofstream out(config);
    out << "[[device]]\nbackend = \"emu\"\nmemory = \"256MiB\"\n"
           "[[tenant]]\nname = \"alice\"\ntoken = \"alice-token\"\n"
           "[[tenant]]\nname = \"bob\"\ntoken = \"bob-token\"\n";
  }
  e2e::ServerOptions options;
  options.extraArgs = {"--config", config};
  e2e::GpupoolServer server(options);
  const std::vector<uint8_t> secret = ipcPattern(4096, 0x3c);
  Exporter alice;
  ASSERT_NO_FATAL_FAILURE(startExporter(server.endpoint(), "alice-token", secret, &alice));

  // The exporting session itself: as the driver answers a process opening its own handle.
  EXPECT_EQ(openToken(*alice.client, alice.context, alice.token).result,
            CUDA_ERROR_INVALID_CONTEXT);

  // Bob's session: the token names nothing for him, and the address stays foreign.
  WireClient bob(server.endpoint(), wire::Hello::Purpose::DRIVER, "bob-token");
  auto bobContext = bob.createContext();
  ASSERT_EQ(bobContext.result, CUDA_SUCCESS) << bobContext.message;
  auto refused = openToken(bob, bobContext.handle, alice.token);
  EXPECT_EQ(refused.result, CUDA_ERROR_INVALID_HANDLE) << refused.message;
  auto bobRead = bob.read(bobContext.handle, alice.address, 64);
  EXPECT_NE(bobRead.result, CUDA_SUCCESS);
  EXPECT_TRUE(bobRead.bulk.empty()) << "bob received bytes of alice's memory";
  EXPECT_NE(closeOpened(bob, bobContext.handle, alice.address).result, CUDA_SUCCESS);

  // Another session of alice's opens it: the same memory, both ways.
  WireClient alice2(server.endpoint(), wire::Hello::Purpose::DRIVER, "alice-token");
  auto context2 = alice2.createContext();
  ASSERT_EQ(context2.result, CUDA_SUCCESS) << context2.message;
  auto opened = openToken(alice2, context2.handle, alice.token);
  ASSERT_EQ(opened.result, CUDA_SUCCESS) << opened.message;
  EXPECT_EQ(opened.handle, alice.address);
  EXPECT_EQ(opened.bytes, secret.size());
  EXPECT_EQ(alice2.read(context2.handle, opened.handle, secret.size()).bulk, secret);
  const std::vector<uint8_t> reply = ipcPattern(256, 0x77);
  ASSERT_EQ(alice2.write(context2.handle, opened.handle, reply).result, CUDA_SUCCESS);
  auto seen = alice.client->read(alice.context, alice.address, reply.size());
  EXPECT_EQ(seen.bulk, reply);
  // Opened memory is closed, never freed; bob still cannot reach it.
  EXPECT_NE(alice2.free(context2.handle, opened.handle).result, CUDA_SUCCESS);
  EXPECT_NE(bob.read(bobContext.handle, alice.address, 64).result, CUDA_SUCCESS);
  EXPECT_EQ(closeOpened(alice2, context2.handle, opened.handle).result, CUDA_SUCCESS);
  EXPECT_NE(alice2.read(context2.handle, opened.handle, 64).result, CUDA_SUCCESS);
}

Reply createEvent(WireClient& client, uint64_t context, unsigned flags) {
  return client.call([&](wire::Request::Builder r) {
    auto e = r.initEventCreate();
    e.setContext(context);
    e.setFlags(flags);
  });
}

Reply exportEvent(WireClient& client, uint64_t context, uint64_t event, Token* token) {
  Reply reply = client.call([&](wire::Request::Builder r) {
    auto m = r.initIpcMem();
    m.setContext(context);
    m.setOp(Op::GET_EVENT);
    m.setEvent(event);
  });
  *token = tokenOf(reply);
  return reply;
}

Reply openEvent(WireClient& client, uint64_t context, std::span<const uint8_t> token) {
  return client.call([&](wire::Request::Builder r) {
    auto m = r.initIpcMem();
    m.setContext(context);
    m.setOp(Op::OPEN_EVENT);
    m.setToken(capnp::Data::Reader(token.data(), token.size()));
  });
}

// IPC event tokens follow the memory tokens' rules: only the exporter's tenant opens them, a
// memory token is not an event token nor the reverse, only interprocess events without timing are
// exported, and a destroyed event's token opens nothing more.
TEST(IpcMemoryTest, EventTokensOpenOnlyEventsForTheExportersTenant) {
  const std::string config = ::testing::TempDir() + "/ipc_event_tenants.toml";
  {
    std::ofstream out(config);
    out << "[[device]]\nbackend = \"emu\"\nmemory = \"256MiB\"\n"
           "[[tenant]]\nname = \"alice\"\ntoken = \"alice-token\"\n"
           "[[tenant]]\nname = \"bob\"\ntoken = \"bob-token\"\n";
  }
  e2e::ServerOptions options;
  options.extraArgs = {"--config", config};
  e2e::GpupoolServer server(options);
  Exporter alice;
  ASSERT_NO_FATAL_FAILURE(
      startExporter(server.endpoint(), "alice-token", ipcPattern(4096, 0x11), &alice));
  auto timed = createEvent(*alice.client, alice.context, 0);
  ASSERT_EQ(timed.result, CUDA_SUCCESS) << timed.message;
  Token unused{};
  EXPECT_EQ(exportEvent(*alice.client, alice.context, timed.handle, &unused).result,
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_NE(exportEvent(*alice.client, alice.context, 0xdead, &unused).result, CUDA_SUCCESS);
  auto event =
      createEvent(*alice.client, alice.context, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING);
  ASSERT_EQ(event.result, CUDA_SUCCESS) << event.message;
  Token token{};
  auto exported = exportEvent(*alice.client, alice.context, event.handle, &token);
  ASSERT_EQ(exported.result, CUDA_SUCCESS) << exported.message;
  EXPECT_EQ(openEvent(*alice.client, alice.context, token).result, CUDA_ERROR_INVALID_CONTEXT);

  WireClient bob(server.endpoint(), wire::Hello::Purpose::DRIVER, "bob-token");
  auto bobContext = bob.createContext();
  ASSERT_EQ(bobContext.result, CUDA_SUCCESS) << bobContext.message;
  EXPECT_EQ(openEvent(bob, bobContext.handle, token).result, CUDA_ERROR_INVALID_HANDLE);

  WireClient alice2(server.endpoint(), wire::Hello::Purpose::DRIVER, "alice-token");
  auto context2 = alice2.createContext();
  ASSERT_EQ(context2.result, CUDA_SUCCESS) << context2.message;
  // Kinds do not mix: the event token is no memory handle, the memory token no event handle.
  EXPECT_EQ(openToken(alice2, context2.handle, token).result, CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(openEvent(alice2, context2.handle, alice.token).result, CUDA_ERROR_INVALID_HANDLE);
  const std::vector<uint8_t> shortToken(7, 1);
  EXPECT_EQ(openEvent(alice2, context2.handle, shortToken).result, CUDA_ERROR_INVALID_HANDLE);
  auto opened = openEvent(alice2, context2.handle, token);
  ASSERT_EQ(opened.result, CUDA_SUCCESS) << opened.message;
  EXPECT_NE(opened.handle, 0u);

  // Destroyed by its exporter: the token opens nothing any more.
  ASSERT_EQ(alice.client
                ->call([&](wire::Request::Builder r) {
                  auto d = r.initEventDestroy();
                  d.setContext(alice.context);
                  d.setEvent(event.handle);
                })
                .result,
            CUDA_SUCCESS);
  EXPECT_EQ(openEvent(alice2, context2.handle, token).result, CUDA_ERROR_INVALID_HANDLE);
}

TEST(IpcMemoryTest, ForgedTokensAndBadRequestsOpenNothing) {
  e2e::GpupoolServer server;
  const std::vector<uint8_t> secret = ipcPattern(4096, 0x5a);
  Exporter a;
  ASSERT_NO_FATAL_FAILURE(startExporter(server.endpoint(), "", secret, &a));
  WireClient b(server.endpoint());
  auto context = b.createContext();
  ASSERT_EQ(context.result, CUDA_SUCCESS) << context.message;

  // One bit of the token changed, every bit changed, a token of the wrong length.
  for (size_t bit : {0u, 77u, 127u}) {
    Token forged = a.token;
    forged[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    EXPECT_EQ(openToken(b, context.handle, forged).result, CUDA_ERROR_INVALID_HANDLE);
  }
  Token inverted = a.token;
  for (uint8_t& byte : inverted) byte = static_cast<uint8_t>(~byte);
  EXPECT_EQ(openToken(b, context.handle, inverted).result, CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(openToken(b, context.handle, std::span<const uint8_t>(a.token.data(), 8)).result,
            CUDA_ERROR_INVALID_HANDLE);
  // Unknown flags, before the token is even looked at.
  EXPECT_EQ(openToken(b, context.handle, a.token, 0x10).result, CUDA_ERROR_INVALID_VALUE);
  // Only the base of an allocation of one's own context exports.
  Token unused{};
  EXPECT_EQ(exportAllocation(*a.client, a.context, a.address + 64, &unused).result,
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(exportAllocation(b, context.handle, a.address, &unused).result,
            CUDA_ERROR_INVALID_VALUE);
  // Asked again, the exporter gets the same token.
  Token again{};
  ASSERT_EQ(exportAllocation(*a.client, a.context, a.address, &again).result, CUDA_SUCCESS);
  EXPECT_EQ(again, a.token);
  EXPECT_NE(b.read(context.handle, a.address, 64).result, CUDA_SUCCESS);
}

// Waits until the server's memory in use is `bytes`.
bool memoryUsedBecomes(WireClient& client, uint64_t bytes) {
  for (int i = 0; i < 200; ++i) {
    if (client.serverMemoryUsed() == bytes) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

TEST(IpcMemoryTest, ADeadExportersTokenOpensNothingAndOpenedMemoryLastsUntilClosed) {
  e2e::GpupoolServer server;
  WireClient opener(server.endpoint());
  auto context = opener.createContext();
  ASSERT_EQ(context.result, CUDA_SUCCESS) << context.message;
  const uint64_t baseline = opener.serverMemoryUsed();
  const std::vector<uint8_t> secret = ipcPattern(8192, 0x21);
  Exporter a;
  ASSERT_NO_FATAL_FAILURE(startExporter(server.endpoint(), "", secret, &a));
  auto opened = openToken(opener, context.handle, a.token);
  ASSERT_EQ(opened.result, CUDA_SUCCESS) << opened.message;

  // The exporter's session ends: its token opens nothing any more, but the open mapping stays.
  a.client.reset();
  WireClient late(server.endpoint());
  auto lateContext = late.createContext();
  ASSERT_EQ(lateContext.result, CUDA_SUCCESS) << lateContext.message;
  Reply lateOpen;
  for (int i = 0; i < 200; ++i) {
    lateOpen = openToken(late, lateContext.handle, a.token);
    if (lateOpen.result != CUDA_SUCCESS) break;
    ASSERT_EQ(closeOpened(late, lateContext.handle, lateOpen.handle).result, CUDA_SUCCESS);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(lateOpen.result, CUDA_ERROR_INVALID_HANDLE) << lateOpen.message;
  EXPECT_EQ(opener.read(context.handle, opened.handle, secret.size()).bulk, secret);
  EXPECT_GT(opener.serverMemoryUsed(), baseline);

  // The last close frees it.
  EXPECT_EQ(closeOpened(opener, context.handle, opened.handle).result, CUDA_SUCCESS);
  EXPECT_TRUE(memoryUsedBecomes(opener, baseline));
  EXPECT_NE(opener.read(context.handle, opened.handle, 64).result, CUDA_SUCCESS);
}

TEST(IpcMemoryTest, FreedByItsOwnerOpenedMemoryStaysForTheOpenerOnly) {
  e2e::GpupoolServer server;
  WireClient opener(server.endpoint());
  auto context = opener.createContext();
  ASSERT_EQ(context.result, CUDA_SUCCESS) << context.message;
  const uint64_t baseline = opener.serverMemoryUsed();
  const std::vector<uint8_t> secret = ipcPattern(4096, 0x42);
  Exporter a;
  ASSERT_NO_FATAL_FAILURE(startExporter(server.endpoint(), "", secret, &a));
  auto opened = openToken(opener, context.handle, a.token);
  ASSERT_EQ(opened.result, CUDA_SUCCESS) << opened.message;

  ASSERT_EQ(a.client->free(a.context, a.address).result, CUDA_SUCCESS);
  EXPECT_NE(a.client->read(a.context, a.address, 64).result, CUDA_SUCCESS);
  EXPECT_NE(a.client->free(a.context, a.address).result, CUDA_SUCCESS);
  EXPECT_EQ(opener.read(context.handle, opened.handle, secret.size()).bulk, secret);
  // A freed allocation's token opens nothing new.
  WireClient late(server.endpoint());
  auto lateContext = late.createContext();
  ASSERT_EQ(lateContext.result, CUDA_SUCCESS) << lateContext.message;
  EXPECT_NE(openToken(late, lateContext.handle, a.token).result, CUDA_SUCCESS);

  EXPECT_EQ(closeOpened(opener, context.handle, opened.handle).result, CUDA_SUCCESS);
  EXPECT_TRUE(memoryUsedBecomes(opener, baseline));

  // A new allocation at the same address is not what the old token names.
  auto reused = a.client->alloc(a.context, secret.size());
  ASSERT_EQ(reused.result, CUDA_SUCCESS) << reused.message;
  EXPECT_EQ(reused.handle, a.address) << "the address was not reused; the check below is weaker";
  auto stale = openToken(opener, context.handle, a.token);
  EXPECT_NE(stale.result, CUDA_SUCCESS);
  EXPECT_NE(opener.read(context.handle, reused.handle, 64).result, CUDA_SUCCESS);
}

}  // namespace
}  // namespace gpupool::hardening
