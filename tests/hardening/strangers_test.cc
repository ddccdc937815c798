// Connections before trust (docs/hardening.md, "Strangers"): a connection that does not complete
// its Hello in time is closed however it trickles its bytes, and connections that have not
// authenticated are bounded in total and per source address, refusals counted in /metrics and
// logged once per source. Real gpupoold processes, real sockets.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "gpupool_server.h"
#include "http_get.h"
#include "wire_client.h"

namespace gpupool::hardening {
namespace {

using Clock = std::chrono::steady_clock;
using e2e::httpGet;
using std::chrono::milliseconds;

// A TCP connection that says nothing unless told to.
class SilentConnection {
 public:
  explicit SilentConnection(uint16_t port) : fd_(connectToLoopback(port)) {}
  ~SilentConnection() { ::close(fd_); }
  SilentConnection(const SilentConnection&) = delete;
  SilentConnection& operator=(const SilentConnection&) = delete;

  // Whether the server closed (or reset) the connection within `within`.
  bool closedWithin(milliseconds within) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(within.count())) <= 0) return false;
    char byte;
    return ::recv(fd_, &byte, 1, MSG_DONTWAIT) <= 0;
  }
  // Sends one byte; false once the server has closed the connection.
  bool sendByte(char byte) { return ::send(fd_, &byte, 1, MSG_NOSIGNAL) == 1; }

 private:
  int fd_;
};

// The value of the metric sample `sample` (name and labels as written), or -1.
double metric(const std::string& metrics, const std::string& sample) {
  auto at = metrics.find("\n" + sample + " ");
  return at == std::string::npos ? -1 : std::stod(metrics.substr(at + sample.size() + 2));
}

// A server with /metrics and the given extra arguments.
struct MeteredServer {
  explicit MeteredServer(std::vector<std::string> args)
      : server([&] {
          e2e::ServerOptions options;
          options.extraArgs = std::move(args);
          options.extraArgs.insert(options.extraArgs.end(), {"--metrics-listen", "127.0.0.1:0"});
          return options;
        }()),
        metricsUrl(server.metricsUrl()) {}
  // Waits until the gauge of unauthenticated connections reads `n`.
  bool waitForStrangers(double n) {
    for (auto end = Clock::now() + std::chrono::seconds(10); Clock::now() < end;) {
      if (metric(httpGet(metricsUrl), "gpupool_unauthenticated_connections") == n) return true;
      std::this_thread::sleep_for(milliseconds(20));
    }
    return false;
  }
  e2e::GpupoolServer server;
  std::string metricsUrl;
};

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(StrangersTest, SilentConnectionIsClosedByTheHandshakeDeadline) {
  MeteredServer metered({"--handshake-deadline-ms", "500"});
  ASSERT_FALSE(metered.metricsUrl.empty()) << metered.server.log();
  auto start = Clock::now();
  SilentConnection silent(metered.server.port());
  ASSERT_TRUE(silent.closedWithin(milliseconds(10000))) << "still open after 10 s";
  auto took = Clock::now() - start;
  EXPECT_GE(took, milliseconds(400));
  EXPECT_LT(took, milliseconds(5000));
  EXPECT_TRUE(metered.waitForStrangers(0));
  EXPECT_EQ(metric(httpGet(metered.metricsUrl), "gpupool_handshake_deadline_closed_total"), 1);
  EXPECT_NE(metered.server.log().find("no Hello within 500 ms"), std::string::npos);
  // A client that says Hello at once is served as before.
  WireClient client(metered.server.endpoint());
}

TEST(StrangersTest, TricklingHelloIsHeldToTheSameDeadline) {
  e2e::ServerOptions options;
  options.extraArgs = {"--handshake-deadline-ms", "800"};
  e2e::GpupoolServer server(options);
  SilentConnection trickler(server.port());
  auto start = Clock::now();
  // A frame header's magic, then a message size, one byte every 100 ms: each read makes progress,
  // yet the whole Hello never comes.
  const char bytes[] = {'G', 'P', 'P', 'L', 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  bool closed = false;
  for (size_t i = 0; !closed && Clock::now() - start < std::chrono::seconds(10); ++i) {
    closed =
        !trickler.sendByte(bytes[i % sizeof bytes]) || trickler.closedWithin(milliseconds(100));
  }
  ASSERT_TRUE(closed) << "a trickling connection stayed open for 10 s";
  auto took = Clock::now() - start;
  EXPECT_GE(took, milliseconds(700));
  EXPECT_LT(took, milliseconds(5000));
}

TEST(StrangersTest, StrangersPerSourceAreBoundedCountedAndLoggedOnce) {
  MeteredServer metered(
      {"--max-unauthenticated-per-source", "4", "--handshake-deadline-ms", "60000"});
  ASSERT_FALSE(metered.metricsUrl.empty()) << metered.server.log();
  std::vector<std::unique_ptr<SilentConnection>> held;
  for (int i = 0; i < 4; ++i)
    held.push_back(std::make_unique<SilentConnection>(metered.server.port()));
  ASSERT_TRUE(metered.waitForStrangers(4));
  for (int i = 0; i < 6; ++i) {
    SilentConnection refused(metered.server.port());
    EXPECT_TRUE(refused.closedWithin(milliseconds(5000))) << "refusal " << i << " kept open";
  }
  for (auto& h : held) EXPECT_FALSE(h->closedWithin(milliseconds(0)));
  std::string metrics = httpGet(metered.metricsUrl);
  EXPECT_EQ(
      metric(metrics, "gpupool_connections_refused_total{reason=\"unauthenticated_per_source\"}"),
      6)
      << metrics;
  EXPECT_EQ(metric(metrics, "gpupool_connections_refused_total{reason=\"unauthenticated\"}"), 0);
  EXPECT_EQ(occurrences(metered.server.log(), "refusing connections from 127.0.0.1"), 1u)
      << metered.server.log();
  // Once the strangers go, clients from that address are admitted again.
  held.clear();
  ASSERT_TRUE(metered.waitForStrangers(0));
  WireClient client(metered.server.endpoint());
}

TEST(StrangersTest, StrangersInTotalAreBounded) {
  MeteredServer metered({"--max-unauthenticated", "3", "--handshake-deadline-ms", "60000"});
  ASSERT_FALSE(metered.metricsUrl.empty()) << metered.server.log();
  std::vector<std::unique_ptr<SilentConnection>> held;
  for (int i = 0; i < 3; ++i)
    held.push_back(std::make_unique<SilentConnection>(metered.server.port()));
  ASSERT_TRUE(metered.waitForStrangers(3));
  SilentConnection refused(metered.server.port());
  EXPECT_TRUE(refused.closedWithin(milliseconds(5000)));
  EXPECT_EQ(metric(httpGet(metered.metricsUrl),
                   "gpupool_connections_refused_total{reason=\"unauthenticated\"}"),
            1);
  // Authenticated sessions are not strangers: after one stranger goes, a client gets in and
  // leaves the count where it was.
  held.pop_back();
  ASSERT_TRUE(metered.waitForStrangers(2));
  WireClient client(metered.server.endpoint());
  EXPECT_TRUE(metered.waitForStrangers(2));
}

}  // namespace
}  // namespace gpupool::hardening
