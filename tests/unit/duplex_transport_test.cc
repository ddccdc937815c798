// Full duplex over the byte-stream transports (TCP, TLS, shared memory) on loopback: on each side
// one thread receives while another sends, both directions at once, every way of sending mixed in;
// shutdown() still wakes a blocked reader while a writer is mid-stream; and the receive timeout
// still fires.
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "loopback_pair.h"
#include "transport/transport_factory.h"

namespace gpupool::transport {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

// The certificate names 127.0.0.1 only: the same server reached as "localhost" is refused, so the
// client still checks the name.
TEST(TlsTransportTest, CertificateWithoutTheHostNameIsRefused) {
  auto listener = listenOnLoopback("tls");
  std::string error;
  Endpoint endpoint = parseEndpoint(listener->url(), &error).value();
  endpoint.host = "localhost";
  auto connecting = std::async(std::launch::async, [&] { return connectEndpoint(endpoint, 5000); });
  auto server = listener->accept();
  server->setReceiveTimeoutMs(5000);
  EXPECT_THROW(server->receiveFrame(), TransportError);
  try {
    connecting.get();
    ADD_FAILURE() << "connected to a server whose certificate does not name localhost";
  } catch (const TransportError& e) {
    EXPECT_EQ(e.kind(), TransportError::Kind::kUnavailable);
    EXPECT_NE(std::string(e.what()).find("certificate verify failed"), std::string::npos)
        << e.what();
  }
}

// An accepted connection handshakes on its first send or receive: here both come at once, from
// two threads, and the handshake still runs once.
TEST(TlsTransportTest, FirstSendAndFirstReceiveAtOnceHandshakeOnce) {
  auto listener = listenOnLoopback("tls");
  std::string error;
  Endpoint endpoint = parseEndpoint(listener->url(), &error).value();
  auto connecting = std::async(std::launch::async, [&] { return connectEndpoint(endpoint, 5000); });
  auto server = listener->accept();
  server->setReceiveTimeoutMs(20000);
  uint64_t word = 42;
  ConstBuffer hello[] = {{&word, sizeof word}};
  auto sending = std::async(std::launch::async, [&] { server->sendFrame(hello, {}); });
  auto receiving = std::async(std::launch::async, [&] { return server->receiveFrame().bulkBytes; });
  auto client = connecting.get();
  client->setReceiveTimeoutMs(20000);
  EXPECT_EQ(client->receiveFrame().message.size(), sizeof word);
  std::vector<std::byte> bulk(3, std::byte{7});
  ConstBuffer bulkParts[] = {{bulk.data(), bulk.size()}};
  client->sendFrame(hello, bulkParts);
  sending.get();
  EXPECT_EQ(receiving.get(), 3u);
}

class DuplexTransportTest : public ::testing::TestWithParam<std::string> {};

INSTANTIATE_TEST_SUITE_P(ByteStreams, DuplexTransportTest, ::testing::Values("tcp", "tls", "shm"),
                         [](const auto& info) { return info.param; });

TEST_P(DuplexTransportTest, SaysItIsFullDuplex) {
  auto pair = connectedPair(GetParam());
  EXPECT_TRUE(pair.client->fullDuplex());
  EXPECT_TRUE(pair.server->fullDuplex());
}

// Frame `seq` carries a message of 2 + seq % 3 words (seq, bulk size, filler) and bulk of a size
// from a cycle that crosses the transports' thresholds (buffered reads, TLS records), cut from one
// shared pattern at an offset that depends on seq.
constexpr size_t kBulkSizes[] = {0, 1, 7, 100, 4096, 16383, 16385, 40000, 70001, 100000};
constexpr int kFramesEachWay = 2000;

struct Traffic {
  std::vector<std::byte> pattern;
  Traffic() : pattern(100000 + 256) {
    for (size_t i = 0; i < pattern.size(); ++i)
      pattern[i] = static_cast<std::byte>((i * 167 + i / 251) & 0xff);
  }
  static size_t bulkSize(uint64_t seq) { return kBulkSizes[seq % std::size(kBulkSizes)]; }
  const std::byte* bulk(uint64_t seq) const { return pattern.data() + seq % 251; }
};

// Sends kFramesEachWay frames, by turns with sendFrame (bulk in two parts), sendFrameLater (flushed
// every few frames) and startFrame/sendBulk (bulk in up to three pieces).
void sendAll(Connection& connection, const Traffic& traffic) {
  for (uint64_t seq = 0; seq < kFramesEachWay; ++seq) {
    uint64_t words[4] = {seq, traffic.bulkSize(seq), ~seq, seq * 3};
    size_t size = traffic.bulkSize(seq);
    const std::byte* bulk = traffic.bulk(seq);
    ConstBuffer message[] = {{words, 8 * (2 + seq % 3)}};
    switch (seq % 3) {
      case 0: {
        ConstBuffer parts[] = {{bulk, size / 3}, {bulk + size / 3, size - size / 3}};
        connection.sendFrame(message, parts);
        break;
      }
      case 1: {
        ConstBuffer parts[] = {{bulk, size}};
        connection.sendFrameLater(message, parts);
        if (seq % 4 == 1) connection.flush();
        break;
      }
      default: {
        connection.startFrame(message, size);
        for (size_t sent = 0; sent < size;) {
          size_t piece = std::min(size - sent, size / 3 + 1);
          connection.sendBulk(bulk + sent, piece);
          sent += piece;
        }
      }
    }
  }
  connection.flush();
}

// Receives kFramesEachWay frames and checks each against what sendAll sent; returns the first
// mismatch, empty when all arrived intact and in order.
std::string receiveAll(Connection& connection, const Traffic& traffic) {
  std::vector<std::byte> bulk;
  for (uint64_t seq = 0; seq < kFramesEachWay; ++seq) {
    ReceivedFrame frame = connection.receiveFrame();
    std::string where = "frame " + std::to_string(seq) + ": ";
    if (frame.message.size() != 8 * (2 + seq % 3)) return where + "wrong message size";
    uint64_t words[2];
    std::memcpy(words, frame.message.data(), sizeof words);
    size_t size = traffic.bulkSize(seq);
    if (words[0] != seq || words[1] != size || frame.bulkBytes != size)
      return where + "carries frame " + std::to_string(words[0]);
    bulk.assign(size, std::byte{0});
    size_t half = size / 2;
    connection.receiveBulk(bulk.data(), half);
    connection.receiveBulk(bulk.data() + half, size - half);
    if (connection.pendingBulk() != 0) return where + "bulk left over";
    if (size && std::memcmp(bulk.data(), traffic.bulk(seq), size) != 0)
      return where + "bulk differs";
  }
  return {};
}

TEST_P(DuplexTransportTest, BothDirectionsAtOnceWithOneSenderAndOneReceiverEachSide) {
  auto pair = connectedPair(GetParam());
  const Traffic traffic;
  // A failure anywhere shuts both ends down, so no thread waits for frames that will not come.
  auto stopAll = [&] {
    pair.client->shutdown();
    pair.server->shutdown();
  };
  auto sender = [&](Connection& connection) {
    return std::async(std::launch::async, [&]() -> std::string {
      try {
        sendAll(connection, traffic);
        return {};
      } catch (const std::exception& e) {
        stopAll();
        return std::string("send: ") + e.what();
      }
    });
  };
  auto receiver = [&](Connection& connection) {
    return std::async(std::launch::async, [&]() -> std::string {
      try {
        std::string mismatch = receiveAll(connection, traffic);
        if (!mismatch.empty()) stopAll();
        return mismatch;
      } catch (const std::exception& e) {
        stopAll();
        return std::string("receive: ") + e.what();
      }
    });
  };
  auto clientReceives = receiver(*pair.client);
  auto serverReceives = receiver(*pair.server);
  auto clientSends = sender(*pair.client);
  auto serverSends = sender(*pair.server);
  EXPECT_EQ(clientSends.get(), "");
  EXPECT_EQ(serverSends.get(), "");
  EXPECT_EQ(clientReceives.get(), "");
  EXPECT_EQ(serverReceives.get(), "");
}

TEST_P(DuplexTransportTest, ShutdownWakesABlockedReaderWhileAWriterIsMidStream) {
  auto pair = connectedPair(GetParam());
  // The server neither reads nor sends: the client's reader waits and its writer fills the socket
  // buffers and blocks inside a 64 MiB streamed frame.
  std::vector<std::byte> piece(1 << 20);
  std::atomic<int> piecesSent{0};
  auto writer = std::async(std::launch::async, [&]() -> std::string {
    try {
      pair.client->startFrame({}, 64 << 20);
      for (int i = 0; i < 64; ++i) {
        pair.client->sendBulk(piece.data(), piece.size());
        piecesSent++;
      }
      return "the whole frame was sent";
    } catch (const TransportError& e) {
      return e.what();
    }
  });
  auto reader = std::async(std::launch::async, [&]() -> std::string {
    try {
      pair.client->receiveFrame();
      return "a frame arrived";
    } catch (const TransportError& e) {
      return e.what();
    }
  });
  auto deadline = steady_clock::now() + milliseconds(5000);
  while (piecesSent == 0 && steady_clock::now() < deadline)
    std::this_thread::sleep_for(milliseconds(5));
  std::this_thread::sleep_for(milliseconds(100));  // both block now
  auto start = steady_clock::now();
  pair.client->shutdown();
  // If shutdown() wakes nothing, closing the server resets the connection, so the test fails
  // instead of hanging.
  bool woke = reader.wait_for(milliseconds(5000)) == std::future_status::ready &&
              writer.wait_for(milliseconds(5000)) == std::future_status::ready;
  if (!woke) pair.server.reset();
  EXPECT_TRUE(woke) << "shutdown() left a thread blocked";
  EXPECT_LT(steady_clock::now() - start, milliseconds(5000));
  EXPECT_GT(piecesSent.load(), 0);
  EXPECT_LT(piecesSent.load(), 64);
  std::string readerError = reader.get(), writerError = writer.get();
  EXPECT_NE(readerError, "a frame arrived");
  EXPECT_NE(writerError, "the whole frame was sent");
}

TEST_P(DuplexTransportTest, ReceiveTimeoutFires) {
  auto pair = connectedPair(GetParam());
  pair.server->setReceiveTimeoutMs(200);
  auto start = steady_clock::now();
  auto receive = std::async(std::launch::async, [&]() -> std::optional<TransportError> {
    try {
      pair.server->receiveFrame();
      return std::nullopt;
    } catch (const TransportError& e) {
      return e;
    }
  });
  // If the timeout does not fire, shutting down ends the receive, so the test fails, not hangs.
  bool timely = receive.wait_for(milliseconds(5000)) == std::future_status::ready;
  if (!timely) pair.server->shutdown();
  std::optional<TransportError> error = receive.get();
  EXPECT_TRUE(timely) << "receiveFrame ignored the 200 ms receive timeout";
  EXPECT_GE(steady_clock::now() - start, milliseconds(150));
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->kind(), TransportError::Kind::kTimeout) << error->what();
  EXPECT_NE(std::string(error->what()).find("timed out"), std::string::npos) << error->what();
}

}  // namespace
}  // namespace gpupool::transport
