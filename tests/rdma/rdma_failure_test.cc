// Every way an RDMA conversation can break ends in TransportError on the surviving side, promptly
// (from the connection teardown, not from a timeout), never in a hang: a peer process killed at
// each stage, shutdown() from another thread, silence past the receive timeout, a refused connect.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <thread>

#include "tests/rdma/rdma_pair.h"

namespace gpupool::transport {
namespace {

using Clock = std::chrono::steady_clock;
using testing::connectedRdmaPair;
using testing::endpointOf;
using testing::rdmaTestAddress;

// The receive timeout the survivor runs with; failures must be detected well before it.
constexpr unsigned kGenerousTimeoutMs = 60000;
constexpr auto kPromptly = std::chrono::seconds(25);

// tests/rdma/rdma_peer as a child process, with its stdout on a pipe.
class PeerProcess {
 public:
  explicit PeerProcess(std::vector<std::string> args) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], 1);
      std::vector<char*> argv;
      static std::string path = RDMA_PEER_PATH;
      argv.push_back(path.data());
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(path.c_str(), argv.data());
      _exit(127);
    }
    ::close(fds[1]);
    out_ = fds[0];
  }
  ~PeerProcess() {
    kill();
    ::close(out_);
  }

  // The next line the peer printed; empty on timeout or exit.
  std::string readLine(int timeoutMs = 30000) {
    std::string line;
    for (;;) {
      pollfd p{out_, POLLIN, 0};
      if (::poll(&p, 1, timeoutMs) <= 0) return {};
      char c;
      if (::read(out_, &c, 1) != 1) return {};
      if (c == '\n') return line;
      line += c;
    }
  }

  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
};

struct ListeningSide {
  std::unique_ptr<Listener> listener = rdmaListen(Endpoint{"rdma", rdmaTestAddress(), 0});
  std::unique_ptr<Connection> accept() {
    auto c = listener->accept();
    c->setReceiveTimeoutMs(kGenerousTimeoutMs);
    return c;
  }
};

template <typename F>
void expectPromptTransportError(F&& f, const char* what) {
  auto start = Clock::now();
  EXPECT_THROW(f(), TransportError) << what;
  EXPECT_LT(Clock::now() - start, kPromptly) << what << " waited for the timeout";
}

TEST(RdmaFailure, PeerKilledWhileWeWaitForAFrame) {
  SKIP_WITHOUT_RDMA();
  ListeningSide side;
  PeerProcess peer({"idle", side.listener->url()});
  auto connection = side.accept();
  ASSERT_EQ(peer.readLine(), "connected");
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    peer.kill();
  });
  expectPromptTransportError([&] { connection->receiveFrame(); }, "receiveFrame");
  killer.join();
  // Broken stays broken.
  EXPECT_THROW(connection->receiveFrame(), TransportError);
}

TEST(RdmaFailure, PeerKilledBeforeWeReadItsRemoteBulk) {
  SKIP_WITHOUT_RDMA();
  ListeningSide side;
  PeerProcess peer({"send-bulk", side.listener->url(), std::to_string(8u << 20)});
  auto connection = side.accept();
  ASSERT_EQ(peer.readLine(), "connected");
  auto frame = connection->receiveFrame();
  ASSERT_EQ(frame.bulkBytes, 8u << 20);
  peer.kill();
  std::vector<std::byte> dst(frame.bulkBytes);
  expectPromptTransportError([&] { connection->receiveBulk(dst.data(), dst.size()); },
                             "receiveBulk");
}

