// The TCP heartbeat (Connection::setDeadPeerTimeoutMs) against a peer that is alive but does not
// read for longer than the heartbeat: its receive window closes, its kernel keeps answering our
// window probes, and the connection must live on (transport/tcp_peer_watch.h). Linux 5.11 and later
// end such a connection when TCP_USER_TIMEOUT is set, which is how the heartbeat used to work.
#include <gtest/gtest.h>
#include <linux/sockios.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <chrono>
#include <cstring>
#include <future>
#include <thread>
#include <vector>

#include "loopback_pair.h"

namespace gpupool::transport {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

constexpr unsigned kHeartbeatMs = 1000;
// The peer stays away from the socket for this long: four heartbeats.
constexpr milliseconds kBusy{4 * kHeartbeatMs};

// Over TCP, and over TLS (whose records ride the same kind of socket, watched the same way).
class TcpPeerWatch : public testing::TestWithParam<const char*> {
 protected:
  ConnectedPair watchedPair() {
    ConnectedPair pair = connectedPair(GetParam());
    for (Connection* side : {pair.client.get(), pair.server.get()}) {
      side->setReceiveTimeoutMs(20000);  // a broken test fails instead of hanging
      side->setDeadPeerTimeoutMs(kHeartbeatMs);
    }
    return pair;
  }
};

tcp_info infoOf(Connection& connection) {
  tcp_info info{};
  socklen_t length = sizeof info;
  EXPECT_EQ(::getsockopt(connection.readinessDescriptor(), IPPROTO_TCP, TCP_INFO, &info, &length),
            0);
  return info;
}

unsigned userTimeoutOf(Connection& connection) {
  unsigned ms = 0;
  socklen_t length = sizeof ms;
  ::getsockopt(connection.readinessDescriptor(), IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, &length);
  return ms;
}

std::vector<std::byte> watchedBytes(size_t size, uint8_t seed) {
  std::vector<std::byte> bytes(size);
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<std::byte>((i * 131 + seed) & 0xff);
  return bytes;
}

void sendWithBulk(Connection& connection, const std::vector<std::byte>& bulk) {
  std::byte message[8] = {};
  ConstBuffer messageParts[] = {{message, sizeof message}};
  ConstBuffer bulkParts[] = {{bulk.data(), bulk.size()}};
  connection.sendFrame(messageParts, bulkParts);
}

std::vector<std::byte> receiveWithBulk(Connection& connection) {
  ReceivedFrame frame = connection.receiveFrame();
  std::vector<std::byte> bulk(frame.bulkBytes);
  connection.receiveBulk(bulk.data(), bulk.size());
  return bulk;
}

// Armed, the kernel bounds unacknowledged sends and probes an idle connection: a cut network or a
// dead host ends it (NetworkCutTest runs that against a real cut).
TEST_P(TcpPeerWatch, ArmingSetsTheKernelsDeadPeerBound) {
  auto pair = watchedPair();
  int fd = pair.client->readinessDescriptor();
  EXPECT_EQ(userTimeoutOf(*pair.client), kHeartbeatMs);
  int keepalive = 0;
  socklen_t length = sizeof keepalive;
  ASSERT_EQ(::getsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &keepalive, &length), 0);
  EXPECT_EQ(keepalive, 1);
  pair.client->setDeadPeerTimeoutMs(0);  // off: the kernel's defaults again
  EXPECT_EQ(userTimeoutOf(*pair.client), 0u);
  ASSERT_EQ(::getsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &keepalive, &length), 0);
  EXPECT_EQ(keepalive, 0);
}

