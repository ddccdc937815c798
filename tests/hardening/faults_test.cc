// Faults: a client killed with SIGKILL at any point has everything released within a second; a
// server that dies or a network that is cut makes client calls fail within a bounded time; a
// restarted server takes new sessions at once. The network is cut for real (a network namespace
// and `ip link set down`), not mocked.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>
#include <thread>

#include "build_paths.h"
#include "child_process.h"
#include "client/remote_session.h"
#include "gpupool_server.h"
#include "transport/transport_factory.h"
#include "wire_client.h"

namespace gpupool::hardening {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;

// spin(n): loops n times doing dependent arithmetic; long enough to be killed in the middle.
constexpr const char* kSpinPtx = R"(
.version 7.0
.target sm_50
.address_size 64
.visible .entry spin(.param .u64 out, .param .u32 n)
{
  .reg .pred %p<2>;
  .reg .b32 %r<4>;
  .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r1, [n];
  mov.u32 %r2, 0;
  mov.u32 %r3, 1;
LOOP:
  mad.lo.u32 %r3, %r3, 3, 1;
  add.u32 %r2, %r2, 1;
  setp.lt.u32 %p1, %r2, %r1;
  @%p1 bra LOOP;
  cvta.to.global.u64 %rd1, %rd1;
  st.global.u32 [%rd1], %r3;
  ret;
}
)";

// A child process that connects as a client, does `work` (which writes one byte to `ready` once
// it holds resources and then keeps going or waits), and is SIGKILLed by the test.
class DoomedClient {
 public:
  DoomedClient(const std::string& endpoint,
               const std::function<void(WireClient&, int ready)>& work) {
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(fds[0]);
      try {
        WireClient client(endpoint);
        work(client, fds[1]);
        ::pause();  // still connected, holding whatever `work` created
      } catch (...) {
      }
      ::pause();
      ::_exit(0);
    }
    ::close(fds[1]);
    readyFd_ = fds[0];
  }
  ~DoomedClient() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::close(readyFd_);
  }
  bool waitReady() {
    char c;
    return ::read(readyFd_, &c, 1) == 1;
  }
  void kill() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  int readyFd_ = -1;
};

void signalReady(int fd) {
  char c = 1;
  (void)!::write(fd, &c, 1);
}

// Polls the server's memory use until it is 0; returns how long that took (or -1 ms on timeout).
milliseconds timeUntilReleased(WireClient& monitor, milliseconds limit) {
  auto start = steady_clock::now();
  while (steady_clock::now() - start < limit) {
    if (monitor.serverMemoryUsed() == 0) {
      return std::chrono::duration_cast<milliseconds>(steady_clock::now() - start);
    }
    std::this_thread::sleep_for(milliseconds(10));
  }
  return milliseconds(-1);
}

class KilledClientTest : public ::testing::Test {
 protected:
  void expectReleasedWithinASecond(DoomedClient& client) {
    ASSERT_TRUE(client.waitReady()) << server_.log();
    WireClient monitor(server_.endpoint(), wire::Hello::Purpose::STATUS);
    ASSERT_GT(monitor.serverMemoryUsed(), 0u) << "the client should hold memory now";
    std::this_thread::sleep_for(milliseconds(100));  // let it get into the middle of its work
    client.kill();
    auto took = timeUntilReleased(monitor, seconds(10));
    ASSERT_GE(took.count(), 0) << "memory never released\n" << server_.log();
    EXPECT_LE(took.count(), 1000) << "released after " << took.count() << " ms";
    // The server is fine afterwards.
    WireClient next(server_.endpoint());
    EXPECT_EQ(next.createContext().result, CUDA_SUCCESS);
  }

  e2e::GpupoolServer server_;
};

TEST_F(KilledClientTest, HoldingMemory) {
  DoomedClient client(server_.endpoint(), [](WireClient& c, int ready) {
    auto ctx = c.createContext().handle;
    for (int i = 0; i < 4; ++i) c.alloc(ctx, 16u << 20);
    signalReady(ready);
  });
  expectReleasedWithinASecond(client);
}

