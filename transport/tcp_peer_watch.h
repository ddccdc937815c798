// The TCP heartbeat (Connection::setDeadPeerTimeoutMs): tells a peer whose host is gone from one
// that is alive but busy.
//
// The kernel does most of it: keepalive probes while nothing is outstanding, TCP_USER_TIMEOUT
// while sent bytes wait for their acknowledgement. But since Linux 5.11 TCP_USER_TIMEOUT also ends
// a connection whose peer keeps its receive window closed that long, however promptly its kernel
// answers our window probes: a gpupoold busy in one request (a long JIT compile) while the client
// has more to send than fits, a program stopped in a debugger. So while the peer's window is
// closed the watch lifts TCP_USER_TIMEOUT and judges the peer itself (gone once three window
// probes in a row went unanswered and nothing came from it for the timeout), and arms it again
// once the window opens. The probes back off, doubling up to one every two minutes while the
// window stays closed, so a host that dies then may be noticed minutes later (the kernel alone:
// after 15 unanswered probes, half an hour); an open window keeps the kernel's bound.
//
// It looks when a wait on the socket has lasted lookIntervalMs() (TcpConnection's waits), and when
// the connection's owner asks (Connection::checkPeer: the client's flusher, while no call waits).
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>

namespace gpupool::transport {

class TcpPeerWatch {
 public:
  // Arms the heartbeat on `fd` for a peer silent about `ms` (0: off, and the kernel's defaults).
  void arm(int fd, unsigned ms);
  bool armed() const { return deadPeerMs_.load(std::memory_order_relaxed) != 0; }
  // How long a wait on the socket may go on before it looks again.
  int lookIntervalMs() const;

  // Looks at the connection (a call within half a look interval of the last look, or while
  // another thread looks, returns at once): lifts or arms TCP_USER_TIMEOUT by the peer's window,
  // and throws TransportError (kTimeout) once the peer is judged gone (the socket is shut down
  // then, waking every waiter), and at every later look.
  void look();
  // poll(2) of `fd` for `events`, at most timeoutMs (-1: no bound), looking at the peer every look
  // interval while armed: poll's result (0: timed out; -1 and errno), or TransportError, its
  // message starting with `what` (send, receive), once the peer is judged gone.
  int poll(int fd, short events, int timeoutMs, const char* what);

  // Why the peer was judged gone; empty while it was not. For a waiter the shutdown woke.
  std::string gone() const {
    if (!judgedGone_.load(std::memory_order_acquire)) return {};
    return gone_;
  }

 private:
  int fd_ = -1;
  std::atomic<unsigned> deadPeerMs_{0};
  std::mutex looking_;
  std::chrono::steady_clock::time_point lastLook_{};
  bool userTimeoutLifted_ = false;
  std::string gone_;  // why the peer was judged gone; written once, before judgedGone_
  std::atomic<bool> judgedGone_{false};
};

}  // namespace gpupool::transport