// A send that the peer's closed window holds up (a gpupoold busy in one request while the client
// sends a large copy) waits for the peer, however long it is busy.
TEST_P(TcpPeerWatch, ASendHeldByABusyPeersClosedWindowWaitsForIt) {
  auto pair = watchedPair();
  auto bulk = watchedBytes(64u << 20, 7);
  auto sending = std::async(std::launch::async, [&] { sendWithBulk(*pair.client, bulk); });
  std::this_thread::sleep_for(kBusy / 2);
  tcp_info info = infoOf(*pair.client);
  ASSERT_EQ(info.tcpi_snd_wnd, 0u) << "the peer's window should be closed by now";
  EXPECT_EQ(userTimeoutOf(*pair.client), 0u)
      << "TCP_USER_TIMEOUT still armed while the live peer's window is closed";
  std::this_thread::sleep_for(kBusy / 2);
  EXPECT_TRUE(receiveWithBulk(*pair.server) == bulk);
  EXPECT_NO_THROW(sending.get());
  // Open again: the next look (the owner's, now and then) arms the kernel's bound again.
  std::this_thread::sleep_for(milliseconds(kHeartbeatMs / 4));
  pair.client->checkPeer();
  EXPECT_EQ(userTimeoutOf(*pair.client), kHeartbeatMs);
}

// Bytes the sender's kernel took (the send returned) but the busy peer's closed window holds back,
// while the sender waits for the answer: the wait watches the window too.
TEST_P(TcpPeerWatch, BytesQueuedBehindAClosedWindowWaitForTheAnswer) {
  auto pair = watchedPair();
  int sendBuffer = 16 << 20;  // room for the whole frame: the send returns at once
  ASSERT_EQ(::setsockopt(pair.client->readinessDescriptor(), SOL_SOCKET, SO_SNDBUF, &sendBuffer,
                         sizeof sendBuffer),
            0);
  auto bulk = watchedBytes(4u << 20, 9);
  auto started = steady_clock::now();
  sendWithBulk(*pair.client, bulk);
  ASSERT_LT(steady_clock::now() - started, kBusy / 4) << "the send waited for the peer";
  auto answering = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(kBusy);
    auto received = receiveWithBulk(*pair.server);
    sendWithBulk(*pair.server, received);
  });
  std::this_thread::sleep_for(kBusy / 4);
  int queued = 0;
  ASSERT_EQ(::ioctl(pair.client->readinessDescriptor(), SIOCOUTQ, &queued), 0);
  ASSERT_GT(queued, 0) << "the peer's kernel took everything: nothing waits behind its window";
  ASSERT_EQ(infoOf(*pair.client).tcpi_snd_wnd, 0u);
  std::vector<std::byte> answer;
  EXPECT_NO_THROW(answer = receiveWithBulk(*pair.client));
  EXPECT_TRUE(answer == bulk);
  answering.get();
}

// Nothing waits on the connection (the program computes while its posted calls sit behind the
// busy server's window): whoever owns it asks checkPeer() now and then, and the connection lives.
TEST_P(TcpPeerWatch, CheckPeerKeepsAnUnwatchedConnectionAlive) {
  auto pair = watchedPair();
  int sendBuffer = 16 << 20;
  ASSERT_EQ(::setsockopt(pair.client->readinessDescriptor(), SOL_SOCKET, SO_SNDBUF, &sendBuffer,
                         sizeof sendBuffer),
            0);
  auto bulk = watchedBytes(4u << 20, 11);
  sendWithBulk(*pair.client, bulk);
  auto until = steady_clock::now() + kBusy;
  while (steady_clock::now() < until) {
    EXPECT_NO_THROW(pair.client->checkPeer());
    std::this_thread::sleep_for(milliseconds(kHeartbeatMs / 4));
  }
  EXPECT_TRUE(receiveWithBulk(*pair.server) == bulk);
  // And the other way, still alive.
  auto answering = std::async(std::launch::async, [&] { sendWithBulk(*pair.server, bulk); });
  EXPECT_TRUE(receiveWithBulk(*pair.client) == bulk);
  answering.get();
}

INSTANTIATE_TEST_SUITE_P(Over, TcpPeerWatch, testing::Values("tcp", "tls"),
                         [](const testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

}  // namespace
}  // namespace gpupool::transport