TEST_F(KilledClientTest, MidCopy) {
  DoomedClient client(server_.endpoint(), [](WireClient& c, int ready) {
    auto ctx = c.createContext().handle;
    auto mem = c.alloc(ctx, 64u << 20).handle;
    std::vector<uint8_t> bytes(64u << 20, 0x3c);
    signalReady(ready);
    for (;;) {  // copies in and out until killed
      c.write(ctx, mem, bytes);
      c.read(ctx, mem, bytes.size());
    }
  });
  expectReleasedWithinASecond(client);
}

TEST_F(KilledClientTest, MidLaunch) {
  DoomedClient client(server_.endpoint(), [](WireClient& c, int ready) {
    auto ctx = c.createContext().handle;
    auto out = c.alloc(ctx, 4096).handle;
    auto module = c.loadPtx(ctx, kSpinPtx).handle;
    auto fn = c.function(ctx, module, "spin").handle;
    std::vector<uint8_t> params(12);
    uint32_t n = 2000000000u;  // far longer than the test waits
    std::memcpy(params.data(), &out, 8);
    std::memcpy(params.data() + 8, &n, 4);
    c.launch(ctx, fn, params);
    signalReady(ready);
    c.synchronize(ctx);  // blocks in the server until the kernel ends or the client dies
  });
  expectReleasedWithinASecond(client);
}

// The client library side: a RemoteSession (the code inside libcuda.so.1) against a server that
// is killed, and against one whose network is cut.
CUresult statusCall(client::RemoteSession& session) {
  return session.call("status", [](wire::Request::Builder r) { r.setStatus(); });
}

TEST(ServerLossTest, KilledServerFailsCallsAtOnceAndARestartServesAgain) {
  ::unsetenv("GPU_POOL_CALL_TIMEOUT_MS");
  auto server = std::make_unique<e2e::GpupoolServer>();
  std::string error;
  auto parsed = transport::parseEndpoint(server->endpoint(), &error);
  ASSERT_TRUE(parsed) << error;
  auto session = client::RemoteSession::connect(*parsed, &error);
  ASSERT_TRUE(session) << error;
  ASSERT_EQ(statusCall(*session), CUDA_SUCCESS);
  server->signal(SIGKILL);
  auto start = steady_clock::now();
  EXPECT_EQ(statusCall(*session), CUDA_ERROR_DEVICE_UNAVAILABLE);
  EXPECT_EQ(statusCall(*session), CUDA_ERROR_DEVICE_UNAVAILABLE);  // and every later call
  EXPECT_LT(steady_clock::now() - start, seconds(2));

  // A new server on the same port accepts sessions at once.
  uint16_t port = server->port();
  server.reset();
  e2e::ChildProcess restarted(
      {e2e::gpupooldPath(),
       {"--listen", "tcp://127.0.0.1:" + std::to_string(port), "--memory", "256MiB"},
       {},
       std::nullopt});
  ASSERT_TRUE(restarted.waitForStdout("listening on", seconds(30)))
      << restarted.finish(seconds(5)).describe();
  auto again = client::RemoteSession::connect(*parsed, &error);
  ASSERT_TRUE(again) << error;
  EXPECT_EQ(statusCall(*again), CUDA_SUCCESS);
}

// Runs a shell command; returns its exit status. A sanitizer runtime preloaded for the tests
// (scripts/sanitizers.sh) is kept away from system tools, whose leaks would fail them.
int sh(const std::string& command) {
  return std::system(("env -u LD_PRELOAD " + command + " >/dev/null 2>&1").c_str());
}

