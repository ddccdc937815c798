// RdmaConnection, the event loop's view: the readiness descriptor and frameArrived, so gpupoold
// serves an idle RDMA session without a thread (issue 21), as it does TCP and TLS sessions.
#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>
#include <iterator>

#include "transport/rdma/rdma_connection.h"
#include "transport/rdma/rdma_connection_internal.h"
#include "transport/rdma/verbs_call.h"

namespace gpupool::transport::rdma {

int RdmaConnection::readinessDescriptor() const {
  std::lock_guard lock(mutex_);
  if (readiness_.get() >= 0) return readiness_.get();
  FileDescriptor epoll(::epoll_create1(EPOLL_CLOEXEC));
  if (epoll.get() < 0) return -1;  // the server then gives the session a thread
  for (int fd : {completionChannel_->fd, channel_->fd, readyFd_.get()}) {
    epoll_event event{};
    // The channels' events may be taken by a waiting thread instead (edge: no spinning on them
    // meanwhile); readyFd_ is read by frameArrived only (level).
    event.events = fd == readyFd_.get() ? EPOLLIN : EPOLLIN | EPOLLET;
    event.data.fd = fd;  // frameArrived reads only the descriptors that have something
    if (::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, fd, &event) < 0) return -1;
  }
  readiness_.reset(epoll.release());
  return readiness_.get();
}

void RdmaConnection::signalReadiness() {
  if (readiness_.get() < 0) return;  // no event loop watches this connection (a client's)
  uint64_t one = 1;
  // Fails only when the counter is full: it is readable then anyway.
  [[maybe_unused]] auto n = ::write(readyFd_.get(), &one, sizeof one);
}

bool RdmaConnection::readyAgain() {
  std::lock_guard lock(mutex_);
  signalReadiness();
  return true;
}

bool RdmaConnection::frameArrived() {
  std::lock_guard lock(mutex_);
  checkUsable();
  if (shutdown_) fail(Kind::kDisconnected, "connection shut down");
  if (frameInCompletionQueue()) return true;
  // Edge-triggered inside: taking the edges now means the descriptor turns readable again only for
  // events that come after this look.
  epoll_event events[4];
  int n;
  while ((n = ::epoll_wait(readiness_.get(), events, 4, 0)) < 0 && errno == EINTR) {
  }
  bool completions = false, cm = false;
  for (int i = 0; i < n; ++i) {
    if (events[i].data.fd == readyFd_.get()) {
      uint64_t count = 0;
      [[maybe_unused]] auto r = ::read(readyFd_.get(), &count, sizeof count);
    }
    completions |= events[i].data.fd == completionChannel_->fd;
    cm |= events[i].data.fd == channel_->fd;
  }
  if (polling_) {
    // The thread that drives the CQ may leave what these edges announced in the channels.
    edgesUntaken_ |= completions || cm;
  } else {
    // No thread drives the CQ: this one does, as pollUntil would, without waiting.
    if (completions || edgesUntaken_) takeCompletionEvents();
    if (cm || edgesUntaken_) takeCmEvents();
    edgesUntaken_ = false;
    while (pollCompletions()) {
    }
    // Arm, then poll once more: a completion that came before arming raises no event.
    armCompletionQueue();
    while (pollCompletions()) {
    }
  }
  // Otherwise the thread that drives the CQ signals readyFd_ when it queues a frame's start or
  // leaves that role.
  if (wholeMessageQueued()) return true;
  // What the peer sent before leaving was delivered first.
  if (peerGone_) fail(Kind::kDisconnected, "connection closed by peer");
  return false;
}

bool RdmaConnection::frameInCompletionQueue() {
  // A busy session's next frame usually came while the last one was served: it is taken from the
  // CQ with no system call. The events it raised stay for a later look, which finds nothing (the
  // loop may then wake this session once for nothing).
  if (!polling_) {
    while (pollCompletions()) {
    }
  }
  return wholeMessageQueued();
}

bool RdmaConnection::nextFrameArrived() {
  {
    std::unique_lock lock(mutex_);
    checkUsable();
    if (frameInCompletionQueue()) return true;
    if (pollMax_.count() > 0 && readiness_.get() >= 0 && !polling_ && !shutdown_ && !peerGone_ &&
        pollRhythm_.spinThisTurn()) {
      if (spinForFrame(lock)) {
        pollRhythm_.caught();
        return true;
      }
      pollRhythm_.missed();
    }
  }
  // Nothing came: the look that arms the CQ for the event loop.
  return frameArrived();
}

bool RdmaConnection::spinForFrame(std::unique_lock<std::mutex>& lock) {
  // This thread drives the CQ meanwhile, spinning without the mutex as pollUntil does, so a thread
  // of the server that sends on this connection is not held up.
  polling_ = loopThreadPolls_ = true;
  struct LeaveRole {
    RdmaConnection& connection;
    std::unique_lock<std::mutex>& lock;
    ~LeaveRole() {
      if (!lock.owns_lock()) lock.lock();
      connection.polling_ = connection.loopThreadPolls_ = false;
      connection.progressed_.notify_all();
    }
  } leave{*this, lock};
  const auto deadline = Clock::now() + pollMax_;
  for (;;) {
    ibv_wc wcs[kPollBatch];
    int n = 0;
    const uint64_t wakeups = wakeups_;
    lock.unlock();
    while (n == 0 && !shutdown_ && wakeups_ == wakeups && Clock::now() < deadline) {
      for (int i = 0; i < 64 && n == 0; ++i) n = ibv_poll_cq(cq_.get(), kPollBatch, wcs);
    }
    lock.lock();
    if (handleCompletions(wcs, n)) {
      progressed_.notify_all();
      if (wholeMessageQueued()) return true;
      continue;
    }
    // Else another thread changed what it waits for (wakeWaiters): it hears of progress as we go.
    if (shutdown_ || Clock::now() >= deadline) return false;
  }
}

bool RdmaConnection::wholeMessageQueued() const {
  if (incoming_.empty()) return false;
  const WireHeader& begin = *incoming_.front().header;
  // Anything but a frame's start is malformed here: receiveFrame says so.
  if (begin.type != uint32_t(WireType::kFrameBegin)) return true;
  uint64_t queued = begin.payloadBytes;
  size_t parts = 1;
  for (auto it = std::next(incoming_.begin()); queued < begin.a && it != incoming_.end();
       ++it, ++parts) {
    if (it->header->type != uint32_t(WireType::kMessageData)) return true;
    queued += it->header->payloadBytes;
  }
  // A message larger than half the receive window is taken in once that much of it is here: the
  // rest comes as receiveFrame gives the buffers back (a client that stops inside it is cut off by
  // the receive timeout).
  return queued >= begin.a || parts >= kRdmaRecvSlots / 2;
}

}  // namespace gpupool::transport::rdma
