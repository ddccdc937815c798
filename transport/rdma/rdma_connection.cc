// RdmaConnection, part 1 of 4: verbs resources, receive buffers and completion progress.
// (rdma_send.cc: send path and packing; rdma_bulk.cc: bulk READ/WRITE and staging; rdma_receive.cc:
// frames and bulk received.)
#include "transport/rdma/rdma_connection.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "transport/pinned_memory.h"
#include "transport/rdma/rdma_connection_internal.h"
#include "transport/rdma/rdma_queue_pair.h"
#include "transport/rdma/verbs_call.h"
#include "transport/rdma/verbs_library.h"

namespace gpupool::transport::rdma {
namespace {

std::string addressText(const sockaddr* sa) {
  char text[INET6_ADDRSTRLEN] = {};
  if (!sa) return "unknown";
  if (sa->sa_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
    return std::string(text) + ":" + std::to_string(ntohs(in->sin_port));
  }
  if (sa->sa_family == AF_INET6) {
    auto* in = reinterpret_cast<const sockaddr_in6*>(sa);
    inet_ntop(AF_INET6, &in->sin6_addr, text, sizeof text);
    return "[" + std::string(text) + "]:" + std::to_string(ntohs(in->sin6_port));
  }
  return "unknown";
}

}  // namespace

RdmaConnection::RdmaConnection(rdma_event_channel* channel, rdma_cm_id* id, bool stagePageable,
                               const PinnedMemory& pinned)
    : channel_(channel), id_(id), pinned_(pinned), stagePageable_(stagePageable) {
  // A throw below unwinds what was created so far, in reverse (the members' order).
  setNonBlocking(channel_->fd);
  wakeFd_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  readyFd_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (wakeFd_.get() < 0 || readyFd_.get() < 0)
    throw TransportError(Kind::kUnavailable, verbsError("eventfd", errno));
  pd_.reset(checkCreated(ibv_alloc_pd(id_->verbs), "ibv_alloc_pd"));
  completionChannel_.reset(
      checkCreated(ibv_create_comp_channel(id_->verbs), "ibv_create_comp_channel"));
  setNonBlocking(completionChannel_->fd);
  int cqe = kRdmaRecvSlots + kSendQueueDepth + 16;
  cq_.reset(checkCreated(ibv_create_cq(id_->verbs, cqe, nullptr, completionChannel_.get(), 0),
                         "ibv_create_cq"));
  maxInlineBytes_ = createRcQueuePair(id_.get(), pd_.get(), cq_.get(), kSendQueueDepth,
                                      kRdmaRecvSlots, kRequestedInlineBytes);
  qp_.created(id_.get());
  recvArena_.resize(kRdmaRecvSlots * kRdmaSlotBytes);
  sendArena_.resize(kRdmaSendSlots * kRdmaSlotBytes);
  recvMr_.reset(checkCreated(
      ibv_reg_mr(pd_.get(), recvArena_.data(), recvArena_.size(), IBV_ACCESS_LOCAL_WRITE),
      "ibv_reg_mr"));
  sendMr_.reset(
      checkCreated(ibv_reg_mr(pd_.get(), sendArena_.data(), sendArena_.size(), 0), "ibv_reg_mr"));
  slotUsers_.assign(kRdmaRecvSlots, 0);
  sendUsed_.assign(kRdmaSendSlots, 0);
  for (int i = kRdmaSendSlots - 1; i >= 0; --i) freeSendSlots_.push_back(i);
  for (uint32_t i = 0; i < kRdmaRecvSlots; ++i) postReceive(static_cast<int>(i));
  registrations_ = std::make_unique<MemoryRegistrations>(pd_.get(), pinned_, &stats_);
  ibv_device_attr attr{};
  if (ibv_query_device(id_->verbs, &attr) == 0) {
    maxReadsInFlight_ =
        uint32_t(std::clamp(std::min(attr.max_qp_rd_atom, attr.max_qp_init_rd_atom), 1, 16));
  }
  checkReturned(ibv_req_notify_cq(cq_.get(), 0), "ibv_req_notify_cq", Kind::kUnavailable);
  cqArmed_ = true;
}

// The members then unwind in reverse order of creation, the queue pair first.
RdmaConnection::~RdmaConnection() {
  if (qp_ && !peerGone_) rdma_disconnect(id_.get());
}

void RdmaConnection::markEstablished() { peer_ = addressText(rdma_get_peer_addr(id_.get())); }

WireHeader& RdmaConnection::receiveHeader(int slot) {
  return *reinterpret_cast<WireHeader*>(recvArena_.data() + size_t(slot) * kRdmaSlotBytes);
}

std::byte* RdmaConnection::sendBuffer(int slot) {
  return sendArena_.data() + size_t(slot) * kRdmaSlotBytes;
}

void RdmaConnection::postReceive(int slot) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(&receiveHeader(slot)), uint32_t(kRdmaSlotBytes),
              recvMr_->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = kWrRecv | uint64_t(slot);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (int ret = ibv_post_recv(id_->qp, &wr, &bad)) {
    fail(Kind::kDisconnected, verbsError("ibv_post_recv", ret));
  }
}