// A client that stops reading (stopped in a debugger) while the server's reply sits behind its
// closed receive window: the session is held by gpupoold's event loop meanwhile, which must
// keep it alive however long the client is away, while its host answers.
TEST(ClientAwayTest, AReplyHeldByAClosedWindowKeepsTheSessionBetweenRequests) {
  e2e::ServerOptions options;
  options.extraArgs = {"--client-heartbeat-ms", "1000"};
  e2e::GpupoolServer server(options);
  WireClient client(server.endpoint());
  // A small receive buffer: the reply fills the window at once and the rest waits in the
  // server's socket, so the session goes back to the event loop while its bytes are held.
  int receiveBuffer = 64 << 10;
  ASSERT_EQ(::setsockopt(client.connection().readinessDescriptor(), SOL_SOCKET, SO_RCVBUF,
                         &receiveBuffer, sizeof receiveBuffer),
            0);
  uint64_t context = client.createContext().handle;
  constexpr uint64_t kBytes = 1 << 20;
  uint64_t buffer = client.alloc(context, kBytes).handle;
  ASSERT_EQ(client.memset(context, buffer, 0x5a, kBytes).result, CUDA_SUCCESS);
  client.send([&](wire::Request::Builder r) {
    auto m = r.initMemcpyDtoH();
    m.setContext(context);
    m.setSrc(buffer);
    m.setBytes(kBytes);
  });
  std::this_thread::sleep_for(seconds(4));  // four heartbeats away
  Reply reply = client.receive();
  ASSERT_EQ(reply.result, CUDA_SUCCESS);
  ASSERT_EQ(reply.bulk.size(), kBytes);
  EXPECT_EQ(std::count(reply.bulk.begin(), reply.bulk.end(), 0x5a), static_cast<long>(kBytes));
  EXPECT_EQ(client.free(context, buffer).result, CUDA_SUCCESS);  // and the session serves on
}

// A gpupoold in its own network namespace, reached over a veth pair whose link the test cuts.
class NetworkCutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0 || sh("ip -V") != 0) GTEST_SKIP() << "needs root and iproute2";
    std::string id = std::to_string(::getpid() % 200 + 20);
    ns_ = "gphard" + id;
    hostLink_ = "gph" + id + "a";
    std::string peerLink = "gph" + id + "b";
    std::string subnet = "10.213." + id + ".";
    serverAddress_ = subnet + "2";
    sh("ip netns del " + ns_);
    sh("ip link del " + hostLink_);
    bool ok = sh("ip netns add " + ns_) == 0 &&
              sh("ip link add " + hostLink_ + " type veth peer name " + peerLink) == 0 &&
              sh("ip link set " + peerLink + " netns " + ns_) == 0 &&
              sh("ip addr add " + subnet + "1/24 dev " + hostLink_) == 0 &&
              sh("ip link set " + hostLink_ + " up") == 0 &&
              sh("ip netns exec " + ns_ + " ip addr add " + serverAddress_ + "/24 dev " +
                 peerLink) == 0 &&
              sh("ip netns exec " + ns_ + " ip link set " + peerLink + " up") == 0 &&
              sh("ip netns exec " + ns_ + " ip link set lo up") == 0;
    if (!ok) GTEST_SKIP() << "cannot create a network namespace here";
    server_ = std::make_unique<e2e::ChildProcess>(
        e2e::ChildProcess::Options{"/usr/sbin/ip",
                                   {"netns", "exec", ns_, e2e::gpupooldPath(), "--listen",
                                    "tcp://" + serverAddress_ + ":7000", "--memory", "256MiB"},
                                   {{"LD_PRELOAD", std::nullopt}},
                                   std::nullopt});
    ASSERT_TRUE(server_->waitForStdout("listening on", seconds(30)))
        << server_->finish(seconds(5)).describe();
  }
  void TearDown() override {
    server_.reset();
    sh("ip link del " + hostLink_);
    sh("ip netns del " + ns_);
  }

  std::string ns_, hostLink_, serverAddress_;
  std::unique_ptr<e2e::ChildProcess> server_;
};

