// Messages built in the connection's registered SEND buffer (protocol::OutgoingMessage over
// Connection::frameSpace) leave without a copy, and the buffers stay clean for the next message:
// in-place messages, messages too large for one buffer (sent by copy), and builders dropped unsent,
// interleaved, in both directions, with bulk.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "protocol/gpupool.capnp.h"
#include "protocol/message_codec.h"
#include "protocol/outgoing_message.h"
#include "tests/rdma/rdma_pair.h"
#include "tests/rdma/rdma_test_data.h"

namespace gpupool::transport {
namespace {

using namespace testing;  // connectedRdmaPair and the test data

// Sends message i from `from` to `to` and checks it arrives intact. Kind 0: small, built in
// place; kind 1: 40,000 bytes of text, more than one buffer holds, so capnp adds a heap segment
// and the frame is copied; kind 2: a builder filled and dropped first, then a small one.
void roundTrip(Connection& from, Connection& to, int i) {
  int kind = i % 3;
  if (kind == 2) {
    protocol::OutgoingMessage dropped(from);
    dropped.initRoot<wire::Response>().setMessage(std::string(9000, 'x'));
  }
  std::string text(kind == 1 ? 40000 + i : 10 + i % 50, char('a' + i % 26));
  std::vector<std::byte> bulk(i % 4 == 0 ? 1000 + i : 0);
  fillPattern(bulk.data(), bulk.size(), uint32_t(i));
  ConstBuffer b{bulk.data(), bulk.size()};
  std::thread sender([&] {
    protocol::OutgoingMessage message(from);
    auto r = message.initRoot<wire::Response>();
    r.setResult(uint32_t(i));
    r.setMessage(text);
    protocol::sendMessage(from, message, std::span(&b, bulk.empty() ? 0 : 1));
  });
  protocol::IncomingMessage in(to);
  auto got = in.root<wire::Response>();
  EXPECT_EQ(got.getResult(), uint32_t(i));
  EXPECT_EQ(std::string(got.getMessage().cStr()), text) << "message " << i;
  // Nothing left over from an earlier message in the same buffer.
  EXPECT_FALSE(got.hasDeviceOutput()) << "message " << i;
  ASSERT_EQ(in.bulkBytes(), bulk.size());
  std::vector<std::byte> received(bulk.size());
  to.receiveBulk(received.data(), received.size());
  EXPECT_EQ(received, bulk) << "message " << i;
  sender.join();
}

TEST(RdmaInPlace, MessagesBuiltInTheSendBufferArriveIntactBothWays) {
  SKIP_WITHOUT_RDMA();
  auto pair = connectedRdmaPair();
  constexpr int kMessages = 300;  // several times round the 32 send buffers
  for (int i = 0; i < kMessages; ++i) {
    roundTrip(*pair.client, *pair.server, i);
    roundTrip(*pair.server, *pair.client, i);
  }
  // Kinds 0 and 2 were built in place; kind 1 needed a second segment and was copied.
  EXPECT_EQ(rdmaStatsOf(*pair.client)->messagesSentInPlace, uint64_t(kMessages * 2 / 3));
  EXPECT_EQ(rdmaStatsOf(*pair.server)->messagesSentInPlace, uint64_t(kMessages * 2 / 3));
}

TEST(RdmaInPlace, OtherConnectionsBuildOnTheHeap) {
  // No lent space without RDMA: the builder behaves as capnp's MallocMessageBuilder.
  struct NoSpace : Connection {
    void sendFrame(std::span<const ConstBuffer>, std::span<const ConstBuffer>) override {}
    ReceivedFrame receiveFrame() override { return {}; }
    void receiveBulk(void*, size_t) override {}
    void discardBulk(size_t) override {}
    uint64_t pendingBulk() const override { return 0; }
    void shutdown() override {}
    std::string kind() const override { return "none"; }
    std::string peer() const override { return "none"; }
    void setReceiveTimeoutMs(unsigned) override {}
  } connection;
  protocol::OutgoingMessage message(connection);
  message.initRoot<wire::Response>().setMessage(std::string(100000, 'q'));
  auto segments = message.getSegmentsForOutput();
  ASSERT_GE(segments.size(), 1u);
  EXPECT_EQ(message.getRoot<wire::Response>().getMessage().size(), 100000u);
}

}  // namespace
}  // namespace gpupool::transport