void RdmaConnection::releaseReceive(int slot) {
  if (slotUsers_[slot] > 1) {
    slotUsers_[slot]--;
    return;
  }
  slotUsers_[slot] = 0;
  postReceive(slot);
  consumed_++;
  maybeReturnCredits();
}

void RdmaConnection::fail(TransportError::Kind kind, const std::string& why) {
  if (!broken_) {
    broken_ = true;
    brokenKind_ = kind;
    brokenReason_ = why;
    wakeWaiters();      // the other half's wait ends with this error too
    signalReadiness();  // and the event loop's
  }
  throw TransportError(kind, why);
}

void RdmaConnection::checkUsable() const {
  if (broken_) throw TransportError(brokenKind_, brokenReason_);
}

bool RdmaConnection::pollCompletions() {
  ibv_wc wcs[kPollBatch];
  return handleCompletions(wcs, ibv_poll_cq(cq_.get(), kPollBatch, wcs));
}

bool RdmaConnection::handleCompletions(const ibv_wc* wcs, int n) {
  if (n < 0) fail(Kind::kDisconnected, "ibv_poll_cq failed");
  bool frameQueued = false;
  for (int i = 0; i < n; ++i) {
    const ibv_wc& wc = wcs[i];
    uint64_t kind = wc.wr_id & kWrKindMask;
    int slot = static_cast<int>(wc.wr_id & ~kWrKindMask);
    if (wc.status != IBV_WC_SUCCESS) {
      if (shutdown_) fail(Kind::kDisconnected, "connection shut down");
      if (peerGone_ || wc.status == IBV_WC_WR_FLUSH_ERR)
        fail(Kind::kDisconnected, "connection closed by peer");
      if (wc.status == IBV_WC_RETRY_EXC_ERR) {
        // The adapter resent a work request until it gave up: nothing answers at the peer's end.
        fail(Kind::kTimeout, std::string("the peer stopped answering: its host acknowledged no ") +
                                 (kind == kWrProbe ? "heartbeat probe" : "work request") + " (" +
                                 ibv_wc_status_str(wc.status) + ")");
      }
      fail(Kind::kDisconnected,
           std::string("RDMA work request failed: ") + ibv_wc_status_str(wc.status));
    }
    if (kind == kWrProbe) {
      probeOutstanding_ = false;
    } else if (kind == kWrSend) {
      std::memset(sendBuffer(slot) + sizeof(WireHeader), 0, sendUsed_[slot]);
      sendUsed_[slot] = 0;
      freeSendSlots_.push_back(slot);
    } else if (kind == kWrRead) {
      readsDone_++;
    } else if (kind == kWrWrite) {
      writesDone_++;
    } else if (kind == kWrRecv) {
      const WireHeader& h = receiveHeader(slot);
      if (wc.byte_len < sizeof(WireHeader) || h.magic != kWireMagic ||
          h.payloadBytes > wc.byte_len - sizeof(WireHeader)) {
        fail(Kind::kMalformed, "malformed RDMA message");
      }
      peerConsumed_ = std::max(peerConsumed_, h.consumed);
      slotUsers_[slot] = 1;
      auto type = static_cast<WireType>(h.type);
      if (type == WireType::kCredit) {
        releaseReceive(slot);
      } else if (type == WireType::kBulkDone) {
        remoteBulkDone_++;
        releaseReceive(slot);
      } else if (type == WireType::kBulkDestination) {
        if (h.b == 0) fail(Kind::kMalformed, "malformed RDMA message (empty bulk destination)");
        peerOffer_ = BulkOffer{true, nullptr, h.a, h.b, h.rkey};
        releaseReceive(slot);
      } else if (type == WireType::kPacked) {
        unpack(slot, h);
        frameQueued = true;
      } else {
        incoming_.push_back({slot, &h});
        frameQueued |= type == WireType::kFrameBegin;
      }
    }
  }
  // A thread waiting for something else took in the start of a frame: the event loop watching this
  // connection learns of it now, not when that thread is done.
  // (Not when the thread polling is the one that serves it: nextFrameArrived.)
  if (frameQueued && polling_ && !loopThreadPolls_) signalReadiness();
  if (n > 0) {
    // Any completion is an answer from the peer's host (an acknowledgement, or its SEND).
    if (heartbeatMs_) lastHeard_ = Clock::now();
    maybeReturnCredits();
  }
  return n > 0;
}

