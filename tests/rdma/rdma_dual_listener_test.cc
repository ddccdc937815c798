// listenOnBoth: gpupoold's one accept loop over its TCP and RDMA listeners. Exercised with two TCP
// listeners, so it runs everywhere.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "tests/rdma/rdma_pair.h"
#include "transport/tcp_transport.h"
#include "transport/transport_factory.h"

namespace gpupool::transport {
namespace {

using Clock = std::chrono::steady_clock;
using testing::endpointOf;

TEST(RdmaDualListener, AcceptsFromBothListenersAndReportsTheFirstUrl) {
  auto first = tcpListen(Endpoint{"tcp", "127.0.0.1", 0});
  auto second = tcpListen(Endpoint{"tcp", "127.0.0.1", 0});
  std::string firstUrl = first->url(), secondUrl = second->url();
  auto both = listenOnBoth(std::move(first), std::move(second));
  EXPECT_EQ(both->url(), firstUrl);
  auto viaSecond = tcpConnect(endpointOf(secondUrl), 5000);
  auto acceptedSecond = both->accept();
  auto viaFirst = tcpConnect(endpointOf(firstUrl), 5000);
  auto acceptedFirst = both->accept();
  // Each accepted connection is the one its client made: a frame goes through end to end.
  for (auto [client, server] : {std::pair{viaFirst.get(), acceptedFirst.get()},
                                std::pair{viaSecond.get(), acceptedSecond.get()}}) {
    server->setReceiveTimeoutMs(10000);
    uint64_t word = reinterpret_cast<uintptr_t>(client);
    ConstBuffer m{&word, sizeof word};
    client->sendFrame(std::span(&m, 1), {});
    auto frame = server->receiveFrame();
    ASSERT_EQ(frame.message.size(), sizeof word);
    EXPECT_EQ(std::memcmp(frame.message.data(), &word, sizeof word), 0);
  }
}

TEST(RdmaDualListener, ShutdownUnblocksAcceptAndDestructionJoins) {
  auto both = listenOnBoth(tcpListen(Endpoint{"tcp", "127.0.0.1", 0}),
                           tcpListen(Endpoint{"tcp", "127.0.0.1", 0}));
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    both->shutdown();
  });
  auto start = Clock::now();
  EXPECT_THROW(both->accept(), TransportError);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
  stopper.join();
  both.reset();  // must not hang joining its accept threads
}

}  // namespace
}  // namespace gpupool::transport
