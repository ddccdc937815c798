// gpupoold's event loop (docs/hardening.md, "No thread per idle connection"), on a real server:
// connections that are idle or still trickling their Hello hold no thread and one descriptor each,
// and a single worker serves every busy client in turn.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gpupool_server.h"
#include "process_figures.h"
#include "wire_client.h"

namespace gpupool::hardening {
namespace {

using std::chrono::milliseconds;

long threadsOf(pid_t pid) { return e2e::figuresOf(pid).threads; }
long descriptorsOf(pid_t pid) { return e2e::figuresOf(pid).descriptors; }

// A connection that sends a frame header announcing a 64-byte message, then part of it, and stops.
class Straggler {
 public:
  explicit Straggler(uint16_t port) : fd_(connectToLoopback(port)) {
    const char partial[20] = {'G', 'P', 'P', 'L', 64};
    if (::send(fd_, partial, sizeof partial, MSG_NOSIGNAL) != sizeof partial)
      throw std::runtime_error("send failed");
  }
  ~Straggler() { ::close(fd_); }
  Straggler(const Straggler&) = delete;
  Straggler& operator=(const Straggler&) = delete;

 private:
  int fd_;
};

// Polls `condition` for up to 10 s.
template <class Condition>
bool eventually(Condition condition) {
  for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
       std::chrono::steady_clock::now() < end;) {
    if (condition()) return true;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return condition();
}

e2e::ServerOptions withWorkers(const char* workers) {
  e2e::ServerOptions options;
  options.extraArgs = {
      "--workers", workers, "--handshake-deadline-ms", "60000", "--max-unauthenticated-per-source",
      "0"};
  return options;
}

TEST(EventLoopTest, StragglersMidHelloHoldNoWorker) {
  e2e::GpupoolServer server(withWorkers("1"));
  long threadsBefore = threadsOf(server.pid());
  ASSERT_GT(threadsBefore, 0);
  std::vector<std::unique_ptr<Straggler>> stragglers;
  for (int i = 0; i < 50; ++i) stragglers.push_back(std::make_unique<Straggler>(server.port()));
  // With a thread per connection each of them would hold one, and with a blocking read on the one
  // worker, the client below would never be served.
  WireClient client(server.endpoint());
  uint64_t context = client.createContext().handle;
  ASSERT_NE(context, 0u);
  for (int i = 0; i < 20; ++i) {
    Reply alloc = client.alloc(context, 4096);
    ASSERT_EQ(alloc.result, CUDA_SUCCESS) << alloc.message;
    ASSERT_EQ(client.free(context, alloc.handle).result, CUDA_SUCCESS);
  }
  EXPECT_LE(threadsOf(server.pid()), threadsBefore + 2) << "stragglers hold threads";
}

TEST(EventLoopTest, IdleClientsHoldNoThreadAndOneDescriptorEach) {
  e2e::GpupoolServer server(withWorkers("2"));
  long threadsBefore = threadsOf(server.pid());
  long descriptorsBefore = descriptorsOf(server.pid());
  constexpr unsigned kClients = 200;
  std::vector<std::unique_ptr<WireClient>> clients;
  for (unsigned i = 0; i < kClients; ++i)
    clients.push_back(std::make_unique<WireClient>(server.endpoint()));
  // Each has said Hello and been welcomed; now they are idle.
  EXPECT_LE(threadsOf(server.pid()), threadsBefore + 2);
  EXPECT_LE(descriptorsOf(server.pid()), descriptorsBefore + kClients + 2);
  for (unsigned i = 0; i < kClients; i += 20) {
    EXPECT_EQ(clients[i]->createContext().result, CUDA_SUCCESS) << "idle client " << i;
  }
  clients.clear();
  EXPECT_TRUE(eventually([&] { return descriptorsOf(server.pid()) <= descriptorsBefore + 2; }))
      << descriptorsOf(server.pid()) << " descriptors after every client left, "
      << descriptorsBefore << " before";
}

TEST(EventLoopTest, OneWorkerServesEveryBusyClientInTurn) {
  e2e::GpupoolServer server(withWorkers("1"));
  constexpr int kClients = 8, kCalls = 50;
  std::atomic<int> served{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&] {
      WireClient client(server.endpoint());
      uint64_t context = client.createContext().handle;
      for (int i = 0; i < kCalls; ++i) {
        Reply alloc = client.alloc(context, 256);
        if (alloc.result != CUDA_SUCCESS) return;
        if (client.free(context, alloc.handle).result != CUDA_SUCCESS) return;
        ++served;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(served.load(), kClients * kCalls);
}

}  // namespace
}  // namespace gpupool::hardening