void RdmaConnection::waitUntil(const std::function<bool()>& done, unsigned timeoutMs,
                               const char* what) {
  auto deadline = Clock::now() + std::chrono::milliseconds(timeoutMs);
  // The entry point that called us holds mutex_ and unlocks it when it returns: whatever happens
  // here, it gets the mutex back held.
  std::unique_lock lock(mutex_, std::adopt_lock);
  struct HandBack {
    std::unique_lock<std::mutex>& lock;
    ~HandBack() {
      if (!lock.owns_lock()) lock.lock();
      lock.release();
    }
  } handBack{lock};
  for (;;) {
    if (done()) return;
    checkUsable();  // another thread's wait may have failed
    if (shutdown_) fail(Kind::kDisconnected, "connection shut down");
    if (polling_) {
      if (!waitForPoller(lock, timeoutMs, deadline) && !done()) timedOut(what);
    } else {
      pollUntil(lock, done, timeoutMs, deadline, what);
    }
  }
}

bool RdmaConnection::waitForPoller(std::unique_lock<std::mutex>& lock, unsigned timeoutMs,
                                   Clock::time_point deadline) {
  if (!timeoutMs) {
    progressed_.wait(lock);
    return true;
  }
  return progressed_.wait_until(lock, deadline) == std::cv_status::no_timeout;
}

void RdmaConnection::timedOut(const char* what) {
  // The flow-control state goes with the error: a stall names which side held what.
  const auto held =
      std::count_if(slotUsers_.begin(), slotUsers_.end(), [](uint32_t users) { return users > 0; });
  fail(Kind::kTimeout,
       std::string("timed out waiting for the peer (") + what + "; credits " +
           std::to_string(credits()) + ", sent " + std::to_string(sent_) + ", peer consumed " +
           std::to_string(peerConsumed_) + ", consumed " + std::to_string(consumed_) +
           ", returned " + std::to_string(consumedReturned_) + ", receive slots held " +
           std::to_string(held) + ", messages queued " + std::to_string(incoming_.size()) +
           ", free send slots " + std::to_string(freeSendSlots_.size()) + ")");
}

void RdmaConnection::wakeWaiters() {
  wakeups_++;
  progressed_.notify_all();
  if (polling_) {
    uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wakeFd_.get(), &one, sizeof one);
  }
}

