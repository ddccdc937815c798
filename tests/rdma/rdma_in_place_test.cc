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

// Posted calls: built in the open packed SEND buffer, right after the previous record. Kind 0:
// small, with a small bulk; kind 1: too large for a buffer (copied, sent on its own); kind 2: a
// dropped builder, then a small message; kind 3: a small message whose 16,300-byte bulk cannot
// share a buffer (copied, sent on its own). Every 97th frame is an ordinary send in between.
TEST(RdmaInPlace, QueuedMessagesBuiltInThePackedBufferArriveInOrder) {
  SKIP_WITHOUT_RDMA();
  auto pair = connectedRdmaPair();
  constexpr int kFrames = 2000;
  auto textOf = [](int i) {
    return std::string(i % 4 == 1 ? 40000 + i : 8 + i % 40, char('A' + i % 26));
  };
  auto bulkOf = [](int i) {
    std::vector<std::byte> b(i % 4 == 3 ? 16300 : (i % 4 == 0 ? size_t(i % 700) : 0));
    fillPattern(b.data(), b.size(), uint32_t(i));
    return b;
  };
  uint64_t inPlace = 0, packed = 0;
  std::string senderError;
  std::thread sender([&] {
    try {
      for (int i = 0; i < kFrames; ++i) {
        if (i % 4 == 2) {
          protocol::OutgoingMessage dropped(*pair.client, true);
          dropped.initRoot<wire::Response>().setMessage(std::string(3000, 'z'));
        }
        bool ordinary = i % 97 == 0;
        auto bulk = bulkOf(i);
        ConstBuffer b{bulk.data(), bulk.size()};
        protocol::OutgoingMessage message(*pair.client, !ordinary);
        auto r = message.initRoot<wire::Response>();
        r.setResult(uint32_t(i));
        r.setMessage(textOf(i));
        std::span<const ConstBuffer> parts(&b, bulk.empty() ? 0 : 1);
        if (ordinary) {
          protocol::sendMessage(*pair.client, message, parts);
        } else {
          protocol::queueMessage(*pair.client, message, parts);
        }
        if (i % 4 != 1 && (ordinary || i % 4 != 3)) inPlace++;
        if (!ordinary && i % 2 == 0) packed++;
      }
      pair.client->flush();
    } catch (const std::exception& e) {
      senderError = e.what();
    }
  });
  std::string receiverError;
  try {
    for (int i = 0; i < kFrames && receiverError.empty(); ++i) {
      protocol::IncomingMessage in(*pair.server);
      auto got = in.root<wire::Response>();
      auto want = bulkOf(i);
      std::vector<std::byte> received(want.size());
      if (in.bulkBytes() == want.size()) {
        pair.server->receiveBulk(received.data(), received.size());
      }
      if (got.getResult() != uint32_t(i) || std::string(got.getMessage().cStr()) != textOf(i) ||
          got.hasDeviceOutput() || in.bulkBytes() != want.size() || received != want) {
        receiverError = "frame " + std::to_string(i) + " arrived wrong (result " +
                        std::to_string(got.getResult()) + ", bulk " +
                        std::to_string(in.bulkBytes()) + ")";
      }
    }
  } catch (const std::exception& e) {
    receiverError = e.what();
  } catch (const kj::Exception& e) {
    receiverError = e.getDescription().cStr();
  }
  if (!receiverError.empty()) pair.client->shutdown();  // unblocks a sender waiting for credits
  sender.join();
  ASSERT_EQ(receiverError, "");
  ASSERT_EQ(senderError, "");
  const auto& stats = *rdmaStatsOf(*pair.client);
  EXPECT_EQ(stats.messagesSentInPlace, inPlace);
  EXPECT_EQ(stats.framesPacked, packed);
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
