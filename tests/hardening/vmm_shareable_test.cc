// Shareable handles of VMM allocations between sessions (cuMemExportToShareableHandle as a POSIX
// file descriptor names a server token): a token imports only for a session of the exporter's
// tenant, as a handle to the same physical memory; forged tokens, other tenants, allocations made
// without the handle type and an IPC memory token get errors and never access; an ended
// exporter's tokens import nothing, while what was imported stays mapped.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <fstream>
#include <thread>

#include "gpupool_server.h"
#include "wire_client.h"

namespace gpupool::hardening {
namespace {

using VmmToken = std::array<uint8_t, 16>;
using HandleOp = wire::Request::VmmHandleOp;
constexpr uint64_t kChunk = 2ull << 20;

std::vector<uint8_t> vmmPattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed ^ (i * 7));
  return v;
}

Reply vmmHandleCall(WireClient& client, uint64_t context, HandleOp op, uint64_t bytes,
                    uint64_t handle, bool shareable, std::span<const uint8_t> token = {}) {
  return client.call([&](wire::Request::Builder r) {
    auto m = r.initVmmHandle();
    m.setContext(context);
    m.setOp(op);
    m.setBytes(bytes);
    m.setHandle(handle);
    m.setShareable(shareable);
    if (!token.empty()) m.setToken(capnp::Data::Reader(token.data(), token.size()));
  });
}

VmmToken vmmTokenOf(const Reply& reply) {
  VmmToken token{};
  for (size_t i = 0; i < 8; ++i) {
    token[i] = static_cast<uint8_t>(reply.handle >> (8 * i));
    token[8 + i] = static_cast<uint8_t>(reply.bytes >> (8 * i));
  }
  return token;
}

// Reserves kChunk, maps `handle` there read-write; the address, or 0 on failure.
uint64_t vmmMapReadWrite(WireClient& client, uint64_t context, uint64_t handle) {
  Reply reserved = client.call([&](wire::Request::Builder r) {
    auto m = r.initVmmAddress();
    m.setContext(context);
    m.setBytes(kChunk);
  });
  if (reserved.result != CUDA_SUCCESS) return 0;
  for (auto op : {wire::Request::VmmMapOp::MAP, wire::Request::VmmMapOp::SET_ACCESS}) {
    Reply mapped = client.call([&](wire::Request::Builder r) {
      auto m = r.initVmmMap();
      m.setContext(context);
      m.setOp(op);
      m.setAddress(reserved.handle);
      m.setBytes(kChunk);
      m.setHandle(handle);
      m.setReadWrite(true);
    });
    if (mapped.result != CUDA_SUCCESS) return 0;
  }
  return reserved.handle;
}

std::string writeTenantConfig(const std::string& name) {
  const std::string config = ::testing::TempDir() + "/" + name;
  std::ofstream out(config);
  out << "[[device]]\nbackend = \"emu\"\nmemory = \"256MiB\"\n"
         "[[tenant]]\nname = \"alice\"\ntoken = \"alice-token\"\n"
         "[[tenant]]\nname = \"bob\"\ntoken = \"bob-token\"\n";
  return config;
}