// Drains the CQ until done() holds, for every thread: the others wait on progressed_.
void RdmaConnection::pollUntil(std::unique_lock<std::mutex>& lock,
                               const std::function<bool()>& done, unsigned timeoutMs,
                               Clock::time_point deadline, const char* what) {
  polling_ = true;
  // However this ends, a waiting thread takes over the CQ.
  struct LeaveRole {
    RdmaConnection& connection;
    std::unique_lock<std::mutex>& lock;
    ~LeaveRole() {
      if (!lock.owns_lock()) lock.lock();
      connection.polling_ = false;
      connection.progressed_.notify_all();
      // The event loop watching this connection left the CQ to us, and we may have taken its last
      // event without arming it again: it looks for itself (frameArrived).
      connection.signalReadiness();
    }
  } leave{*this, lock};
  for (;;) {
    if (done()) return;
    checkUsable();
    if (shutdown_) fail(Kind::kDisconnected, "connection shut down");
    // Spins without the mutex, so the other half can send meanwhile (only this thread polls the
    // CQ, so completions are still handled in order), until something completes or another thread
    // changed what we wait for.
    ibv_wc wcs[kPollBatch];
    int n = 0;
    uint64_t wakeups = wakeups_;
    lock.unlock();
    for (int spins = 0; spins < kSpinPolls && n == 0 && !shutdown_ && wakeups_ == wakeups;
         ++spins) {
      n = ibv_poll_cq(cq_.get(), kPollBatch, wcs);
    }
    lock.lock();
    if (handleCompletions(wcs, n)) {
      progressed_.notify_all();
      continue;
    }
    if (wakeups_ != wakeups || shutdown_) continue;
    // Arm, then poll once more: a completion that arrived before arming raises no event.
    armCompletionQueue();
    if (pollCompletions()) {
      progressed_.notify_all();
      continue;
    }
    if (done()) return;
    if (peerGone_) fail(Kind::kDisconnected, "connection closed by peer");
    // Before sleeping: the heartbeat's look (a probe's answer wakes this wait like any other).
    const auto now = Clock::now();
    lookAtPeer(now);
    int waitMs = heartbeatLookMs();
    if (timeoutMs) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
      if (left.count() <= 0) timedOut(what);
      waitMs = waitMs < 0 ? static_cast<int>(left.count())
                          : std::min(waitMs, static_cast<int>(left.count()));
    }
    pollfd fds[3] = {
        {completionChannel_->fd, POLLIN, 0}, {channel_->fd, POLLIN, 0}, {wakeFd_.get(), POLLIN, 0}};
    lock.unlock();
    int r = ::poll(fds, 3, waitMs);
    int pollErrno = errno;
    lock.lock();
    if (r < 0 && pollErrno != EINTR)
      fail(Kind::kDisconnected, std::string("poll: ") + std::strerror(pollErrno));
    if (fds[0].revents) takeCompletionEvents();
    // Whatever the peer sent before leaving is still delivered: loop and drain first.
    if (fds[1].revents) takeCmEvents();
    if (fds[2].revents && !shutdown_) {
      // Another thread changed what we wait for (wakeWaiters); shutdown leaves it set for all.
      uint64_t count = 0;
      [[maybe_unused]] auto n = ::read(wakeFd_.get(), &count, sizeof count);
    }
  }
}

void RdmaConnection::armCompletionQueue() {
  if (cqArmed_) return;
  if (int ret = ibv_req_notify_cq(cq_.get(), 0)) {
    fail(Kind::kDisconnected, verbsError("ibv_req_notify_cq", ret));
  }
  cqArmed_ = true;
}

void RdmaConnection::takeCompletionEvents() {
  ibv_cq* cq = nullptr;
  void* context = nullptr;
  while (ibv_get_cq_event(completionChannel_.get(), &cq, &context) == 0) {
    cqArmed_ = false;
    // Acknowledging in batches: each ack takes a lock in the library.
    if (++cq_.unackedEvents >= 64) {
      ibv_ack_cq_events(cq_.get(), cq_.unackedEvents);
      cq_.unackedEvents = 0;
    }
  }
}

void RdmaConnection::takeCmEvents() {
  rdma_cm_event* event = nullptr;
  while (rdma_get_cm_event(channel_.get(), &event) == 0) {
    auto type = event->event;
    rdma_ack_cm_event(event);
    if (type == RDMA_CM_EVENT_DISCONNECTED || type == RDMA_CM_EVENT_DEVICE_REMOVAL ||
        type == RDMA_CM_EVENT_TIMEWAIT_EXIT) {
      peerGone_ = true;
    }
  }
}

void RdmaConnection::shutdown() {
  shutdown_ = true;
  uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wakeFd_.get(), &one, sizeof one);
  n = ::write(readyFd_.get(), &one, sizeof one);  // the event loop's look fails from now on
  // Moves the QP to error: posted work completes with flush errors on both sides.
  if (id_) rdma_disconnect(id_.get());
}

}  // namespace gpupool::transport::rdma
