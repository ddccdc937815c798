// The RDMA heartbeat (transport/rdma/rdma_heartbeat.cc): a connection whose peer's host stops
// answering ends with a timeout, idle or waiting, while a peer that is merely silent (its program
// busy or stopped, its host's adapter still answering) is never taken for gone.
//
// The peer's host is made to stop answering by moving its queue pair to the error state
// (rdmaStopAnswering): its adapter then drops what arrives, unacknowledged, and the peer's side
// tells nobody, as with a host that lost power or its link. (Cutting the network is no stand-in
// here: soft-RoCE hands packets to its own address straight to the receiving queue pair.)
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "tests/rdma/rdma_pair.h"

namespace gpupool::transport {
namespace {

using Clock = std::chrono::steady_clock;
using testing::connectedRdmaPair;

constexpr unsigned kHeartbeatMs = 3000;

void expectStoppedAnswering(const TransportError& e) {
  EXPECT_EQ(e.kind(), TransportError::Kind::kTimeout) << e.what();
  EXPECT_NE(std::string(e.what()).find("stopped answering"), std::string::npos) << e.what();
}

TEST(RdmaHeartbeat, AnIdleConnectionsLooksFindAPeerWhoseHostStoppedAnswering) {
  SKIP_WITHOUT_RDMA();
  auto pair = connectedRdmaPair();
  pair.client->setDeadPeerTimeoutMs(kHeartbeatMs);
  ASSERT_TRUE(rdmaStopAnswering(*pair.server));
  // Looked at as its owners do (the client's flusher, gpupoold's watchdog): nobody waits on it.
  const auto start = Clock::now();
  bool gone = false;
  while (!gone && Clock::now() - start < std::chrono::seconds(20)) {
    try {
      pair.client->checkPeer();
      std::this_thread::sleep_for(std::chrono::milliseconds(heartbeatLookIntervalMs(kHeartbeatMs)));
    } catch (const TransportError& e) {
      expectStoppedAnswering(e);
      gone = true;
    }
  }
  const auto took = Clock::now() - start;
  ASSERT_TRUE(gone) << "the heartbeat did not find the silent host within 20 s";
  // A probe goes out after a third of the timeout; the judgement comes by about the timeout, or
  // sooner where the adapter gives up first.
  EXPECT_GE(took, std::chrono::milliseconds(kHeartbeatMs / 3));
  EXPECT_LT(took, std::chrono::milliseconds(kHeartbeatMs + 3000));
  EXPECT_GE(rdmaStatsOf(*pair.client)->heartbeatProbes, 1u);
  EXPECT_THROW(pair.client->receiveFrame(), TransportError) << "broken stays broken";
}

TEST(RdmaHeartbeat, AWaitForAnAnswerEndsWhenThePeersHostStopsAnswering) {
  SKIP_WITHOUT_RDMA();
  // The receive timeout (60 s) is not what ends it.
  auto pair = connectedRdmaPair();
  pair.client->setDeadPeerTimeoutMs(kHeartbeatMs);
  auto waiting = std::async(std::launch::async, [&]() -> std::string {
    try {
      pair.client->receiveFrame();
      return "a frame arrived";
    } catch (const TransportError& e) {
      expectStoppedAnswering(e);
      return {};
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_TRUE(rdmaStopAnswering(*pair.server));
  const auto start = Clock::now();
  ASSERT_EQ(waiting.wait_for(std::chrono::seconds(20)), std::future_status::ready)
      << "still waiting 20 s after the peer's host stopped answering";
  EXPECT_EQ(waiting.get(), "");
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(kHeartbeatMs + 3000));
}

TEST(RdmaHeartbeat, APeerWhoseProgramIsSilentButWhoseHostAnswersIsNeverGone) {
  SKIP_WITHOUT_RDMA();
  auto pair = connectedRdmaPair();
  constexpr unsigned kShortHeartbeatMs = 600;
  pair.client->setDeadPeerTimeoutMs(kShortHeartbeatMs);
  // The server's program does nothing for five timeouts: first nobody waits on the client either
  // (its owner looks), then a thread waits for an answer while the owner goes on looking.
  const auto idleUntil = Clock::now() + std::chrono::milliseconds(5 * kShortHeartbeatMs);
  while (Clock::now() < idleUntil) {
    ASSERT_NO_THROW(pair.client->checkPeer());
    std::this_thread::sleep_for(
        std::chrono::milliseconds(heartbeatLookIntervalMs(kShortHeartbeatMs)));
  }
  auto waiting = std::async(std::launch::async, [&] { return pair.client->receiveFrame(); });
  const auto waitUntil = Clock::now() + std::chrono::milliseconds(5 * kShortHeartbeatMs);
  while (Clock::now() < waitUntil) {
    ASSERT_NO_THROW(pair.client->checkPeer());
    std::this_thread::sleep_for(
        std::chrono::milliseconds(heartbeatLookIntervalMs(kShortHeartbeatMs)));
  }
  EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
  // Probes went out and were answered by the server's adapter, not its program.
  EXPECT_GE(rdmaStatsOf(*pair.client)->heartbeatProbes, 4u);
  EXPECT_EQ(rdmaStatsOf(*pair.server)->sends, 0u);
  uint64_t message[2] = {41, 42};
  ConstBuffer m{message, sizeof message};
  pair.server->sendFrame(std::span(&m, 1), {});
  ReceivedFrame frame = waiting.get();
  ASSERT_EQ(frame.message.size(), sizeof message);
  EXPECT_EQ(std::memcmp(frame.message.data(), message, sizeof message), 0);
}

}  // namespace
}  // namespace gpupool::transport
