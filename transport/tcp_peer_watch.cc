#include "transport/tcp_peer_watch.h"

// linux/tcp.h rather than netinet/tcp.h: glibc's tcp_info stops before tcpi_snd_wnd (Linux 5.4).
#include <linux/tcp.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstddef>

#include "transport/connection.h"

namespace gpupool::transport {

constexpr unsigned kUnansweredProbes = 3;

void TcpPeerWatch::arm(int fd, unsigned ms) {
  std::lock_guard lock(looking_);
  fd_ = fd;
  deadPeerMs_ = ms;
  userTimeoutLifted_ = false;
  int on = ms ? 1 : 0;
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  unsigned userTimeout = ms;
  ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &userTimeout, sizeof userTimeout);
  if (!ms) return;
  // Keepalive probes are answered by the peer's kernel, not its application: they find a dead
  // host while nothing is outstanding. Idle, then every interval; TCP_USER_TIMEOUT ends it.
  int probeSeconds = std::max(1, static_cast<int>(ms / 3000));
  int probes = 3;
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &probeSeconds, sizeof probeSeconds);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &probeSeconds, sizeof probeSeconds);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof probes);
}

int TcpPeerWatch::lookIntervalMs() const {
  return static_cast<int>(heartbeatLookIntervalMs(deadPeerMs_.load(std::memory_order_relaxed)));
}

int TcpPeerWatch::poll(int fd, short events, int timeoutMs, const char* what) {
  pollfd p{fd, events, 0};
  if (!armed()) return ::poll(&p, 1, timeoutMs);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
  for (;;) {
    int slice = lookIntervalMs();
    if (timeoutMs >= 0) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                      deadline - std::chrono::steady_clock::now())
                      .count();
      if (left <= 0) return 0;
      slice = std::min(slice, static_cast<int>(left));
    }
    int ready = ::poll(&p, 1, slice);
    if (ready != 0) return ready;
    try {
      look();
    } catch (const TransportError& e) {
      throw TransportError(e.kind(), std::string(what) + " failed: " + e.what());
    }
  }
}

void TcpPeerWatch::look() {
  unsigned deadPeerMs = deadPeerMs_.load(std::memory_order_relaxed);
  if (!deadPeerMs) return;
  std::unique_lock lock(looking_, std::try_to_lock);
  if (!lock.owns_lock()) return;  // another thread is looking
  if (!gone_.empty()) throw TransportError(TransportError::Kind::kTimeout, gone_);
  auto now = std::chrono::steady_clock::now();
  if (now - lastLook_ < std::chrono::milliseconds(lookIntervalMs()) / 2) return;
  lastLook_ = now;

  tcp_info info{};
  socklen_t length = sizeof info;
  if (::getsockopt(fd_, IPPROTO_TCP, TCP_INFO, &info, &length) != 0) return;
  // A kernel older than 5.4 does not say the window: the kernel's bound stays as it is.
  if (length < offsetof(tcp_info, tcpi_snd_wnd) + sizeof info.tcpi_snd_wnd) return;

  bool windowClosed = info.tcpi_snd_wnd == 0;
  if (windowClosed != userTimeoutLifted_) {
    unsigned userTimeout = windowClosed ? 0 : deadPeerMs;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_USER_TIMEOUT, &userTimeout, sizeof userTimeout);
    userTimeoutLifted_ = windowClosed;
  }
  if (!userTimeoutLifted_) return;
  // tcpi_probes counts the window probes sent since the peer last answered. A live peer may leave
  // one or two unanswered in a row (its kernel answers such probes at most every 500 ms,
  // net.ipv4.tcp_invalid_ratelimit), and they back off, doubling; three in a row, with nothing
  // from the peer for the whole timeout, went to a host that is gone. The same for bytes sent
  // before the window closed and retransmitted since (tcpi_retransmits: timeouts in a row).
  unsigned unanswered = std::max<unsigned>(info.tcpi_probes, info.tcpi_retransmits);
  if (unanswered < kUnansweredProbes || info.tcpi_last_ack_recv < deadPeerMs) return;
  gone_ = "the peer stopped answering: nothing from its host for " +
          std::to_string(info.tcpi_last_ack_recv) + " ms while its receive window was closed (" +
          std::to_string(unanswered) + " probes or retransmissions unanswered; heartbeat " +
          std::to_string(deadPeerMs) + " ms)";
  judgedGone_.store(true, std::memory_order_release);
  ::shutdown(fd_, SHUT_RDWR);  // every thread waiting on the connection wakes
  throw TransportError(TransportError::Kind::kTimeout, gone_);
}

}  // namespace gpupool::transport
