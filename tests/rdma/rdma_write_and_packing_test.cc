// Device→host bulk RDMA WRITTEN by the sender into a pinned destination the receiver offered
// (Connection::expectBulkInto), and small queued frames packed into shared SENDs
// (sendFrameLater/flush), over a real verbs device. The counters prove which path the bytes took.
#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

#include "tests/rdma/rdma_pair.h"
#include "tests/rdma/rdma_request_reply.h"
#include "tests/rdma/rdma_test_data.h"

namespace gpupool::transport {
namespace {

using namespace testing;  // connectedRdmaPair and the test data

TEST(RdmaBulkWrite, OfferedPinnedDestinationIsWrittenByThePeerAtOddOffsets) {
  SKIP_WITHOUT_RDMA();
  auto pair = connectedRdmaPair(240000);
  constexpr size_t kLargest = 64u << 20;
  PinnedBuffer dst(kLargest + 4096);
  std::vector<std::byte> src(kLargest + 64);  // the server's side: pageable, like a device view
  const size_t sizes[] = {kRdmaRendezvousBytes, (1u << 20) + 3, (16u << 20) - 5, kLargest};
  uint64_t moved = 0;
  for (size_t i = 0; i < std::size(sizes); ++i) {
    size_t size = sizes[i], offset = 3 + i * 11;
    SCOPED_TRACE("size " + std::to_string(size));
    fillPattern(src.data() + 7, size, uint32_t(i) + 5);
    ConstBuffer part{src.data() + 7, size};
    requestReply(*pair.client, *pair.server, dst.data() + offset, size, std::span(&part, 1),
                 dst.data() + offset, size);
    ASSERT_EQ(std::memcmp(dst.data() + offset, src.data() + 7, size), 0);
    moved += size;
  }
  const auto& client = *rdmaStatsOf(*pair.client);
  const auto& server = *rdmaStatsOf(*pair.server);
  EXPECT_EQ(client.bulkBytesReceivedWritten, moved);
  // No other path carried any of it: no READ, no SEND buffer, no staging ring.
  EXPECT_EQ(client.bulkBytesReceivedZeroCopy, 0u);
  EXPECT_EQ(client.bulkBytesReceivedInline, 0u);
  EXPECT_EQ(client.bulkBytesReceivedStaged, 0u);
  EXPECT_EQ(server.bulkBytesSentByWrite, moved);
  EXPECT_EQ(server.bulkBytesSentZeroCopy, 0u);
  // The client registered its pinned range once; later offers were cache hits.
  EXPECT_EQ(client.registrations, 1u);
  EXPECT_EQ(client.deregistrations, 0u);
}

TEST(RdmaBulkWrite, ReplyInSeveralPartsIsWrittenBackToBack) {
  SKIP_WITHOUT_RDMA();
  auto pair = connectedRdmaPair();
  PinnedBuffer dst(8u << 20);
  std::vector<std::byte> a(70000), b(5), c(3u << 20);
  fillPattern(a.data(), a.size(), 1);
  fillPattern(b.data(), b.size(), 2);
  fillPattern(c.data(), c.size(), 3);
  ConstBuffer parts[] = {{a.data(), a.size()}, {b.data(), b.size()}, {c.data(), c.size()}};
  size_t total = a.size() + b.size() + c.size();
  requestReply(*pair.client, *pair.server, dst.data() + 1, total, parts, dst.data() + 1, total);
  EXPECT_EQ(std::memcmp(dst.data() + 1, a.data(), a.size()), 0);
  EXPECT_EQ(std::memcmp(dst.data() + 1 + a.size(), b.data(), b.size()), 0);
  EXPECT_EQ(std::memcmp(dst.data() + 1 + a.size() + b.size(), c.data(), c.size()), 0);
  EXPECT_EQ(rdmaStatsOf(*pair.client)->bulkBytesReceivedWritten, total);
}

TEST(RdmaBulkWrite, OfferHoldsForTheNextFrameOnlyAndOnlyForItsExactSize) {
  SKIP_WITHOUT_RDMA();
  auto pair = connectedRdmaPair();
  constexpr size_t kSize = 1u << 20;
  PinnedBuffer dst(2 * kSize);
  std::vector<std::byte> src(2 * kSize);
  fillPattern(src.data(), src.size(), 9);

  // A reply of another size ignores the offer: it goes by READ, and arrives intact.
  ConstBuffer shorter{src.data(), kSize - 8};
  requestReply(*pair.client, *pair.server, dst.data(), kSize, std::span(&shorter, 1), dst.data(),
               kSize - 8);
  EXPECT_EQ(std::memcmp(dst.data(), src.data(), kSize - 8), 0);
  EXPECT_EQ(rdmaStatsOf(*pair.client)->bulkBytesReceivedWritten, 0u);
  EXPECT_EQ(rdmaStatsOf(*pair.client)->bulkBytesReceivedZeroCopy, kSize - 8);

  // An offer answered by a frame without bulk (an error reply) is spent: the next frame of the
  // offered size, with no offer of its own, is not written.
  pair.client->expectBulkInto(dst.data(), kSize);
  auto request = messageOf(1, 1);
  ConstBuffer r{request.data(), 8};
  pair.client->sendFrame(std::span(&r, 1), {});
  pair.server->receiveFrame();
  auto error = messageOf(1, 2);
  ConstBuffer e{error.data(), 8};
  pair.server->sendFrame(std::span(&e, 1), {});
  EXPECT_EQ(pair.client->receiveFrame().bulkBytes, 0u);
  ConstBuffer exact{src.data() + kSize, kSize};
  requestReply(*pair.client, *pair.server, nullptr, 0, std::span(&exact, 1), dst.data() + kSize,
               kSize);
  EXPECT_EQ(std::memcmp(dst.data() + kSize, src.data() + kSize, kSize), 0);
  EXPECT_EQ(rdmaStatsOf(*pair.client)->bulkBytesReceivedWritten, 0u);

  // Pageable memory is never offered: its pages could be handed to the peer only for one call.
  std::vector<std::byte> pageable(kSize);
  requestReply(*pair.client, *pair.server, pageable.data(), kSize, std::span(&exact, 1),
               pageable.data(), kSize);
  EXPECT_EQ(std::memcmp(pageable.data(), src.data() + kSize, kSize), 0);
  EXPECT_EQ(rdmaStatsOf(*pair.client)->bulkBytesReceivedWritten, 0u);
  EXPECT_EQ(rdmaStatsOf(*pair.server)->bulkBytesSentByWrite, 0u);
}

// The cuda backend's pipelined device reads: bulk streamed in chunks (startFrame/sendBulk), each
// chunk's buffer reused at once. With an offer the chunks are written back to back into it; without
// one, large chunks go by READ and small ones inline.
TEST(RdmaBulkWrite, StreamedBulkIsWrittenChunkByChunkOrReadWithoutAnOffer) {
  SKIP_WITHOUT_RDMA();
  auto pair = connectedRdmaPair();
  ASSERT_TRUE(pair.server->streamsBulk());
  const size_t chunks[] = {4u << 20, 4u << 20, 70000, 100, (1u << 20) + 1};
  size_t total = 0;
  for (size_t c : chunks) total += c;
  PinnedBuffer dst(total + 16);
  std::vector<std::byte> want(total), slot(4u << 20);
  fillPattern(want.data(), total, 77);
  for (bool offered : {true, false}) {
    SCOPED_TRACE(offered ? "offered" : "not offered");
    std::memset(dst.data(), 0, total + 16);
    if (offered) pair.client->expectBulkInto(dst.data() + 3, total);
    auto request = messageOf(1, 5);
    ConstBuffer r{request.data(), 8};
    pair.client->sendFrame(std::span(&r, 1), {});
    pair.server->receiveFrame();
    std::thread sender([&] {
      auto reply = messageOf(2, 6);
      ConstBuffer m{reply.data(), 16};
      pair.server->startFrame(std::span(&m, 1), total);
      size_t offset = 0;
      for (size_t c : chunks) {
        // One staging slot, refilled for every chunk: sendBulk must be done with it on return.
        std::memcpy(slot.data(), want.data() + offset, c);
        pair.server->sendBulk(slot.data(), c);
        std::memset(slot.data(), 0xee, c);
        offset += c;
      }
    });
    auto frame = pair.client->receiveFrame();
    ASSERT_EQ(frame.bulkBytes, total);
    pair.client->receiveBulk(dst.data() + 3, total);
    sender.join();
    EXPECT_EQ(std::memcmp(dst.data() + 3, want.data(), total), 0);
  }
  EXPECT_EQ(rdmaStatsOf(*pair.client)->bulkBytesReceivedWritten, total);
  EXPECT_EQ(rdmaStatsOf(*pair.server)->bulkBytesSentByWrite, total);
  // The second round: everything at or over the rendezvous size by READ, the 100 bytes inline.
  EXPECT_EQ(rdmaStatsOf(*pair.client)->bulkBytesReceivedZeroCopy, total - 100);
  EXPECT_EQ(rdmaStatsOf(*pair.client)->bulkBytesReceivedInline, 100u);
}

TEST(RdmaPacking, QueuedFramesShareSendsAndArriveInOrderWithTheirBulk) {
  SKIP_WITHOUT_RDMA();
  auto pair = connectedRdmaPair();
  constexpr int kFrames = 3000;
  auto bulkOf = [](int i) {
    std::vector<std::byte> b(i % 3 == 0 ? size_t(1 + i % 301) : 0);
    fillPattern(b.data(), b.size(), uint32_t(i));
    return b;
  };
  std::thread sender([&] {
    for (int i = 0; i < kFrames; ++i) {
      auto m = messageOf(1 + i % 9, i);
      auto b = bulkOf(i);
      ConstBuffer mp{m.data(), m.size() * 8}, bp{b.data(), b.size()};
      if (i % 500 == 499) {
        // An ordinary send, larger than one SEND buffer, keeps its place after the queued ones.
        auto big = messageOf(3000, i);
        ConstBuffer gp{big.data(), big.size() * 8};
        pair.client->sendFrame(std::span(&gp, 1), {});
        continue;
      }
      pair.client->sendFrameLater(std::span(&mp, 1), std::span(&bp, b.empty() ? 0 : 1));
      EXPECT_GT(pair.client->queuedBytes(), 0u);
      if (i % 97 == 0) {
        pair.client->flush();
        EXPECT_EQ(pair.client->queuedBytes(), 0u);
      }
    }
    pair.client->flush();
  });
  for (int i = 0; i < kFrames; ++i) {
    auto frame = pair.server->receiveFrame();
    if (i % 500 == 499) {
      expectMessage(frame, messageOf(3000, i));
      continue;
    }
    expectMessage(frame, messageOf(1 + i % 9, i));
    auto want = bulkOf(i);
    ASSERT_EQ(frame.bulkBytes, want.size()) << "frame " << i;
    std::vector<std::byte> got(want.size());
    // Read in two pieces: a packed frame's bulk behaves like any other.
    size_t half = got.size() / 2;
    pair.server->receiveBulk(got.data(), half);
    pair.server->receiveBulk(got.data() + half, got.size() - half);
    ASSERT_EQ(got, want) << "frame " << i;
  }
  sender.join();
  const auto& client = *rdmaStatsOf(*pair.client);
  EXPECT_EQ(client.framesPacked, uint64_t(kFrames - kFrames / 500));
  // Dozens of frames per SEND, not one each.
  EXPECT_LT(client.sends, uint64_t(kFrames / 10));
  // Messages in one buffer were handed out in place, without reassembly.
  EXPECT_GE(rdmaStatsOf(*pair.server)->messagesReadInPlace, uint64_t(kFrames - kFrames / 500));
}

TEST(RdmaPacking, DiscardedBulkOfPackedFramesKeepsTheStreamInStep) {
  SKIP_WITHOUT_RDMA();
  auto pair = connectedRdmaPair();
  for (int i = 0; i < 200; ++i) {
    auto m = messageOf(2, i);
    std::vector<std::byte> b(100 + i);
    fillPattern(b.data(), b.size(), uint32_t(i));
    ConstBuffer mp{m.data(), 16}, bp{b.data(), b.size()};
    pair.client->sendFrameLater(std::span(&mp, 1), std::span(&bp, 1));
  }
  pair.client->flush();
  for (int i = 0; i < 200; ++i) {
    auto frame = pair.server->receiveFrame();
    expectMessage(frame, messageOf(2, i));
    if (i % 2) {
      pair.server->discardBulk(frame.bulkBytes);
    } else {
      std::vector<std::byte> want(100 + i), got(100 + i);
      fillPattern(want.data(), want.size(), uint32_t(i));
      pair.server->receiveBulk(got.data(), got.size());
      ASSERT_EQ(got, want);
    }
  }
  // The receive buffers all came back: a further burst far larger than the window still flows.
  for (int i = 0; i < 2000; ++i) {
    auto m = messageOf(1, i);
    ConstBuffer mp{m.data(), 8};
    pair.client->sendFrameLater(std::span(&mp, 1), {});
  }
  std::thread flusher([&] { pair.client->flush(); });
  for (int i = 0; i < 2000; ++i) expectMessage(pair.server->receiveFrame(), messageOf(1, i));
  flusher.join();
}

}  // namespace
}  // namespace gpupool::transport
