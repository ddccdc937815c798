// Frames taken in without waiting over RDMA (Connection::frameArrived and the readiness
// descriptor, what gpupoold's event loop serves idle sessions from): the descriptor stays quiet
// while nothing comes and turns readable for a frame, for the peer's departure, for shutdown and
// for readyAgain; queued frames come out one by one; a message spanning several SENDs, or larger
// than the receive window, arrives whole; a frame taken in by another thread that is waiting to
// send still wakes the loop.
#include <gtest/gtest.h>
#include <poll.h>

#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "tests/rdma/rdma_pair.h"
#include "tests/rdma/rdma_test_data.h"

namespace gpupool::transport {
namespace {

using namespace testing;  // connectedRdmaPair and the test data
using std::chrono::milliseconds;

// Whether the descriptor turns readable within `ms`.
bool readableWithin(Connection& connection, int ms) {
  pollfd p{connection.readinessDescriptor(), POLLIN, 0};
  return ::poll(&p, 1, ms) == 1;
}

// As the event loop does: look, and look again only once the descriptor turns readable (never on a
// timer, which would hide a frame that raised no readiness).
void waitForFrame(Connection& connection) {
  while (!connection.frameArrived()) {
    ASSERT_TRUE(readableWithin(connection, 10000)) << "a frame raised no readiness within 10 s";
  }
}

void send(Connection& c, const std::vector<uint64_t>& message,
          std::span<const ConstBuffer> bulk = {}) {
  ConstBuffer part{message.data(), message.size() * 8};
  c.sendFrame(std::span(&part, 1), bulk);
}

TEST(RdmaFrameArrival, TheDescriptorStaysQuietUntilAFrameComes) {
  SKIP_WITHOUT_RDMA();
  RdmaPair pair = connectedRdmaPair();
  Connection& server = *pair.server;
  ASSERT_GE(server.readinessDescriptor(), 0);
  EXPECT_FALSE(server.frameArrived());
  // Looked at, nothing pending: no wakeup (an event loop would otherwise spin on it).
  EXPECT_FALSE(readableWithin(server, 200));
  auto m = messageOf(40, 1);
  send(*pair.client, m);
  ASSERT_TRUE(readableWithin(server, 10000)) << "the frame raised no readiness";
  waitForFrame(server);
  expectMessage(server.receiveFrame(), m);
  EXPECT_FALSE(server.frameArrived());
  EXPECT_FALSE(readableWithin(server, 200));
}

TEST(RdmaFrameArrival, QueuedFramesComeOutOneByOne) {
  SKIP_WITHOUT_RDMA();
  RdmaPair pair = connectedRdmaPair();
  Connection& server = *pair.server;
  ASSERT_GE(server.readinessDescriptor(), 0);
  std::vector<std::vector<uint64_t>> sent;
  for (uint64_t i = 0; i < 7; ++i) {
    sent.push_back(messageOf(3 + i, 100 + i));
    ConstBuffer part{sent.back().data(), sent.back().size() * 8};
    pair.client->sendFrameLater(std::span(&part, 1), {});  // several in one packed SEND
  }
  pair.client->flush();
  for (const auto& m : sent) {
    waitForFrame(server);
    expectMessage(server.receiveFrame(), m);
  }
  EXPECT_FALSE(server.frameArrived());
}

TEST(RdmaFrameArrival, MessagesOverSeveralSendsAndBeyondTheReceiveWindowArriveWhole) {
  SKIP_WITHOUT_RDMA();
  RdmaPair pair = connectedRdmaPair();
  Connection& server = *pair.server;
  ASSERT_GE(server.readinessDescriptor(), 0);
  // About 5 SENDs; then about 64, twice the receive buffers one side posts.
  for (size_t words : {size_t(10000), size_t(128 << 10)}) {
    auto m = messageOf(words, words);
    std::vector<std::byte> bulk(70000);
    fillPattern(bulk.data(), bulk.size(), 7);
    ConstBuffer bulkPart{bulk.data(), bulk.size()};
    auto sending = std::async(std::launch::async, [&] { send(*pair.client, m, {&bulkPart, 1}); });
    waitForFrame(server);
    ReceivedFrame frame = server.receiveFrame();
    expectMessage(frame, m);
    ASSERT_EQ(frame.bulkBytes, bulk.size());
    std::vector<std::byte> got(bulk.size());
    server.receiveBulk(got.data(), got.size());
    EXPECT_EQ(got, bulk);
    sending.get();
  }
}

// The server's sender waits for the client to read a rendezvous bulk, and so drives the CQ, when
// the client's next frame comes: that thread takes it in, and the loop must still learn of it.
TEST(RdmaFrameArrival, AFrameTakenInByAWaitingSenderWakesTheLoop) {
  SKIP_WITHOUT_RDMA();
  RdmaPair pair = connectedRdmaPair();
  Connection& server = *pair.server;
  ASSERT_GE(server.readinessDescriptor(), 0);
  EXPECT_FALSE(server.frameArrived());
  std::vector<std::byte> reply(1 << 20);
  fillPattern(reply.data(), reply.size(), 3);
  auto replyMessage = messageOf(4, 9);
  std::promise<void> seen;
  auto seenFuture = seen.get_future();
  auto sender = std::async(std::launch::async, [&] {
    ConstBuffer bulkPart{reply.data(), reply.size()};
    send(server, replyMessage, {&bulkPart, 1});  // returns once the client read the bulk
  });
  // Give the sender time to announce the bulk and start waiting on the CQ.
  std::this_thread::sleep_for(milliseconds(300));
  auto request = messageOf(6, 5);
  send(*pair.client, request);
  ASSERT_TRUE(readableWithin(server, 10000)) << "a frame the waiting sender took in was not shown";
  waitForFrame(server);
  expectMessage(server.receiveFrame(), request);
  // Only now does the client read the reply, which lets the sender finish.
  auto frame = pair.client->receiveFrame();
  expectMessage(frame, replyMessage);
  std::vector<std::byte> got(reply.size());
  pair.client->receiveBulk(got.data(), got.size());
  EXPECT_EQ(got, reply);
  // The BulkDone's event: the loop looks while the sender still drives the CQ (it needs the mutex
  // this look holds to take the event), so the sender takes that event and leaves the CQ unarmed.
  ASSERT_TRUE(readableWithin(server, 10000));
  EXPECT_FALSE(server.frameArrived());
  sender.get();
  // The sender, leaving, handed the CQ back to the loop: a later frame is seen as well.
  auto later = messageOf(8, 11);
  send(*pair.client, later);
  ASSERT_TRUE(readableWithin(server, 10000)) << "nothing woke the loop after the sender left";
  waitForFrame(server);
  expectMessage(server.receiveFrame(), later);
}

TEST(RdmaFrameArrival, ReadyAgainWakesOnceAndNothingElse) {
  SKIP_WITHOUT_RDMA();
  RdmaPair pair = connectedRdmaPair();
  Connection& server = *pair.server;
  ASSERT_GE(server.readinessDescriptor(), 0);
  EXPECT_FALSE(server.frameArrived());
  ASSERT_TRUE(server.readyAgain());
  EXPECT_TRUE(readableWithin(server, 1000));
  EXPECT_FALSE(server.frameArrived());
  EXPECT_FALSE(readableWithin(server, 200));
}

TEST(RdmaFrameArrival, ThePeerLeavingIsAnErrorNotAFrame) {
  SKIP_WITHOUT_RDMA();
  RdmaPair pair = connectedRdmaPair();
  Connection& server = *pair.server;
  ASSERT_GE(server.readinessDescriptor(), 0);
  auto m = messageOf(5, 2);
  send(*pair.client, m);
  pair.client.reset();  // disconnects
  // What it sent before leaving is still delivered, then the departure is reported.
  waitForFrame(server);
  expectMessage(server.receiveFrame(), m);
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  bool reported = false;
  while (!reported && std::chrono::steady_clock::now() < until) {
    try {
      EXPECT_FALSE(server.frameArrived());
      readableWithin(server, 100);
    } catch (const TransportError& e) {
      EXPECT_EQ(e.kind(), TransportError::Kind::kDisconnected) << e.what();
      reported = true;
    }
  }
  EXPECT_TRUE(reported) << "the peer's departure was not reported within 20 s";
}

TEST(RdmaFrameArrival, ShutdownWakesTheLoopWithAnError) {
  SKIP_WITHOUT_RDMA();
  RdmaPair pair = connectedRdmaPair();
  Connection& server = *pair.server;
  ASSERT_GE(server.readinessDescriptor(), 0);
  EXPECT_FALSE(server.frameArrived());
  std::thread stopper([&] {
    std::this_thread::sleep_for(milliseconds(100));
    server.shutdown();
  });
  EXPECT_TRUE(readableWithin(server, 10000));
  stopper.join();
  EXPECT_THROW(server.frameArrived(), TransportError);
}

}  // namespace
}  // namespace gpupool::transport