TEST(RdmaFailure, PeerKilledBeforeReadingOurRemoteBulk) {
  SKIP_WITHOUT_RDMA();
  ListeningSide side;
  PeerProcess peer({"recv-frame", side.listener->url()});
  auto connection = side.accept();
  ASSERT_EQ(peer.readLine(), "connected");
  std::vector<std::byte> bulk(4u << 20);
  uint64_t message[2] = {3, 4};
  auto sending = std::async(std::launch::async, [&] {
    ConstBuffer m{message, sizeof message}, b{bulk.data(), bulk.size()};
    connection->sendFrame(std::span(&m, 1), std::span(&b, 1));
  });
  ASSERT_EQ(peer.readLine(), "got-frame");
  // sendFrame is still waiting for the peer to read the bulk; the peer dies instead.
  EXPECT_EQ(sending.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  auto start = Clock::now();
  peer.kill();
  EXPECT_THROW(sending.get(), TransportError);
  EXPECT_LT(Clock::now() - start, kPromptly);
}

// The client offered a pinned destination for the reply and died: writing the reply's bulk into
// it fails promptly (the WRITEs or the disconnect), never hangs.
TEST(RdmaFailure, PeerKilledAfterOfferingItsDestination) {
  SKIP_WITHOUT_RDMA();
  ListeningSide side;
  constexpr size_t kSize = 16u << 20;
  PeerProcess peer({"offer", side.listener->url(), std::to_string(kSize)});
  auto connection = side.accept();
  ASSERT_EQ(peer.readLine(), "connected");
  ASSERT_EQ(peer.readLine(), "offered");
  connection->receiveFrame();  // the request the offer came with
  auto start = Clock::now();
  peer.kill();
  std::vector<std::byte> bulk(kSize);
  uint64_t message[2] = {5, 6};
  ConstBuffer m{message, sizeof message}, b{bulk.data(), bulk.size()};
  EXPECT_THROW(connection->sendFrame(std::span(&m, 1), std::span(&b, 1)), TransportError);
  EXPECT_LT(Clock::now() - start, kPromptly);
}

TEST(RdmaFailure, PeerKilledWhileWeWaitForCredits) {
  SKIP_WITHOUT_RDMA();
  ListeningSide side;
  PeerProcess peer({"idle", side.listener->url()});
  auto connection = side.accept();
  ASSERT_EQ(peer.readLine(), "connected");
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    peer.kill();
  });
  // The peer never receives: after its 32 buffers are used, sending must wait, then fail.
  expectPromptTransportError(
      [&] {
        uint64_t message[1] = {5};
        ConstBuffer m{message, sizeof message};
        for (int i = 0; i < 1000; ++i) connection->sendFrame(std::span(&m, 1), {});
      },
      "sendFrame");
  killer.join();
  EXPECT_GT(rdmaStatsOf(*connection)->creditWaits, 0u);
}

TEST(RdmaFailure, ServerKilledWhileClientWaitsForTheReply) {
  SKIP_WITHOUT_RDMA();
  PeerProcess server({"serve", rdmaTestAddress()});
  std::string url = server.readLine();
  ASSERT_EQ(url.rfind("rdma://", 0), 0u) << url;
  auto connection = rdmaConnect(endpointOf(url), 10000);
  connection->setReceiveTimeoutMs(kGenerousTimeoutMs);
  uint64_t message[1] = {6};
  ConstBuffer m{message, sizeof message};
  connection->sendFrame(std::span(&m, 1), {});
  ASSERT_EQ(server.readLine(), "got-frame");
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    server.kill();
  });
  expectPromptTransportError([&] { connection->receiveFrame(); }, "receiveFrame");
  killer.join();
}

TEST(RdmaFailure, ShutdownFromAnotherThreadUnblocksReceive) {
  SKIP_WITHOUT_RDMA();
  auto pair = connectedRdmaPair(kGenerousTimeoutMs);
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    pair.server->shutdown();
  });
  expectPromptTransportError([&] { pair.server->receiveFrame(); }, "receiveFrame");
  stopper.join();
  // The other side learns of it too.
  expectPromptTransportError([&] { pair.client->receiveFrame(); }, "peer receiveFrame");
}

TEST(RdmaFailure, SilentPeerHitsTheReceiveTimeout) {
  SKIP_WITHOUT_RDMA();
  auto pair = connectedRdmaPair(kGenerousTimeoutMs);
  pair.server->setReceiveTimeoutMs(400);
  auto start = Clock::now();
  EXPECT_THROW(pair.server->receiveFrame(), TransportError);
  auto waited = Clock::now() - start;
  EXPECT_GE(waited, std::chrono::milliseconds(350));
  EXPECT_LT(waited, std::chrono::seconds(10));
}

TEST(RdmaFailure, ListenerShutdownUnblocksAccept) {
  SKIP_WITHOUT_RDMA();
  ListeningSide side;
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    side.listener->shutdown();
  });
  expectPromptTransportError([&] { side.listener->accept(); }, "accept");
  stopper.join();
}

TEST(RdmaFailure, ConnectWhereNobodyListensFails) {
  SKIP_WITHOUT_RDMA();
  std::string url;
  {
    ListeningSide side;  // find a port, then close it
    url = side.listener->url();
  }
  expectPromptTransportError([&] { rdmaConnect(endpointOf(url), 3000); }, "rdmaConnect");
}

}  // namespace
}  // namespace gpupool::transport
