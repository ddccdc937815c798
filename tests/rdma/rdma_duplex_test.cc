// RdmaConnection is fullDuplex(): on each side one thread sends while another receives, both
// directions at once, with bulk on every path (inline, READ rendezvous from pinned and pageable
// memory, the client's staging ring, RDMA WRITE into an offer), and replies out of order.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "tests/rdma/rdma_pair.h"
#include "tests/rdma/rdma_test_data.h"

namespace gpupool::transport {
namespace {

using namespace testing;  // connectedRdmaPair and the test data

struct FrameShape {
  size_t words = 0;
  size_t bulkBytes = 0;
  bool pinned = false;  // bulk sent from (and received into) noted pinned memory
};

// Every path a frame's bulk can take, in turn: none, inline in one SEND, inline over several,
// READ rendezvous from pinned memory, READ rendezvous from pageable memory (staged from a client),
// several staging chunks.
FrameShape everyPathShape(int i) {
  static const FrameShape kShapes[] = {{3, 0, false},         {40, 100, false},
                                       {5, 20000, false},     {2100, 200 << 10, true},
                                       {7, 300 << 10, false}, {9, (2 << 20) + 4321, false}};
  return kShapes[i % std::size(kShapes)];
}

// Mostly small frames (many to one SEND when queued), now and then a rendezvous one.
FrameShape stressShape(int i) {
  if (i % 97 == 0) return {4, 100 << 10, i % 2 == 0};
  return {1 + size_t(i % 13), size_t(i % 5) * 611, false};
}

// A thread of a test: a failure in it (an assertion, or a TransportError once the peer gave up)
// is reported, and shuts both ends down so the other threads fail fast instead of waiting.
std::thread spawn(RdmaPair& pair, std::function<void()> body) {
  return std::thread([&pair, body = std::move(body)] {
    try {
      body();
    } catch (const std::exception& e) {
      ADD_FAILURE() << e.what();
    }
    if (::testing::Test::HasFailure()) {
      pair.client->shutdown();
      pair.server->shutdown();
    }
  });
}

uint64_t tagOf(uint32_t side, int i) { return uint64_t(side) << 32 | uint32_t(i); }

// Sends `frames` frames shaped by `shape`, each message and bulk recognizable by (side, i).
// Queued frames (sendFrameLater) are mixed in when `queueSome`.
void sendFrames(Connection& c, uint32_t side, int frames, FrameShape (*shape)(int),
                bool queueSome) {
  size_t largest = 0;
  for (int i = 0; i < frames; ++i) largest = std::max(largest, shape(i).bulkBytes);
  PinnedBuffer pinned(std::max<size_t>(largest, 1));
  std::vector<std::byte> pageable(largest);
  for (int i = 0; i < frames; ++i) {
    FrameShape s = shape(i);
    auto message = messageOf(s.words, tagOf(side, i));
    std::byte* bulk = s.pinned ? pinned.data() : pageable.data();
    fillPattern(bulk, s.bulkBytes, uint32_t(tagOf(side, i)));
    ConstBuffer part{message.data(), message.size() * 8};
    ConstBuffer bulkPart{bulk, s.bulkBytes};
    auto bulkParts = std::span(&bulkPart, s.bulkBytes ? 1 : 0);
    if (queueSome && i % 3 != 0) {
      c.sendFrameLater(std::span(&part, 1), bulkParts);
    } else {
      c.sendFrame(std::span(&part, 1), bulkParts);
    }
  }
  c.flush();
}

// Receives what sendFrames(side, frames, shape) sent and checks every byte.
void receiveFrames(Connection& c, uint32_t side, int frames, FrameShape (*shape)(int)) {
  size_t largest = 0;
  for (int i = 0; i < frames; ++i) largest = std::max(largest, shape(i).bulkBytes);
  PinnedBuffer pinned(std::max<size_t>(largest, 1));
  std::vector<std::byte> want(largest), pageable(largest);
  for (int i = 0; i < frames; ++i) {
    FrameShape s = shape(i);
    auto frame = c.receiveFrame();
    expectMessage(frame, messageOf(s.words, tagOf(side, i)));
    ASSERT_EQ(frame.bulkBytes, s.bulkBytes) << "frame " << i;
    std::byte* got = s.pinned ? pinned.data() : pageable.data();
    c.receiveBulk(got, s.bulkBytes);
    fillPattern(want.data(), s.bulkBytes, uint32_t(tagOf(side, i)));
    ASSERT_EQ(std::memcmp(got, want.data(), s.bulkBytes), 0) << "frame " << i;
  }
}

// Both directions at once, one sending and one receiving thread per side; the receivers start
// first and block in receiveFrame while their side's sender runs.
void runDuplex(int frames, FrameShape (*shape)(int), bool queueSome) {
  auto pair = connectedRdmaPair();
  ASSERT_TRUE(pair.client->fullDuplex());
  ASSERT_TRUE(pair.server->fullDuplex());
  std::thread clientReceiver = spawn(pair, [&] { receiveFrames(*pair.client, 2, frames, shape); });
  std::thread serverReceiver = spawn(pair, [&] { receiveFrames(*pair.server, 1, frames, shape); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::atomic<bool> sending{true};
  // The counters are read while both halves update them (gpupool status does so).
  std::thread watcher = spawn(pair, [&] {
    while (sending) {
      auto counters = pair.server->counters();
      ASSERT_TRUE(counters.has_value());
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  std::thread clientSender =
      spawn(pair, [&] { sendFrames(*pair.client, 1, frames, shape, queueSome); });
  std::thread serverSender =
      spawn(pair, [&] { sendFrames(*pair.server, 2, frames, shape, queueSome); });
  clientSender.join();
  serverSender.join();
  clientReceiver.join();
  serverReceiver.join();
  sending = false;
  watcher.join();
}

TEST(RdmaDuplex, ReceiverBlocksWhileSenderSendsBulkOnEveryPath) {
  SKIP_WITHOUT_RDMA();
  runDuplex(24, everyPathShape, false);
}

TEST(RdmaDuplex, TwoThreadsPerSideThousandsOfFrames) {
  SKIP_WITHOUT_RDMA();
  runDuplex(3000, stressShape, true);
}

// The client's receiving thread already waits when its sending thread offers a destination and
// sends the request: the reply's bulk is still WRITTEN there.
TEST(RdmaDuplex, OfferMadeWhileReceiverWaits) {
  SKIP_WITHOUT_RDMA();
  auto pair = connectedRdmaPair();
  constexpr size_t kBytes = (1 << 20) + 24;
  PinnedBuffer destination(kBytes);
  std::vector<std::byte> want(kBytes);
  fillPattern(want.data(), kBytes, 77);
  std::thread clientReceiver = spawn(pair, [&] {
    auto frame = pair.client->receiveFrame();
    expectMessage(frame, messageOf(2, 9));
    ASSERT_EQ(frame.bulkBytes, kBytes);
    pair.client->receiveBulk(destination.data(), kBytes);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  pair.client->expectBulkInto(destination.data(), kBytes);
  auto request = messageOf(1, 8);
  ConstBuffer part{request.data(), 8};
  pair.client->sendFrame(std::span(&part, 1), {});
  expectMessage(pair.server->receiveFrame(), request);
  auto reply = messageOf(2, 9);
  ConstBuffer replyPart{reply.data(), reply.size() * 8};
  ConstBuffer bulk{want.data(), kBytes};
  pair.server->sendFrame(std::span(&replyPart, 1), std::span(&bulk, 1));
  clientReceiver.join();
  EXPECT_EQ(std::memcmp(destination.data(), want.data(), kBytes), 0);
  EXPECT_EQ(rdmaStatsOf(*pair.client)->bulkBytesReceivedWritten, kBytes);
}

// Requests stream in while the server answers them in batches, last first, with bulk that names
// the request; the client's receiving thread matches every answer to its request.
TEST(RdmaDuplex, ServerAnswersOutOfOrder) {
  SKIP_WITHOUT_RDMA();
  auto pair = connectedRdmaPair();
  constexpr int kRequests = 240;
  constexpr int kBatch = 8;
  auto replyBytes = [](int id) { return id % 4 == 0 ? size_t(90 << 10) : size_t(64 + id); };
  std::mutex mutex;
  std::condition_variable arrived;
  std::deque<int> unanswered;
  std::thread serverReceiver = spawn(pair, [&] {
    for (int i = 0; i < kRequests; ++i) {
      auto frame = pair.server->receiveFrame();
      ASSERT_EQ(frame.message.size(), 8u);
      uint64_t id = 0;
      std::memcpy(&id, frame.message.data(), 8);
      std::lock_guard lock(mutex);
      unanswered.push_back(int(id));
      arrived.notify_one();
    }
  });
  std::thread serverSender = spawn(pair, [&] {
    std::vector<std::byte> bulk;
    for (int answered = 0; answered < kRequests;) {
      std::vector<int> batch;
      {
        std::unique_lock lock(mutex);
        size_t want = size_t(std::min(kBatch, kRequests - answered));
        while (unanswered.size() < want) {
          if (::testing::Test::HasFailure()) return;
          arrived.wait_for(lock, std::chrono::milliseconds(100));
        }
        while (!unanswered.empty() && batch.size() < size_t(kBatch)) {
          batch.push_back(unanswered.front());
          unanswered.pop_front();
        }
      }
      for (auto it = batch.rbegin(); it != batch.rend(); ++it) {
        uint64_t id = uint64_t(*it);
        bulk.resize(replyBytes(*it));
        fillPattern(bulk.data(), bulk.size(), uint32_t(id));
        ConstBuffer part{&id, 8}, bulkPart{bulk.data(), bulk.size()};
        pair.server->sendFrame(std::span(&part, 1), std::span(&bulkPart, 1));
      }
      answered += int(batch.size());
    }
  });
  std::vector<bool> answered(kRequests, false);
  std::thread clientReceiver = spawn(pair, [&] {
    std::vector<std::byte> got, want;
    for (int i = 0; i < kRequests; ++i) {
      auto frame = pair.client->receiveFrame();
      ASSERT_EQ(frame.message.size(), 8u);
      uint64_t id = 0;
      std::memcpy(&id, frame.message.data(), 8);
      ASSERT_LT(id, uint64_t(kRequests));
      ASSERT_FALSE(answered[id]) << "answered twice: " << id;
      ASSERT_EQ(frame.bulkBytes, replyBytes(int(id)));
      got.resize(frame.bulkBytes);
      want.resize(frame.bulkBytes);
      pair.client->receiveBulk(got.data(), got.size());
      fillPattern(want.data(), want.size(), uint32_t(id));
      ASSERT_EQ(got, want) << "answer " << id;
      answered[id] = true;
    }
  });
  for (int i = 0; i < kRequests; ++i) {
    uint64_t id = uint64_t(i);
    ConstBuffer part{&id, 8};
    pair.client->sendFrame(std::span(&part, 1), {});
  }
  serverReceiver.join();
  serverSender.join();
  clientReceiver.join();
  EXPECT_TRUE(std::all_of(answered.begin(), answered.end(), [](bool b) { return b; }));
}

// One half's failure ends the other half's wait: the sender gives up waiting for the peer to read
// its bulk while the receiver waits, without a timeout, for a frame that will never come.
TEST(RdmaDuplex, TimeoutOfTheSenderEndsTheReceiversWait) {
  SKIP_WITHOUT_RDMA();
  auto pair = connectedRdmaPair();
  pair.client->setReceiveTimeoutMs(0);
  auto receiver = std::async(std::launch::async, [&] { pair.client->receiveFrame(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  pair.client->setReceiveTimeoutMs(300);
  PinnedBuffer bulk(200 << 10);
  auto message = messageOf(1, 1);
  ConstBuffer part{message.data(), 8}, bulkPart{bulk.data(), 200 << 10};
  try {
    pair.client->sendFrame(std::span(&part, 1), std::span(&bulkPart, 1));  // never read
    ADD_FAILURE() << "the send did not time out";
  } catch (const TransportError& e) {
    EXPECT_EQ(e.kind(), TransportError::Kind::kTimeout) << e.what();
  }
  ASSERT_EQ(receiver.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_THROW(receiver.get(), TransportError);
}

}  // namespace
}  // namespace gpupool::transport
