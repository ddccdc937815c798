// The raw-verbs baseline `gpupool bench --transport rdma` measures against: served by the RDMA
// listener beside its sessions (never returned from accept()), with bounded requests, and ended
// cleanly when the listener goes away.
#include <gtest/gtest.h>

#include <cstring>
#include <future>
#include <thread>

#include "tests/rdma/rdma_pair.h"
#include "transport/rdma/baseline/rdma_baseline_client.h"
#include "transport/rdma/baseline/rdma_baseline_queue.h"

namespace gpupool::transport {
namespace {

using testing::endpointOf;

// A listener whose accept loop runs on a thread, as gpupoold's does: baseline clients are
// dispatched there, and the first session connection is handed back through `session`.
struct RunningListener {
  std::unique_ptr<Listener> listener = rdmaListen(Endpoint{"rdma", testing::rdmaTestAddress(), 0});
  Endpoint endpoint = endpointOf(listener->url());
  std::future<std::unique_ptr<Connection>> session =
      std::async(std::launch::async, [this] { return listener->accept(); });

  ~RunningListener() {
    listener->shutdown();
    try {
      session.get();
    } catch (const TransportError&) {
      // accept() ends this way once shut down.
    }
  }
};

TEST(RdmaBaseline, PingPongsAndWritesBesideSessions) {
  SKIP_WITHOUT_RDMA();
  RunningListener server;
  RdmaBaselineClient verbs(server.endpoint, 64u << 10, 1u << 20, 10000);
  EXPECT_FALSE(verbs.deviceName().empty());
  // Sizes around the inline limit and the largest message; pingPong checks each reply's size.
  for (uint32_t size : {1u, 4u, verbs.maxInline(), verbs.maxInline() + 1, 4096u, 65536u}) {
    if (size == 0) continue;
    for (int i = 0; i < 20; ++i) ASSERT_NO_THROW(verbs.pingPong(size)) << size;
  }
  EXPECT_NO_THROW(verbs.writeStream(1, 300));  // more WRITEs than the tx depth
  EXPECT_NO_THROW(verbs.writeStream(4096, 1000));
  EXPECT_NO_THROW(verbs.writeStream(1u << 20, 20));                    // the whole sink
  EXPECT_THROW(verbs.writeStream((1u << 20) + 1, 1), TransportError);  // past the sink
  EXPECT_THROW(verbs.pingPong((64u << 10) + 1), TransportError);       // past the message size

  // The baseline never came out of accept(): the next connection does, and works.
  EXPECT_EQ(server.session.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  auto client = rdmaConnect(server.endpoint, 10000);
  auto accepted = server.session.get();
  server.session = std::async(std::launch::async, [&] { return server.listener->accept(); });
  accepted->setReceiveTimeoutMs(30000);
  uint64_t word = 0x1234567890abcdefull;
  ConstBuffer m{&word, sizeof word};
  client->sendFrame(std::span(&m, 1), {});
  auto frame = accepted->receiveFrame();
  ASSERT_EQ(frame.message.size(), sizeof word);
  EXPECT_EQ(std::memcmp(frame.message.data(), &word, sizeof word), 0);
  // And the baseline still answers while a session is open.
  EXPECT_NO_THROW(verbs.pingPong(64));
}

TEST(RdmaBaseline, RefusesRequestsOverItsLimits) {
  SKIP_WITHOUT_RDMA();
  RunningListener server;
  EXPECT_THROW(
      RdmaBaselineClient(server.endpoint, 64u << 10, rdma::kBaselineMaxSinkBytes + 1, 10000),
      TransportError);
  EXPECT_THROW(RdmaBaselineClient(server.endpoint, rdma::kBaselineMaxMessageBytes + 1, 4096, 10000),
               TransportError);
  // The listener is unharmed: a valid request still gets through.
  RdmaBaselineClient verbs(server.endpoint, 4096, 4096, 10000);
  EXPECT_NO_THROW(verbs.pingPong(4096));
}

TEST(RdmaBaseline, ClientCallsFailOnceTheListenerIsGone) {
  SKIP_WITHOUT_RDMA();
  auto server = std::make_unique<RunningListener>();
  RdmaBaselineClient verbs(server->endpoint, 4096, 4096, 10000);
  verbs.pingPong(8);
  server.reset();  // stops and joins the responder, which disconnects
  EXPECT_THROW(
      {
        for (;;) verbs.pingPong(8);
      },
      TransportError);
}

}  // namespace
}  // namespace gpupool::transport