TEST(VmmShareableTest, TokensImportOnlyForSessionsOfTheExportersTenant) {
  e2e::ServerOptions options;
  options.extraArgs = {"--config", writeTenantConfig("vmm_shareable_tenants.toml")};
  e2e::GpupoolServer server(options);
  const std::vector<uint8_t> secret = vmmPattern(4096, 0x5a);

  auto alice =
      std::make_unique<WireClient>(server.endpoint(), wire::Hello::Purpose::DRIVER, "alice-token");
  auto aliceContext = alice->createContext();
  ASSERT_EQ(aliceContext.result, CUDA_SUCCESS) << aliceContext.message;
  uint64_t ac = aliceContext.handle;

  // Made without the handle type: not exportable, as the driver answers.
  auto plain = vmmHandleCall(*alice, ac, HandleOp::CREATE, kChunk, 0, false);
  ASSERT_EQ(plain.result, CUDA_SUCCESS) << plain.message;
  EXPECT_EQ(vmmHandleCall(*alice, ac, HandleOp::EXPORT, 0, plain.handle, false).result,
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_NE(vmmHandleCall(*alice, ac, HandleOp::EXPORT, 0, 0xdead, false).result, CUDA_SUCCESS);

  auto created = vmmHandleCall(*alice, ac, HandleOp::CREATE, kChunk, 0, true);
  ASSERT_EQ(created.result, CUDA_SUCCESS) << created.message;
  uint64_t aliceMapping = vmmMapReadWrite(*alice, ac, created.handle);
  ASSERT_NE(aliceMapping, 0u);
  ASSERT_EQ(alice->write(ac, aliceMapping, secret).result, CUDA_SUCCESS);
  auto exported = vmmHandleCall(*alice, ac, HandleOp::EXPORT, 0, created.handle, false);
  ASSERT_EQ(exported.result, CUDA_SUCCESS) << exported.message;
  VmmToken token = vmmTokenOf(exported);
  // Exporting again names the same export.
  EXPECT_EQ(vmmTokenOf(vmmHandleCall(*alice, ac, HandleOp::EXPORT, 0, created.handle, false)),
            token);

  // Bob: the token names nothing for him, forged or not, and alice's memory stays foreign.
  WireClient bob(server.endpoint(), wire::Hello::Purpose::DRIVER, "bob-token");
  auto bobContext = bob.createContext();
  ASSERT_EQ(bobContext.result, CUDA_SUCCESS) << bobContext.message;
  auto refused = vmmHandleCall(bob, bobContext.handle, HandleOp::IMPORT, 0, 0, false, token);
  EXPECT_EQ(refused.result, CUDA_ERROR_INVALID_HANDLE) << refused.message;
  EXPECT_NE(bob.read(bobContext.handle, aliceMapping, 64).result, CUDA_SUCCESS);

  // Alice's second session: forged and malformed tokens import nothing, the real one the memory.
  WireClient alice2(server.endpoint(), wire::Hello::Purpose::DRIVER, "alice-token");
  auto context2 = alice2.createContext();
  ASSERT_EQ(context2.result, CUDA_SUCCESS) << context2.message;
  uint64_t c2 = context2.handle;
  VmmToken forged = token;
  forged[5] ^= 0x10;
  EXPECT_EQ(vmmHandleCall(alice2, c2, HandleOp::IMPORT, 0, 0, false, forged).result,
            CUDA_ERROR_INVALID_HANDLE);
  EXPECT_NE(vmmHandleCall(alice2, c2, HandleOp::IMPORT, 0, 0, false,
                          std::span<const uint8_t>(token.data(), 8))
                .result,
            CUDA_SUCCESS);
  // An IPC memory token is not a shareable handle's.
  auto ipcAlloc = alice->alloc(ac, 4096);
  ASSERT_EQ(ipcAlloc.result, CUDA_SUCCESS);
  auto ipcToken = alice->call([&](wire::Request::Builder r) {
    auto m = r.initIpcMem();
    m.setContext(ac);
    m.setOp(wire::Request::IpcMemOp::GET);
    m.setAddress(ipcAlloc.handle);
  });
  ASSERT_EQ(ipcToken.result, CUDA_SUCCESS) << ipcToken.message;
  EXPECT_EQ(vmmHandleCall(alice2, c2, HandleOp::IMPORT, 0, 0, false, vmmTokenOf(ipcToken)).result,
            CUDA_ERROR_INVALID_HANDLE);

  const uint64_t beforeImport = alice2.serverMemoryUsed();
  auto imported = vmmHandleCall(alice2, c2, HandleOp::IMPORT, 0, 0, false, token);
  ASSERT_EQ(imported.result, CUDA_SUCCESS) << imported.message;
  EXPECT_EQ(imported.bytes, kChunk);
  uint64_t mapping2 = vmmMapReadWrite(alice2, c2, imported.handle);
  ASSERT_NE(mapping2, 0u);
  EXPECT_EQ(alice2.read(c2, mapping2, secret.size()).bulk, secret);
  const std::vector<uint8_t> answer = vmmPattern(512, 0x99);
  ASSERT_EQ(alice2.write(c2, mapping2, answer).result, CUDA_SUCCESS);
  EXPECT_EQ(alice->read(ac, aliceMapping, answer.size()).bulk, answer);
  // Importing counts nothing more: the memory is the exporter's allocation.
  EXPECT_EQ(alice2.serverMemoryUsed(), beforeImport);

  // Alice's exporting session ends (its memory goes back, its tokens are withdrawn first): its
  // token imports nothing more, and what alice2 imported stays mapped, the same bytes.
  alice.reset();
  bool ended = false;
  for (int i = 0; i < 200 && !ended; ++i) {
    ended = alice2.serverMemoryUsed() < beforeImport;
    if (!ended) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(ended) << "the exporting session's memory was not given back";
  EXPECT_EQ(vmmHandleCall(alice2, c2, HandleOp::IMPORT, 0, 0, false, token).result,
            CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(alice2.read(c2, mapping2, answer.size()).bulk, answer);
}

}  // namespace
}  // namespace gpupool::hardening