TEST_F(NetworkCutTest, CallsFailWithinTheHeartbeatTimeout) {
  ::setenv("GPU_POOL_HEARTBEAT_TIMEOUT_MS", "3000", 1);
  ::unsetenv("GPU_POOL_CALL_TIMEOUT_MS");
  std::string error;
  auto parsed = transport::parseEndpoint("tcp://" + serverAddress_ + ":7000", &error);
  auto session = client::RemoteSession::connect(*parsed, &error);
  ::unsetenv("GPU_POOL_HEARTBEAT_TIMEOUT_MS");
  ASSERT_TRUE(session) << error;
  ASSERT_EQ(statusCall(*session), CUDA_SUCCESS);

  ASSERT_EQ(sh("ip link set " + hostLink_ + " down"), 0);  // packets now go nowhere
  auto start = steady_clock::now();
  EXPECT_EQ(statusCall(*session), CUDA_ERROR_DEVICE_UNAVAILABLE);
  auto took = steady_clock::now() - start;
  EXPECT_LT(took, seconds(12)) << "heartbeat timeout 3 s, took "
                               << std::chrono::duration_cast<milliseconds>(took).count() << " ms";
  EXPECT_EQ(statusCall(*session), CUDA_ERROR_DEVICE_UNAVAILABLE);  // and every later call
}

// The heartbeat lifts TCP_USER_TIMEOUT while a busy peer keeps its window closed
// (transport/tcp_peer_watch.h): a peer whose host goes away then must still be found, by the
// window probes it stops answering.
TEST_F(NetworkCutTest, APeerGoneWhileItsWindowIsClosedIsFoundByItsUnansweredProbes) {
  // A peer that accepts and never reads: its window closes and its kernel answers our probes.
  e2e::ChildProcess sink(e2e::ChildProcess::Options{"/usr/sbin/ip",
                                                    {"netns", "exec", ns_, "python3", "-c",
                                                     "import socket, sys, time\n"
                                                     "s = socket.create_server(('" +
                                                         serverAddress_ +
                                                         "', 7001))\n"
                                                         "print('listening', flush=True)\n"
                                                         "c, _ = s.accept()\n"
                                                         "time.sleep(600)\n"},
                                                    {{"LD_PRELOAD", std::nullopt}},
                                                    std::nullopt});
  ASSERT_TRUE(sink.waitForStdout("listening", seconds(30))) << sink.finish(seconds(5)).describe();
  auto connection =
      transport::connectEndpoint(transport::Endpoint{"tcp", serverAddress_, 7001}, 5000);
  connection->setDeadPeerTimeoutMs(1000);
  std::vector<std::byte> bulk(64u << 20);
  auto sending = std::async(std::launch::async, [&]() -> std::string {
    std::byte message[8] = {};
    transport::ConstBuffer messageParts[] = {{message, sizeof message}};
    transport::ConstBuffer bulkParts[] = {{bulk.data(), bulk.size()}};
    try {
      connection->sendFrame(messageParts, bulkParts);
    } catch (const transport::TransportError& e) {
      return e.what();
    }
    return "sent";
  });
  std::this_thread::sleep_for(seconds(3));  // three heartbeats: alive, window closed
  ASSERT_EQ(sending.wait_for(seconds(0)), std::future_status::timeout)
      << "the send ended while the peer was alive: " << sending.get();

  ASSERT_EQ(sh("ip link set " + hostLink_ + " down"), 0);
  auto start = steady_clock::now();
  ASSERT_EQ(sending.wait_for(seconds(60)), std::future_status::ready)
      << "a peer gone with its window closed was not found in 60 s";
  auto took = std::chrono::duration_cast<milliseconds>(steady_clock::now() - start).count();
  std::string error = sending.get();
  EXPECT_NE(error.find("the peer stopped answering"), std::string::npos) << error;
  EXPECT_LT(took, 40000) << error;
}

}  // namespace
}  // namespace gpupool::hardening
