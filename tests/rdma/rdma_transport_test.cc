// The RDMA transport over a real verbs device (soft-RoCE in ../shared/rdma-vm): framing, flow
// control with many outstanding frames, messages larger than one SEND buffer, bulk from 1 byte to
// 256 MiB at odd offsets, and proof from the counters that large pinned bulk moved without an
// intermediate copy.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "tests/rdma/rdma_pair.h"
#include "tests/rdma/rdma_test_data.h"

namespace gpupool::transport {
namespace {

using namespace testing;  // connectedRdmaPair and the test data

void sendMessage(Connection& c, const std::vector<uint64_t>& m,
                 std::span<const ConstBuffer> bulk = {}) {
  ConstBuffer part{m.data(), m.size() * 8};
  c.sendFrame(std::span(&part, 1), bulk);
}

TEST(RdmaTransport, FrameWithoutBulkRoundTrips) {
  SKIP_WITHOUT_RDMA();
  auto pair = connectedRdmaPair();
  EXPECT_EQ(pair.client->kind(), "rdma");
  EXPECT_NE(pair.server->peer(), "unknown");
  auto request = messageOf(5, 1);
  sendMessage(*pair.client, request);
  auto frame = pair.server->receiveFrame();
  expectMessage(frame, request);
  EXPECT_EQ(frame.bulkBytes, 0u);
  auto reply = messageOf(3, 2);
  sendMessage(*pair.server, reply);
  expectMessage(pair.client->receiveFrame(), reply);
}

// A small frame (a synchronous call's request or reply) is copied into its work request at post
// time; one larger than the queue pair's inline size is sent from the registered SEND buffer.
TEST(RdmaTransport, SmallFramesGoInlineLargerOnesFromRegisteredMemory) {
  SKIP_WITHOUT_RDMA();
  auto pair = connectedRdmaPair();
  auto small = messageOf(5, 1);   // 40 bytes, 80 with the wire header
  auto large = messageOf(64, 2);  // 512 bytes, more than any inline size asked for here
  sendMessage(*pair.client, small);
  expectMessage(pair.server->receiveFrame(), small);
  sendMessage(*pair.client, large);
  expectMessage(pair.server->receiveFrame(), large);
  auto stats = rdmaStatsOf(*pair.client);
  EXPECT_EQ(stats->sends, 2u);
  EXPECT_EQ(stats->inlineSends, 1u) << "soft-RoCE grants inline data: the small frame goes inline";
}

TEST(RdmaTransport, ManyOutstandingFramesWaitForCreditsAndArriveInOrder) {
  SKIP_WITHOUT_RDMA();
  auto pair = connectedRdmaPair();
  constexpr int kFrames = 400;  // far more than the 32 receive buffers
  std::thread sender([&] {
    for (int i = 0; i < kFrames; ++i) {
      auto m = messageOf(1 + i % 7, i);
      std::vector<std::byte> bulk(i % 5 == 0 ? 100 + i : 0);
      fillPattern(bulk.data(), bulk.size(), i);
      ConstBuffer b{bulk.data(), bulk.size()};
      sendMessage(*pair.client, m, std::span(&b, bulk.empty() ? 0 : 1));
    }
  });
  // The receiver starts late, so the sender must stop at the credit limit instead of overrunning.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  for (int i = 0; i < kFrames; ++i) {
    auto frame = pair.server->receiveFrame();
    expectMessage(frame, messageOf(1 + i % 7, i));
    std::vector<std::byte> want(i % 5 == 0 ? 100 + i : 0), got(want.size());
    fillPattern(want.data(), want.size(), i);
    ASSERT_EQ(frame.bulkBytes, want.size());
    pair.server->receiveBulk(got.data(), got.size());
    ASSERT_EQ(got, want) << "frame " << i;
  }
  sender.join();
  EXPECT_GT(rdmaStatsOf(*pair.client)->creditWaits, 0u);
}

TEST(RdmaTransport, MessageLargerThanOneBufferArrivesWhole) {
  SKIP_WITHOUT_RDMA();
  auto pair = connectedRdmaPair();
  // Three parts, gathered: 100 KiB spans seven 16 KiB SEND buffers.
  auto a = messageOf(1000, 1), b = messageOf(11000, 2), c = messageOf(801, 3);
  ConstBuffer parts[] = {
      {a.data(), a.size() * 8}, {b.data(), b.size() * 8}, {c.data(), c.size() * 8}};
  pair.client->sendFrame(parts, {});
  auto frame = pair.server->receiveFrame();
  std::vector<uint64_t> all;
  for (auto* v : {&a, &b, &c}) all.insert(all.end(), v->begin(), v->end());
  expectMessage(frame, all);
  // And the next frame after it is intact.
  auto next = messageOf(2, 9);
  sendMessage(*pair.client, next);
  expectMessage(pair.server->receiveFrame(), next);
}

// One frame of `size` bulk bytes from src+offset into dst+offset, read in uneven pieces.
void transferBulk(Connection& from, Connection& to, std::byte* src, std::byte* dst, size_t size) {
  auto m = messageOf(2, size);
  ConstBuffer part{src, size};
  std::thread sender([&] { sendMessage(from, m, std::span(&part, 1)); });
  auto frame = to.receiveFrame();
  EXPECT_EQ(frame.bulkBytes, size);
  size_t done = 0, piece = 1;
  while (done < size) {
    size_t n = std::min(size - done, piece);
    to.receiveBulk(dst + done, n);
    done += n;
    piece = piece * 3 + 5;  // 1, 8, 29, ... crosses inline/remote piece boundaries
  }
  EXPECT_EQ(to.pendingBulk(), 0u);
  sender.join();
}

TEST(RdmaTransport, PageableBulkFromOneByteToSixteenMiBAtOddOffsets) {
  SKIP_WITHOUT_RDMA();
  auto pair = connectedRdmaPair();
  const size_t sizes[] = {1,
                          7,
                          4095,
                          16 * 1024 + 1,
                          64 * 1024 - 1,
                          64 * 1024,
                          1 * 1024 * 1024 + 3,
                          16 * 1024 * 1024 + 5};
  for (size_t size : sizes) {
    SCOPED_TRACE("size " + std::to_string(size));
    std::vector<std::byte> src(size + 3), dst(size + 5, std::byte{0xee});
    fillPattern(src.data() + 3, size, static_cast<uint32_t>(size));
    const auto before = *rdmaStatsOf(*pair.server);
    transferBulk(*pair.client, *pair.server, src.data() + 3, dst.data() + 1, size);
    ASSERT_EQ(std::memcmp(dst.data() + 1, src.data() + 3, size), 0);
    EXPECT_EQ(dst[0], std::byte{0xee});  // nothing written outside the destination
    EXPECT_EQ(dst[size + 1], std::byte{0xee});
    const auto& after = *rdmaStatsOf(*pair.server);
    if (size >= kRdmaRendezvousBytes) {
      EXPECT_EQ(after.bulkBytesReceivedZeroCopy - before.bulkBytesReceivedZeroCopy, size);
      EXPECT_EQ(after.bulkBytesReceivedInline, before.bulkBytesReceivedInline);
    } else {
      EXPECT_EQ(after.bulkBytesReceivedInline - before.bulkBytesReceivedInline, size);
    }
  }
  // The client's pageable memory went through its staging ring, never registered itself; the
  // server (an accepted connection) READ straight into its destination, registered per transfer.
  const auto& client = *rdmaStatsOf(*pair.client);
  const auto& server = *rdmaStatsOf(*pair.server);
  uint64_t large = 0;
  for (size_t size : sizes) large += size >= kRdmaRendezvousBytes ? size : 0;
  EXPECT_EQ(client.bulkBytesSentStaged, large);
  EXPECT_EQ(client.bulkBytesSentZeroCopy, 0u);
  EXPECT_EQ(client.registrations, 0u);
  EXPECT_EQ(server.registrations, server.deregistrations);
  EXPECT_EQ(server.registrationCacheHits, 0u);
}

// Device-to-host into pageable memory: the client READs through its staging ring (several laps of
// it for the larger sizes) and copies out; results exact at odd offsets, nothing written outside.
TEST(RdmaTransport, PageableReceiveGoesThroughTheStagingRingAtOddOffsets) {
  SKIP_WITHOUT_RDMA();
  auto pair = connectedRdmaPair();
  const size_t sizes[] = {kRdmaRendezvousBytes - 1,
                          kRdmaRendezvousBytes,
                          kRdmaStagingChunkBytes - 1,
                          kRdmaStagingChunkBytes + 1,
                          kRdmaStagingChunks * kRdmaStagingChunkBytes + 7,
                          16 * 1024 * 1024 + 5};
  uint64_t staged = 0;
  for (size_t size : sizes) {
    SCOPED_TRACE("size " + std::to_string(size));
    std::vector<std::byte> src(size + 3), dst(size + 5, std::byte{0xee});
    fillPattern(src.data() + 3, size, static_cast<uint32_t>(size) + 9);
    transferBulk(*pair.server, *pair.client, src.data() + 3, dst.data() + 1, size);
    ASSERT_EQ(std::memcmp(dst.data() + 1, src.data() + 3, size), 0);
    EXPECT_EQ(dst[0], std::byte{0xee});
    EXPECT_EQ(dst[size + 1], std::byte{0xee});
    if (size >= kRdmaRendezvousBytes) staged += size;
  }
  const auto& client = *rdmaStatsOf(*pair.client);
  EXPECT_EQ(client.bulkBytesReceivedStaged, staged);
  EXPECT_EQ(client.bulkBytesReceivedZeroCopy, 0u);
  EXPECT_EQ(client.registrations, 0u);
  // The server sent from its own memory, registered per transfer: zero-copy on its side.
  EXPECT_EQ(rdmaStatsOf(*pair.server)->bulkBytesSentZeroCopy, staged);
  EXPECT_EQ(rdmaStatsOf(*pair.server)->bulkBytesSentStaged, 0u);
}

// The proof that pinned copies use no intermediate copy: every bulk byte is counted as
// moved by RDMA READ on both sides, none as copied through SEND buffers, and each pinned buffer is
// registered exactly once however many transfers use it.
TEST(RdmaTransport, PinnedBulkMovesZeroCopyAndRegistersOnce) {
  SKIP_WITHOUT_RDMA();
  auto pair = connectedRdmaPair();
  constexpr size_t kSize = 4u << 20;
  PinnedBuffer src(kSize + 4096), dst(kSize + 4096);
  for (int round = 0; round < 3; ++round) {
    size_t offset = 1 + round * 13, size = kSize - round * 1001;
    fillPattern(src.data() + offset, size, round + 77);
    transferBulk(*pair.client, *pair.server, src.data() + offset, dst.data() + offset + 2, size);
    ASSERT_EQ(std::memcmp(dst.data() + offset + 2, src.data() + offset, size), 0);
  }
  const auto& sender = *rdmaStatsOf(*pair.client);
  const auto& receiver = *rdmaStatsOf(*pair.server);
  EXPECT_EQ(sender.bulkBytesSentInline, 0u);
  EXPECT_EQ(receiver.bulkBytesReceivedInline, 0u);
  EXPECT_EQ(sender.bulkBytesSentStaged, 0u);
  EXPECT_EQ(sender.bulkBytesSentZeroCopy, receiver.bulkBytesReceivedZeroCopy);
  EXPECT_EQ(receiver.bulkBytesReceivedZeroCopy, 3 * kSize - 1001 - 2002);
  EXPECT_EQ(sender.registrations, 1u);
  EXPECT_EQ(receiver.registrations, 1u);
  EXPECT_EQ(sender.registrationCacheHits, 2u);
  // The receiver reads each frame in many receiveBulk calls; every one after the first is a hit.
  EXPECT_GE(receiver.registrationCacheHits, 2u);
  EXPECT_EQ(receiver.deregistrations, 0u);  // kept until the range is forgotten or we close
}

// The same proof for device-to-host: the server's reply bulk lands in the client's pinned
// destination by RDMA READ, with no inline or staged bytes on the client, at odd offsets and sizes
// from just over the rendezvous threshold to 64 MiB; the destination is registered once.
TEST(RdmaTransport, PinnedReceiveMovesZeroCopyAndRegistersOnce) {
  SKIP_WITHOUT_RDMA();
  auto pair = connectedRdmaPair(240000);
  constexpr size_t kLargest = 64u << 20;
  PinnedBuffer dst(kLargest + 4096);
  std::vector<std::byte> src(kLargest + 64);
  const size_t sizes[] = {kRdmaRendezvousBytes + 1, (1u << 20) + 3, (16u << 20) - 5, kLargest};
  uint64_t moved = 0;
  for (size_t i = 0; i < std::size(sizes); ++i) {
    size_t size = sizes[i], offset = 1 + i * 7;
    SCOPED_TRACE("size " + std::to_string(size));
    fillPattern(src.data() + 5, size, uint32_t(i) + 31);
    transferBulk(*pair.server, *pair.client, src.data() + 5, dst.data() + offset, size);
    ASSERT_EQ(std::memcmp(dst.data() + offset, src.data() + 5, size), 0);
    moved += size;
  }
  const auto& client = *rdmaStatsOf(*pair.client);
  EXPECT_EQ(client.bulkBytesReceivedInline, 0u);
  EXPECT_EQ(client.bulkBytesReceivedStaged, 0u);
  EXPECT_EQ(client.bulkBytesReceivedZeroCopy, moved);
  EXPECT_EQ(client.registrations, 1u);
  EXPECT_EQ(client.deregistrations, 0u);
}

TEST(RdmaTransport, ForgottenPinnedRangeIsRegisteredAgain) {
  SKIP_WITHOUT_RDMA();
  auto pair = connectedRdmaPair();
  constexpr size_t kSize = 256u << 10;
  std::vector<std::byte> dst(kSize);
  for (int round = 0; round < 2; ++round) {
    PinnedBuffer src(kSize);  // may land at the same address as the previous round's
    fillPattern(src.data(), kSize, round);
    transferBulk(*pair.client, *pair.server, src.data(), dst.data(), kSize);
    ASSERT_EQ(std::memcmp(dst.data(), src.data(), kSize), 0) << "round " << round;
  }
  EXPECT_EQ(rdmaStatsOf(*pair.client)->registrations, 2u);
  EXPECT_EQ(rdmaStatsOf(*pair.client)->registrationCacheHits, 0u);
}

TEST(RdmaTransport, MixedInlineAndRemotePartsAndDiscard) {
  SKIP_WITHOUT_RDMA();
  auto pair = connectedRdmaPair();
  const size_t sizes[] = {10, 300 * 1024 + 7, 33, 20000, 70000, 1};
  std::vector<std::vector<std::byte>> parts;
  std::vector<ConstBuffer> buffers;
  std::vector<std::byte> all;
  for (size_t i = 0; i < std::size(sizes); ++i) {
    parts.emplace_back(sizes[i]);
    fillPattern(parts.back().data(), sizes[i], 500 + i);
    all.insert(all.end(), parts.back().begin(), parts.back().end());
  }
  for (auto& p : parts) buffers.push_back({p.data(), p.size()});
  auto m = messageOf(4, 4);
  std::thread sender([&] { sendMessage(*pair.client, m, buffers); });
  auto frame = pair.server->receiveFrame();
  ASSERT_EQ(frame.bulkBytes, all.size());
  // Read the first 5 bytes, skip into the middle of the big part, read across the rest.
  std::vector<std::byte> head(5), tail(all.size() - 200000);
  pair.server->receiveBulk(head.data(), head.size());
  pair.server->discardBulk(200000 - head.size());
  pair.server->receiveBulk(tail.data(), tail.size());
  sender.join();
  EXPECT_EQ(std::memcmp(head.data(), all.data(), head.size()), 0);
  EXPECT_EQ(std::memcmp(tail.data(), all.data() + 200000, tail.size()), 0);
  // The connection is still in step.
  sendMessage(*pair.server, m);
  expectMessage(pair.client->receiveFrame(), m);
}

TEST(RdmaTransport, QuarterGiBPinnedToPageableAtOddOffsets) {
  SKIP_WITHOUT_RDMA();
  auto pair = connectedRdmaPair(240000);
  constexpr size_t kSize = 256u << 20;
  PinnedBuffer src(kSize + 64);
  std::vector<std::byte> dst(kSize + 64);
  // A sparse pattern: filling 256 MiB byte by byte is slow under emulation.
  for (size_t i = 0; i < kSize; i += 4096) src.data()[5 + i] = std::byte(i / 4096 * 7 + 1);
  src.data()[5 + kSize - 1] = std::byte{0x5a};
  transferBulk(*pair.server, *pair.client, src.data() + 5, dst.data() + 3, kSize);
  EXPECT_EQ(std::memcmp(dst.data() + 3, src.data() + 5, kSize), 0);
  // The client's pageable destination is filled through its staging ring.
  EXPECT_EQ(rdmaStatsOf(*pair.client)->bulkBytesReceivedStaged, kSize);
  EXPECT_EQ(rdmaStatsOf(*pair.server)->bulkBytesSentZeroCopy, kSize);
}

TEST(RdmaTransport, RequestReplyPingPong) {
  SKIP_WITHOUT_RDMA();
  auto pair = connectedRdmaPair();
  constexpr int kRounds = 500;
  std::thread server([&] {
    for (int i = 0; i < kRounds; ++i) {
      auto frame = pair.server->receiveFrame();
      std::vector<uint64_t> echo(frame.message.size() / 8);
      std::memcpy(echo.data(), frame.message.data(), frame.message.size());
      echo[0]++;
      sendMessage(*pair.server, echo);
    }
  });
  for (int i = 0; i < kRounds; ++i) {
    auto m = messageOf(3, i);
    sendMessage(*pair.client, m);
    auto frame = pair.client->receiveFrame();
    m[0]++;
    expectMessage(frame, m);
  }
  server.join();
}

TEST(RdmaTransport, WithoutVerbsConnectFailsWithTheReason) {
  std::string reason = rdmaUnavailableReason();
  if (reason.empty()) GTEST_SKIP() << "verbs are usable here";
  try {
    rdmaConnect(Endpoint{"rdma", "127.0.0.1", 1}, 1000);
    FAIL() << "rdmaConnect succeeded without a verbs device";
  } catch (const TransportError& e) {
    EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gpupool::transport
