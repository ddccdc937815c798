// The registration cache over a connection's life, on a real verbs device: ranges private to this
// side (a server's device memory, PeerAccess::kNone) are cached for local access only and never
// exposed to the peer, and a forgotten range is deregistered at the connection's next frame, but
// never while the peer may still be reading it.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "tests/rdma/rdma_pair.h"
#include "tests/rdma/rdma_request_reply.h"
#include "tests/rdma/rdma_test_data.h"

namespace gpupool::transport {
namespace {

using namespace testing;  // connectedRdmaPair and the test data

constexpr size_t kSize = 1u << 20;

// `from` sends one frame with `size` bulk bytes from `src`; `to` reads them into `dst` whole.
void sendInto(Connection& from, Connection& to, const std::byte* src, std::byte* dst, size_t size) {
  auto m = messageOf(2, size);
  ConstBuffer message{m.data(), m.size() * 8}, bulk{src, size};
  std::thread sender([&] { from.sendFrame(std::span(&message, 1), std::span(&bulk, 1)); });
  auto frame = to.receiveFrame();
  expectMessage(frame, m);
  EXPECT_EQ(frame.bulkBytes, size);
  to.receiveBulk(dst, size);
  sender.join();
}

// A frame without bulk, from `from` to `to`.
void ping(Connection& from, Connection& to, uint64_t tag) {
  auto m = messageOf(1, tag);
  ConstBuffer message{m.data(), m.size() * 8};
  from.sendFrame(std::span(&message, 1), {});
  expectMessage(to.receiveFrame(), m);
}

TEST(RdmaRegistrationCache, PrivateRangeIsCachedForLocalAccessOnly) {
  SKIP_WITHOUT_RDMA();
  auto pair = connectedRdmaPair();
  const RdmaStats& client = *rdmaStatsOf(*pair.client);
  const RdmaStats& server = *rdmaStatsOf(*pair.server);
  PinnedBuffer source(kSize), device(kSize + 4096, PeerAccess::kNone);

  // Into the private range, by RDMA READ: registered once, for local write.
  for (int round = 0; round < 3; ++round) {
    fillPattern(source.data(), kSize, round + 1);
    sendInto(*pair.client, *pair.server, source.data(), device.data() + round * 7, kSize);
    ASSERT_EQ(std::memcmp(device.data() + round * 7, source.data(), kSize), 0) << round;
  }
  EXPECT_EQ(server.bulkBytesReceivedZeroCopy, 3 * kSize);
  EXPECT_EQ(server.registrations, 1u);
  EXPECT_EQ(server.registrationCacheHits, 2u);

  // Out of it to pageable memory, announced for READ: the peer gets a key to just that piece, for
  // just that transfer, never the cached one.
  fillPattern(device.data(), kSize, 10);
  std::vector<std::byte> pageable(kSize);
  ConstBuffer piece{device.data(), kSize};
  for (int round = 0; round < 2; ++round) {
    requestReply(*pair.client, *pair.server, nullptr, 0, std::span(&piece, 1), pageable.data(),
                 kSize);
    ASSERT_EQ(std::memcmp(pageable.data(), device.data(), kSize), 0) << round;
  }
  EXPECT_EQ(server.bulkBytesSentZeroCopy, 2 * kSize);
  EXPECT_EQ(server.registrations, 3u);
  EXPECT_EQ(server.registrationCacheHits, 2u);

  // Out of it into a destination the client offered, by RDMA WRITE: the cached local key serves.
  PinnedBuffer destination(kSize);
  requestReply(*pair.client, *pair.server, destination.data(), kSize, std::span(&piece, 1),
               destination.data(), kSize);
  ASSERT_EQ(std::memcmp(destination.data(), device.data(), kSize), 0);
  EXPECT_EQ(server.bulkBytesSentByWrite, kSize);
  EXPECT_EQ(server.registrations, 3u);
  EXPECT_EQ(server.registrationCacheHits, 3u);

  // A private range is never offered to the peer either: the reply is READ into it instead.
  PinnedBuffer privateDestination(kSize, PeerAccess::kNone);
  requestReply(*pair.client, *pair.server, privateDestination.data(), kSize, std::span(&piece, 1),
               privateDestination.data(), kSize);
  ASSERT_EQ(std::memcmp(privateDestination.data(), device.data(), kSize), 0);
  EXPECT_EQ(server.bulkBytesSentByWrite, kSize);
  EXPECT_EQ(client.bulkBytesReceivedWritten, kSize);
  EXPECT_EQ(client.bulkBytesReceivedStaged, 2 * kSize);  // the pageable replies, as always
  EXPECT_EQ(client.bulkBytesReceivedZeroCopy, kSize);
}

TEST(RdmaRegistrationCache, ForgottenRangeIsDeregisteredAtTheNextFrame) {
  SKIP_WITHOUT_RDMA();
  auto pair = connectedRdmaPair();
  const RdmaStats& server = *rdmaStatsOf(*pair.server);
  PinnedBuffer source(kSize);
  fillPattern(source.data(), kSize, 3);
  auto device = std::make_unique<PinnedBuffer>(kSize, PeerAccess::kNone);
  sendInto(*pair.client, *pair.server, source.data(), device->data(), kSize);
  EXPECT_EQ(server.registrations, 1u);
  device.reset();  // forgotten and unmapped, as cuMemFree does on the emu device
  EXPECT_EQ(server.deregistrations, 0u);
  ping(*pair.client, *pair.server, 1);  // no registration needed: the next frame alone drops it
  EXPECT_EQ(server.deregistrations, 1u);
  EXPECT_EQ(server.registrations, 1u);

  // A new range, perhaps at the same address, is registered anew.
  PinnedBuffer again(kSize, PeerAccess::kNone);
  sendInto(*pair.client, *pair.server, source.data(), again.data(), kSize);
  ASSERT_EQ(std::memcmp(again.data(), source.data(), kSize), 0);
  EXPECT_EQ(server.registrations, 2u);
}

// The client forgets a pinned range while the server has yet to READ what was announced from it
// (cuMemFreeHost on one thread while another still sends an asynchronous copy from it): the
// registration outlives the READ, which would otherwise fail and take the QP down, and goes at the
// client's first frame after the server confirmed it.
TEST(RdmaRegistrationCache, RangeForgottenDuringAReadGoesAfterIt) {
  SKIP_WITHOUT_RDMA();
  auto pair = connectedRdmaPair();
  const RdmaStats& client = *rdmaStatsOf(*pair.client);
  PinnedBuffer source(kSize);
  fillPattern(source.data(), kSize, 5);
  auto m = messageOf(2, 99);
  ConstBuffer message{m.data(), m.size() * 8}, bulk{source.data(), kSize};
  // sendFrame returns once the peer has read the bulk, so it runs on its own thread.
  std::thread sender([&] { pair.client->sendFrame(std::span(&message, 1), std::span(&bulk, 1)); });
  expectMessage(pair.server->receiveFrame(), m);
  // The first byte proves the announcement is out (a READ of the range, under its key); the rest
  // is read after the range is forgotten.
  std::vector<std::byte> received(kSize);
  pair.server->receiveBulk(received.data(), 1);
  processPinnedMemory().forget(source.data());
  pair.server->receiveBulk(received.data() + 1, kSize - 1);
  sender.join();
  ASSERT_EQ(std::memcmp(received.data(), source.data(), kSize), 0);
  EXPECT_EQ(client.bulkBytesSentZeroCopy, kSize);
  EXPECT_EQ(client.registrations, 1u);
  EXPECT_EQ(client.deregistrations, 0u);
  ping(*pair.client, *pair.server, 2);
  EXPECT_EQ(client.deregistrations, 1u);
  ping(*pair.server, *pair.client, 3);  // the connection is still healthy both ways
}

}  // namespace
}  // namespace gpupool::transport
