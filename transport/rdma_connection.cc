#include "transport/rdma_connection.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include "transport/rdma_pinned_ranges.h"
#include "transport/rdma_queue_pair.h"
#include "transport/verbs_library.h"

namespace gpupool::transport::rdma {
namespace {

using Clock = std::chrono::steady_clock;

// Work request ids: kind in the top byte, slot index below.
constexpr uint64_t kWrRecv = 1ull << 56;
constexpr uint64_t kWrSend = 2ull << 56;
constexpr uint64_t kWrRead = 3ull << 56;
constexpr uint64_t kWrWrite = 4ull << 56;
constexpr uint64_t kWrKindMask = 0xffull << 56;

// Polls before arming the completion channel: a reply usually arrives within microseconds on real
// hardware, and sleeping on the channel costs a syscall and a wakeup.
constexpr int kSpinPolls = 4000;
constexpr uint64_t kMaxReadBytes = 4u << 20;
// RDMA WRITEs of one frame's bulk in flight at once, each at most kMaxReadBytes.
constexpr uint64_t kMaxWritesInFlight = 8;
// Send queue: every SEND slot, plus READs (at most 16 in flight) and WRITEs.
constexpr uint32_t kSendQueueDepth = kRdmaSendSlots + 16 + kMaxWritesInFlight;

void setNonBlocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

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

void awaitCmEvent(rdma_event_channel* channel, rdma_cm_event_type expected, unsigned timeoutMs,
                  const std::string& what, std::vector<std::byte>* privateData) {
  auto deadline = Clock::now() + std::chrono::milliseconds(timeoutMs ? timeoutMs : 5000);
  setNonBlocking(channel->fd);
  for (;;) {
    rdma_cm_event* event = nullptr;
    if (rdma_get_cm_event(channel, &event) == 0) {
      rdma_cm_event_type type = event->event;
      int status = event->status;
      if (privateData) {
        auto* data = static_cast<const std::byte*>(event->param.conn.private_data);
        privateData->assign(data, data ? data + event->param.conn.private_data_len : data);
      }
      rdma_ack_cm_event(event);
      if (type == expected) return;
      std::string why = rdma_event_str(type);
      if (type == RDMA_CM_EVENT_REJECTED) why = "connection refused (rejected by the peer)";
      if (status) why += " (status " + std::to_string(status) + ")";
      throw TransportError(what + " failed: " + why);
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      throw TransportError(what + " failed: rdma_get_cm_event: " + std::strerror(errno));
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) throw TransportError(what + " timed out");
    pollfd p{channel->fd, POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(left.count()));
  }
}

CmHandles::~CmHandles() {
  if (id) rdma_destroy_id(id);
  if (channel) rdma_destroy_event_channel(channel);
}

void resolveRoute(const Endpoint& endpoint, unsigned timeoutMs, CmHandles& cm) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  int rc = getaddrinfo(endpoint.host.c_str(), std::to_string(endpoint.port).c_str(), &hints, &list);
  if (rc != 0 || !list) {
    throw TransportError("cannot resolve '" + endpoint.host + "': " + gai_strerror(rc));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> holder(list, freeaddrinfo);
  if (const std::string& error = verbsLoadError(); !error.empty()) throw TransportError(error);
  cm.channel = rdma_create_event_channel();
  if (!cm.channel) {
    throw TransportError(std::string("rdma_create_event_channel: ") + std::strerror(errno));
  }
  if (rdma_create_id(cm.channel, &cm.id, nullptr, RDMA_PS_TCP) != 0) {
    throw TransportError(std::string("rdma_create_id: ") + std::strerror(errno));
  }
  std::string where = endpoint.url();
  if (rdma_resolve_addr(cm.id, nullptr, list->ai_addr, int(timeoutMs)) != 0) {
    throw TransportError("resolving " + where + ": " + std::strerror(errno));
  }
  awaitCmEvent(cm.channel, RDMA_CM_EVENT_ADDR_RESOLVED, timeoutMs + 1000,
               "resolving " + where + " to an RDMA device");
  if (rdma_resolve_route(cm.id, int(timeoutMs)) != 0) {
    throw TransportError("route to " + where + ": " + std::strerror(errno));
  }
  awaitCmEvent(cm.channel, RDMA_CM_EVENT_ROUTE_RESOLVED, timeoutMs + 1000, "route to " + where);
}

rdma_conn_param connectionParameters(const ConnectParams* params, ibv_context* verbs) {
  rdma_conn_param param{};
  param.private_data = params;
  param.private_data_len = sizeof *params;
  ibv_device_attr attr{};
  uint8_t depth = 4;
  if (verbs && ibv_query_device(verbs, &attr) == 0) {
    depth = static_cast<uint8_t>(
        std::clamp(std::min(attr.max_qp_rd_atom, attr.max_qp_init_rd_atom), 1, 16));
  }
  param.responder_resources = depth;
  param.initiator_depth = depth;
  param.retry_count = 7;
  // Credits make RNR impossible; a finite count turns a bug into an error instead of a stall.
  param.rnr_retry_count = 6;
  return param;
}

RdmaConnection::RdmaConnection(rdma_event_channel* channel, rdma_cm_id* id, bool stagePageable)
    : channel_(channel), id_(id), stagePageable_(stagePageable) {
  try {
    setNonBlocking(channel_->fd);
    wakeFd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wakeFd_ < 0) throw TransportError(std::string("eventfd: ") + std::strerror(errno));
    pd_ = ibv_alloc_pd(id_->verbs);
    if (!pd_) throw TransportError(std::string("ibv_alloc_pd: ") + std::strerror(errno));
    completionChannel_ = ibv_create_comp_channel(id_->verbs);
    if (!completionChannel_) {
      throw TransportError(std::string("ibv_create_comp_channel: ") + std::strerror(errno));
    }
    setNonBlocking(completionChannel_->fd);
    int cqe = kRdmaRecvSlots + kSendQueueDepth + 16;
    cq_ = ibv_create_cq(id_->verbs, cqe, nullptr, completionChannel_, 0);
    if (!cq_) throw TransportError(std::string("ibv_create_cq: ") + std::strerror(errno));
    createRcQueuePair(id_, pd_, cq_, kSendQueueDepth, kRdmaRecvSlots);
    qpCreated_ = true;
    recvArena_.resize(kRdmaRecvSlots * kRdmaSlotBytes);
    sendArena_.resize(kRdmaSendSlots * kRdmaSlotBytes);
    recvMr_ = ibv_reg_mr(pd_, recvArena_.data(), recvArena_.size(), IBV_ACCESS_LOCAL_WRITE);
    sendMr_ = ibv_reg_mr(pd_, sendArena_.data(), sendArena_.size(), 0);
    if (!recvMr_ || !sendMr_)
      throw TransportError(std::string("ibv_reg_mr: ") + std::strerror(errno));
    slotUsers_.assign(kRdmaRecvSlots, 0);
    sendUsed_.assign(kRdmaSendSlots, 0);
    for (int i = kRdmaSendSlots - 1; i >= 0; --i) freeSendSlots_.push_back(i);
    for (uint32_t i = 0; i < kRdmaRecvSlots; ++i) postReceive(static_cast<int>(i));
    registrations_ = new MemoryRegistrations(pd_, &stats_);
    ibv_device_attr attr{};
    if (ibv_query_device(id_->verbs, &attr) == 0) {
      maxReadsInFlight_ =
          uint32_t(std::clamp(std::min(attr.max_qp_rd_atom, attr.max_qp_init_rd_atom), 1, 16));
    }
    if (ibv_req_notify_cq(cq_, 0) != 0) throw TransportError("ibv_req_notify_cq failed");
  } catch (...) {
    releaseResources();
    throw;
  }
}

RdmaConnection::~RdmaConnection() { releaseResources(); }

void RdmaConnection::releaseResources() {
  if (id_ && qpCreated_ && !peerGone_) rdma_disconnect(id_);
  if (qpCreated_) rdma_destroy_qp(id_);
  qpCreated_ = false;
  delete registrations_;
  registrations_ = nullptr;
  for (StagingRing* r : {&sendRing_, &receiveRing_}) {
    if (r->mr) ibv_dereg_mr(r->mr);
    r->mr = nullptr;
  }
  if (recvMr_) ibv_dereg_mr(recvMr_);
  if (sendMr_) ibv_dereg_mr(sendMr_);
  recvMr_ = sendMr_ = nullptr;
  if (cq_) {
    if (unackedCqEvents_) ibv_ack_cq_events(cq_, unackedCqEvents_);
    ibv_destroy_cq(cq_);
    cq_ = nullptr;
  }
  if (completionChannel_) ibv_destroy_comp_channel(completionChannel_);
  completionChannel_ = nullptr;
  if (pd_) ibv_dealloc_pd(pd_);
  pd_ = nullptr;
  if (id_) rdma_destroy_id(id_);
  id_ = nullptr;
  if (channel_) rdma_destroy_event_channel(channel_);
  channel_ = nullptr;
  if (wakeFd_ >= 0) ::close(wakeFd_);
  wakeFd_ = -1;
}

void RdmaConnection::markEstablished() { peer_ = addressText(rdma_get_peer_addr(id_)); }

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
  if (ibv_post_recv(id_->qp, &wr, &bad) != 0) fail("ibv_post_recv failed");
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

void RdmaConnection::fail(const std::string& why) {
  if (!broken_) {
    broken_ = true;
    brokenReason_ = why;
  }
  throw TransportError(why);
}

void RdmaConnection::checkUsable() const {
  if (broken_) throw TransportError(brokenReason_);
}

bool RdmaConnection::pollCompletions() {
  ibv_wc wcs[32];
  int n = ibv_poll_cq(cq_, 32, wcs);
  if (n < 0) fail("ibv_poll_cq failed");
  for (int i = 0; i < n; ++i) {
    const ibv_wc& wc = wcs[i];
    uint64_t kind = wc.wr_id & kWrKindMask;
    int slot = static_cast<int>(wc.wr_id & ~kWrKindMask);
    if (wc.status != IBV_WC_SUCCESS) {
      if (shutdown_) fail("connection shut down");
      if (peerGone_ || wc.status == IBV_WC_WR_FLUSH_ERR) fail("connection closed by peer");
      fail(std::string("RDMA work request failed: ") + ibv_wc_status_str(wc.status));
    }
    if (kind == kWrSend) {
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
        fail("malformed RDMA message");
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
        if (h.b == 0) fail("malformed RDMA message (empty bulk destination)");
        peerOffer_ = BulkOffer{true, nullptr, h.a, h.b, h.rkey};
        releaseReceive(slot);
      } else if (type == WireType::kPacked) {
        unpack(slot, h);
      } else {
        incoming_.push_back({slot, &h});
      }
    }
  }
  if (n > 0) maybeReturnCredits();
  return n > 0;
}

void RdmaConnection::waitUntil(const std::function<bool()>& done, unsigned timeoutMs,
                               const char* what) {
  auto deadline = Clock::now() + std::chrono::milliseconds(timeoutMs);
  int spins = 0;
  for (;;) {
    if (done()) return;
    if (shutdown_) fail("connection shut down");
    if (pollCompletions()) {
      spins = 0;
      continue;
    }
    if (++spins < kSpinPolls) continue;
    spins = 0;
    // Arm, then poll once more: a completion that arrived before arming raises no event.
    if (ibv_req_notify_cq(cq_, 0) != 0) fail("ibv_req_notify_cq failed");
    if (pollCompletions()) continue;
    if (peerGone_) fail("connection closed by peer");
    int waitMs = -1;
    if (timeoutMs) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) {
        fail(std::string("timed out waiting for the peer (") + what + ")");
      }
      waitMs = static_cast<int>(left.count());
    }
    pollfd fds[3] = {
        {completionChannel_->fd, POLLIN, 0}, {channel_->fd, POLLIN, 0}, {wakeFd_, POLLIN, 0}};
    int r = ::poll(fds, 3, waitMs);
    if (r < 0 && errno != EINTR) fail(std::string("poll: ") + std::strerror(errno));
    if (fds[0].revents) {
      ibv_cq* cq = nullptr;
      void* context = nullptr;
      if (ibv_get_cq_event(completionChannel_, &cq, &context) == 0) {
        // Acknowledging in batches: each ack takes a lock in the library.
        if (++unackedCqEvents_ >= 64) {
          ibv_ack_cq_events(cq_, unackedCqEvents_);
          unackedCqEvents_ = 0;
        }
      }
    }
    if (fds[1].revents) {
      rdma_cm_event* event = nullptr;
      while (rdma_get_cm_event(channel_, &event) == 0) {
        auto type = event->event;
        rdma_ack_cm_event(event);
        if (type == RDMA_CM_EVENT_DISCONNECTED || type == RDMA_CM_EVENT_DEVICE_REMOVAL ||
            type == RDMA_CM_EVENT_TIMEWAIT_EXIT) {
          peerGone_ = true;
        }
      }
      // Whatever the peer sent before leaving is still delivered: loop and drain first.
    }
  }
}

bool RdmaConnection::tryPostControl(WireType type) {
  if (credits() < 1 || freeSendSlots_.empty()) return false;
  OutSlot out;
  out.index = freeSendSlots_.back();
  freeSendSlots_.pop_back();
  out.type = type;
  opened_++;
  postSlot(out);
  return true;
}

void RdmaConnection::maybeReturnCredits() {
  if (broken_ || shutdown_) return;
  // Half the window: often enough that the peer rarely waits, rarely enough to cost little.
  if (consumed_ - consumedReturned_ >= kRdmaRecvSlots / 2) tryPostControl(WireType::kCredit);
}

void RdmaConnection::openSlot(OutSlot& out, WireType type, bool control) {
  // Data keeps one credit in reserve so a credit return or BulkDone can always be sent.
  int64_t need = control ? 1 : 2;
  if (credits() < need || freeSendSlots_.empty()) {
    if (credits() < need) stats_.creditWaits++;
    waitUntil([&] { return credits() >= need && !freeSendSlots_.empty(); }, receiveTimeoutMs_,
              "send credits");
  }
  out = OutSlot{};
  out.index = freeSendSlots_.back();
  freeSendSlots_.pop_back();
  out.type = type;
  opened_++;
}

void RdmaConnection::postSlot(OutSlot& out) {
  std::byte* buffer = sendBuffer(out.index);
  WireHeader h{};
  h.type = static_cast<uint32_t>(out.type);
  h.payloadBytes = static_cast<uint32_t>(out.used);
  h.consumed = consumed_;
  h.a = out.a;
  h.b = out.b;
  h.rkey = out.rkey;
  h.magic = kWireMagic;
  std::memcpy(buffer, &h, sizeof h);
  ibv_sge sge{reinterpret_cast<uintptr_t>(buffer), uint32_t(sizeof h + out.used), sendMr_->lkey};
  ibv_send_wr wr{};
  wr.wr_id = kWrSend | uint64_t(out.index);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  opened_--;
  sendUsed_[out.index] = out.used;
  if (ibv_post_send(id_->qp, &wr, &bad) != 0) {
    freeSendSlots_.push_back(out.index);
    out.index = -1;
    fail(std::string("ibv_post_send failed: ") + std::strerror(errno));
  }
  consumedReturned_ = consumed_;
  sent_++;
  stats_.sends++;
  out.index = -1;
}

void RdmaConnection::appendInline(OutSlot& out, WireType continuation, const std::byte* data,
                                  size_t size) {
  while (size > 0) {
    if (out.index < 0) openSlot(out, continuation, false);
    size_t n = std::min(size, kRdmaSlotPayload - out.used);
    std::memcpy(sendBuffer(out.index) + sizeof(WireHeader) + out.used, data, n);
    out.used += n;
    data += n;
    size -= n;
    if (out.used == kRdmaSlotPayload) postSlot(out);
  }
}

std::span<std::byte> RdmaConnection::frameSpace(bool queued) {
  checkUsable();
  if (lent_.active) {
    // Lent before and neither sent nor returned: make it clean again.
    size_t from = lent_.offset - kFrameSpaceHeadroom;
    std::memset(lentPayload() + from, 0, kRdmaSlotPayload - from);
    lent_ = Lent{};
  }
  if (!queued) {
    if (reserved_.index < 0) openSlot(reserved_, WireType::kFrameBegin, false);
    lent_ = Lent{true, false, reserved_.index, kFrameSpaceHeadroom};
  } else {
    // Room for a record header, the headroom and a typical posted call, else a fresh buffer.
    constexpr size_t kMinQueuedSpace = 1024;
    if (packed_.index >= 0 && kRdmaSlotPayload - packed_.used <
                                  sizeof(WireHeader) + kFrameSpaceHeadroom + kMinQueuedSpace) {
      flush();
    }
    if (packed_.index < 0) openSlot(packed_, WireType::kPacked, false);
    lent_ =
        Lent{true, true, packed_.index, packed_.used + sizeof(WireHeader) + kFrameSpaceHeadroom};
  }
  return {lentPayload() + lent_.offset, kRdmaSlotPayload - lent_.offset};
}

void RdmaConnection::returnFrameSpace(size_t written) {
  if (!lent_.active) return;
  // Not sent from there: clean what the builder wrote.
  size_t from = lent_.offset - kFrameSpaceHeadroom;
  std::memset(lentPayload() + from, 0,
              std::min(written + kFrameSpaceHeadroom, kRdmaSlotPayload - from));
  lent_ = Lent{};
}

bool RdmaConnection::builtInLent(std::span<const ConstBuffer> message) {
  return lent_.active && message.size() == 2 && message[0].size == kFrameSpaceHeadroom &&
         message[1].data == lentPayload() + lent_.offset &&
         message[1].size <= kRdmaSlotPayload - lent_.offset;
}

// A message that cannot leave from the span lent in the packed buffer (it outgrew it, or another
// send comes first): copies it out and cleans the span before the packed buffer can be posted and
// reused.
std::span<const ConstBuffer> RdmaConnection::rescueLent(std::span<const ConstBuffer> message,
                                                        std::vector<std::byte>& copy,
                                                        ConstBuffer& whole) {
  std::byte* begin = lentPayload() + lent_.offset;
  std::byte* end = lentPayload() + kRdmaSlotPayload;
  size_t written = 0;
  bool inside = false;
  for (auto& part : message) {
    auto* bytes = static_cast<const std::byte*>(part.data);
    if (bytes >= begin && bytes < end) {
      inside = true;
      written = std::max(written, size_t(bytes + part.size - begin));
    }
  }
  if (inside) {
    for (auto& part : message) {
      auto* bytes = static_cast<const std::byte*>(part.data);
      copy.insert(copy.end(), bytes, bytes + part.size);
    }
    whole = ConstBuffer{copy.data(), copy.size()};
    message = std::span(&whole, 1);
  } else {
    written = size_t(end - begin);  // unknown: all of it
  }
  std::memset(begin - kFrameSpaceHeadroom, 0, written + kFrameSpaceHeadroom);
  lent_ = Lent{};
  return message;
}

void RdmaConnection::postFrameBegin(std::span<const ConstBuffer> message, uint64_t bulkBytes) {
  size_t messageBytes = 0;
  for (auto& part : message) messageBytes += part.size;
  if (messageBytes > kMaxMessageBytes) throw TransportError("message too large to send");
  if (!lent_.queued && builtInLent(message) && lent_.slot == reserved_.index) {
    // Built in place: only the part before it (a one-segment table) is written.
    std::memcpy(lentPayload(), message[0].data, kFrameSpaceHeadroom);
    lent_ = Lent{};
    OutSlot out = std::exchange(reserved_, OutSlot{});
    out.type = WireType::kFrameBegin;
    out.a = messageBytes;
    out.b = bulkBytes;
    out.used = messageBytes;
    postSlot(out);
    stats_.messagesSentInPlace++;
    return;
  }
  OutSlot out;
  openSlot(out, WireType::kFrameBegin, false);
  out.a = messageBytes;
  out.b = bulkBytes;
  for (auto& part : message) {
    appendInline(out, WireType::kMessageData, static_cast<const std::byte*>(part.data), part.size);
  }
  if (out.index >= 0) postSlot(out);
}

// What sendFrame and startFrame both do first: queued frames leave, the message goes out, and the
// peer's offer, which is for this frame only whatever it carries, is taken.
RdmaConnection::BulkOffer RdmaConnection::beginFrame(std::span<const ConstBuffer> message,
                                                     uint64_t bulkBytes) {
  checkUsable();
  if (streamLeft_) throw TransportError("a frame started inside a streamed frame");
  std::vector<std::byte> rescued;
  ConstBuffer whole{};
  if (lent_.active && lent_.queued) message = rescueLent(message, rescued, whole);
  flush();
  dropForgottenRegistrations();
  BulkOffer offer = std::exchange(peerOffer_, BulkOffer{});
  postFrameBegin(message, bulkBytes);
  return offer;
}

// Between frames, and only while no key of ours is in use: the peer may still READ what we
// announced or WRITE into what we offered, and our own WRITEs may still be reading our memory.
// Deregistering under them would put the QP in error (a freed range is the caller's to stop
// using; its pages stay pinned, not reachable by anyone else, until this runs).
void RdmaConnection::dropForgottenRegistrations() {
  if (remoteBulkDone_ == remoteBulkAnnounced_ && !offer_.active && writesDone_ == writesPosted_) {
    registrations_->dropForgotten();
  }
}

void RdmaConnection::sendFrame(std::span<const ConstBuffer> message,
                               std::span<const ConstBuffer> bulk) {
  uint64_t bulkBytes = 0;
  for (auto& part : bulk) bulkBytes += part.size;
  BulkOffer offer = beginFrame(message, bulkBytes);
  if (offer.active && offer.size == bulkBytes) {
    std::vector<RegistrationLease> leases;
    if (registerForWrite(bulk, leases)) {
      postWrites(bulk, leases, offer, 0);
      finishWrites(bulkBytes);
      return;
    }
  }
  sendUnoffered(bulk);
}

// Bulk parts without an offer to write into. Returns once the peer has read every part announced
// for READ: until then that memory must stay registered and unchanged.
void RdmaConnection::sendUnoffered(std::span<const ConstBuffer> bulk) {
  std::vector<RegistrationLease> leases;
  uint64_t announcedBefore = remoteBulkAnnounced_;
  OutSlot out;
  for (auto& part : bulk) sendPart(out, part, leases);
  if (out.index >= 0) postSlot(out);
  if (remoteBulkAnnounced_ != announcedBefore) {
    waitUntil([&] { return remoteBulkDone_ >= remoteBulkAnnounced_; }, receiveTimeoutMs_,
              "bulk read by peer");
  }
}

// One bulk part without an offer: staged (client pageable memory), announced for READ, or inline.
void RdmaConnection::sendPart(OutSlot& out, const ConstBuffer& part,
                              std::vector<RegistrationLease>& leases) {
  auto* bytes = static_cast<const std::byte*>(part.data);
  if (part.size >= kRdmaRendezvousBytes && staged(part.data, part.size)) {
    if (out.index >= 0) postSlot(out);
    sendStaged(out, bytes, part.size);
    return;
  }
  if (part.size >= kRdmaRendezvousBytes) {
    auto lease = registrations_->acquire(part.data, part.size, IBV_ACCESS_REMOTE_READ);
    if (lease) {
      if (out.index >= 0) postSlot(out);
      openSlot(out, WireType::kBulkRemote, false);
      out.a = reinterpret_cast<uintptr_t>(part.data);
      out.b = part.size;
      out.rkey = lease->rkey();
      postSlot(out);
      leases.push_back(std::move(*lease));
      remoteBulkAnnounced_++;
      stats_.bulkBytesSentZeroCopy += part.size;
      return;
    }
    // Unregistrable memory (e.g. odd mappings): still correct, just copied.
  }
  appendInline(out, WireType::kBulkInline, bytes, part.size);
  stats_.bulkBytesSentInline += part.size;
}

// Keys for every part, for local access only: on the WRITE path the peer never gets a key to our
// memory. False when some part cannot be registered.
bool RdmaConnection::registerForWrite(std::span<const ConstBuffer> bulk,
                                      std::vector<RegistrationLease>& leases) {
  for (auto& part : bulk) {
    if (part.size == 0) {
      leases.emplace_back();
      continue;
    }
    auto lease = registrations_->acquire(part.data, part.size, 0);
    if (!lease) return false;
    leases.push_back(std::move(*lease));
  }
  return true;
}

// Posts RDMA WRITEs of the parts, one after another, to the offer from `offset` on, at most
// kMaxReadBytes each and kMaxWritesInFlight at once; leases[i] holds the keys of parts[i].
void RdmaConnection::postWrites(std::span<const ConstBuffer> parts,
                                const std::vector<RegistrationLease>& leases,
                                const BulkOffer& offer, uint64_t offset) {
  for (size_t i = 0; i < parts.size(); ++i) {
    auto* bytes = static_cast<const std::byte*>(parts[i].data);
    for (uint64_t done = 0; done < parts[i].size;) {
      if (writesPosted_ - writesDone_ >= kMaxWritesInFlight) {
        waitUntil([&] { return writesPosted_ - writesDone_ < kMaxWritesInFlight; },
                  receiveTimeoutMs_, "RDMA WRITE");
      }
      uint64_t n = std::min<uint64_t>(kMaxReadBytes, parts[i].size - done);
      postOneSided(IBV_WR_RDMA_WRITE, bytes + done, n, leases[i].lkey(),
                   offer.address + offset + done, offer.rkey);
      writesPosted_++;
      done += n;
    }
    offset += parts[i].size;
  }
}

void RdmaConnection::awaitWrites() {
  // A completed WRITE was acknowledged by the peer: our buffer is free for the caller again.
  waitUntil([&] { return writesDone_ == writesPosted_; }, receiveTimeoutMs_, "RDMA WRITE");
}

// Announces the frame's written bulk. Posted after the WRITEs on the same RC queue pair, so the
// peer sees it only once they are placed.
void RdmaConnection::finishWrites(uint64_t bulkBytes) {
  OutSlot out;
  openSlot(out, WireType::kBulkWritten, false);
  out.b = bulkBytes;
  postSlot(out);
  stats_.bulkBytesSentByWrite += bulkBytes;
  awaitWrites();
}

void RdmaConnection::startFrame(std::span<const ConstBuffer> message, uint64_t bulkBytes) {
  BulkOffer offer = beginFrame(message, bulkBytes);
  streamOffer_ = offer.active && offer.size == bulkBytes ? offer : BulkOffer{};
  streamLeft_ = bulkBytes;
}

void RdmaConnection::sendBulk(const void* data, size_t size) {
  checkUsable();
  if (size > streamLeft_) throw TransportError("sendBulk past the frame's announced bulk");
  if (size == 0) return;
  std::vector<RegistrationLease> leases;
  ConstBuffer part{data, size};
  uint64_t offset = streamOffer_.size - streamLeft_;
  if (streamOffer_.active && offset == 0 && !registerForWrite(std::span(&part, 1), leases)) {
    streamOffer_ = BulkOffer{};  // nothing written yet: the frame goes the READ way instead
  }
  if (streamOffer_.active) {
    if (leases.empty() && !registerForWrite(std::span(&part, 1), leases)) {
      fail("cannot register streamed bulk for RDMA WRITE");  // half written: cannot switch now
    }
    postWrites(std::span(&part, 1), leases, streamOffer_, offset);
    streamLeft_ -= size;
    if (streamLeft_ == 0) {
      finishWrites(streamOffer_.size);
      streamOffer_ = BulkOffer{};
    } else {
      awaitWrites();  // the caller reuses `data` once we return
    }
    return;
  }
  streamLeft_ -= size;
  sendUnoffered(std::span(&part, 1));
}

// A record of a packed SEND at `at`: its header, then `parts` (all of its `bytes`-long payload, or
// only its start when the rest is already in place), then the payload's padding to whole words.
void RdmaConnection::writeRecord(std::byte* at, WireType type, size_t bytes, size_t messageBytes,
                                 size_t bulkBytes, std::span<const ConstBuffer> parts) {
  WireHeader h{};
  h.type = static_cast<uint32_t>(type);
  h.payloadBytes = static_cast<uint32_t>(bytes);
  h.a = messageBytes;
  h.b = bulkBytes;
  h.magic = kWireMagic;
  std::memcpy(at, &h, sizeof h);
  at += sizeof h;
  for (auto& part : parts) {
    if (part.size) std::memcpy(at, part.data, part.size);
    at += part.size;
  }
  std::memset(at, 0, paddedRecordBytes(bytes) - bytes);
}

void RdmaConnection::sendFrameLater(std::span<const ConstBuffer> message,
                                    std::span<const ConstBuffer> bulk) {
  checkUsable();
  size_t messageBytes = 0, bulkBytes = 0;
  for (auto& part : message) messageBytes += part.size;
  for (auto& part : bulk) bulkBytes += part.size;
  size_t bulkRecord = bulkBytes ? sizeof(WireHeader) + paddedRecordBytes(bulkBytes) : 0;
  if (lent_.queued && builtInLent(message) && lent_.slot == packed_.index &&
      lent_.offset == packed_.used + sizeof(WireHeader) + kFrameSpaceHeadroom &&
      bulkRecord <= kRdmaSlotPayload - lent_.offset - message[1].size) {
    // Built in place, after the record header and the table's room: write just those two (the
    // segment that follows is already there, whole words, so no padding either).
    std::byte* at = sendBuffer(packed_.index) + sizeof(WireHeader) + packed_.used;
    writeRecord(at, WireType::kFrameBegin, messageBytes, messageBytes, bulkBytes, message.first(1));
    lent_ = Lent{};
    packed_.used += sizeof(WireHeader) + messageBytes;
    if (bulkBytes) {
      writeRecord(at + sizeof(WireHeader) + messageBytes, WireType::kBulkInline, bulkBytes,
                  messageBytes, bulkBytes, bulk);
      packed_.used += bulkRecord;
    }
    queuedBytes_ += messageBytes + bulkBytes;
    stats_.framesPacked++;
    stats_.messagesSentInPlace++;
    stats_.bulkBytesSentInline += bulkBytes;
    return;
  }
  std::vector<std::byte> rescued;
  ConstBuffer whole{};
  if (lent_.active && lent_.queued) message = rescueLent(message, rescued, whole);
  size_t need = sizeof(WireHeader) + paddedRecordBytes(messageBytes) + bulkRecord;
  if (need > kRdmaSlotPayload || messageBytes % 8 != 0) {
    sendFrame(message, bulk);  // too big to share a SEND (flushes what is queued first)
    return;
  }
  if (packed_.index >= 0 && packed_.used + need > kRdmaSlotPayload) flush();
  if (packed_.index < 0) openSlot(packed_, WireType::kPacked, false);
  std::byte* at = sendBuffer(packed_.index) + sizeof(WireHeader) + packed_.used;
  writeRecord(at, WireType::kFrameBegin, messageBytes, messageBytes, bulkBytes, message);
  if (bulkBytes) {
    writeRecord(at + sizeof(WireHeader) + paddedRecordBytes(messageBytes), WireType::kBulkInline,
                bulkBytes, messageBytes, bulkBytes, bulk);
  }
  packed_.used += need;
  queuedBytes_ += messageBytes + bulkBytes;
  stats_.framesPacked++;
  stats_.bulkBytesSentInline += bulkBytes;
}

void RdmaConnection::flush() {
  if (packed_.index < 0) return;
  checkUsable();
  if (packed_.used == 0) {
    // Opened for a message that went another way: nothing to send. Give the (clean) buffer back
    // unless it is lent right now.
    if (!(lent_.active && lent_.queued)) {
      freeSendSlots_.push_back(std::exchange(packed_.index, -1));
      opened_--;
    }
    return;
  }
  postSlot(packed_);
  queuedBytes_ = 0;
}

void RdmaConnection::expectBulkInto(void* dst, size_t size) {
  checkUsable();
  offer_ = BulkOffer{};
  // Only pinned memory: its registration is cached for the range's life, so the key we hand out
  // stays valid until the reply has landed, and pageable pages are never exposed to the peer.
  if (!dst || size < kRdmaRendezvousBytes || !findPinnedRange(dst, size)) return;
  auto lease = registrations_->acquire(dst, size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!lease || !lease->cached()) return;
  OutSlot out;
  openSlot(out, WireType::kBulkDestination, false);
  out.a = reinterpret_cast<uintptr_t>(dst);
  out.b = size;
  out.rkey = lease->rkey();
  postSlot(out);
  offer_ = BulkOffer{true, static_cast<std::byte*>(dst), 0, size, 0};
}

void RdmaConnection::unpack(int slot, const WireHeader& packed) {
  auto* at = reinterpret_cast<const std::byte*>(&packed + 1);
  size_t left = packed.payloadBytes;
  uint32_t records = 0;
  while (left > 0) {
    auto* r = reinterpret_cast<const WireHeader*>(at);
    if (left < sizeof(WireHeader) || r->magic != kWireMagic ||
        (r->type != uint32_t(WireType::kFrameBegin) &&
         r->type != uint32_t(WireType::kBulkInline)) ||
        paddedRecordBytes(r->payloadBytes) > left - sizeof(WireHeader)) {
      fail("malformed RDMA message (packed record)");
    }
    size_t length = sizeof(WireHeader) + paddedRecordBytes(r->payloadBytes);
    incoming_.push_back({slot, r});
    records++;
    at += length;
    left -= length;
  }
  if (records == 0) fail("malformed RDMA message (empty packed message)");
  slotUsers_[slot] = records;
}

RdmaConnection::Incoming RdmaConnection::nextIncoming() {
  if (incoming_.empty()) {
    waitUntil([&] { return !incoming_.empty(); }, receiveTimeoutMs_, "message");
  }
  Incoming next = incoming_.front();
  incoming_.pop_front();
  return next;
}

ReceivedFrame RdmaConnection::receiveFrame() {
  checkUsable();
  if (pendingBulk_ != 0) throw TransportError("previous frame's bulk bytes were not consumed");
  if (heldSlot_ >= 0) releaseReceive(std::exchange(heldSlot_, -1));
  dropForgottenRegistrations();
  // An offer we made is for this frame only.
  frameOffer_ = std::exchange(offer_, BulkOffer{});
  Incoming in = nextIncoming();
  const WireHeader& begin = *in.header;
  if (begin.type != uint32_t(WireType::kFrameBegin))
    fail("malformed frame (expected a frame start)");
  uint64_t messageBytes = begin.a;
  uint64_t bulkBytes = begin.b;
  if (messageBytes > kMaxMessageBytes || messageBytes % 8 != 0) {
    fail("malformed frame (message size " + std::to_string(messageBytes) + ")");
  }
  pendingBulk_ = bulkBytes;
  segment_ = BulkSegment{};
  auto* first = reinterpret_cast<const std::byte*>(&begin + 1);
  if (begin.payloadBytes == messageBytes &&
      reinterpret_cast<uintptr_t>(first) % alignof(uint64_t) == 0) {
    // The whole message is in one receive buffer, aligned: hand it out from there and keep the
    // buffer until the next receiveFrame.
    heldSlot_ = in.slot;
    stats_.messagesReadInPlace++;
    return {std::span<const std::byte>(first, messageBytes), bulkBytes};
  }
  size_t words = messageBytes / 8;
  if (message_.size() < words) message_.resize(words);
  auto* dst = reinterpret_cast<std::byte*>(message_.data());
  size_t got = 0;
  for (;;) {
    const WireHeader& h = *in.header;
    if (got + h.payloadBytes > messageBytes) fail("malformed frame (message overrun)");
    std::memcpy(dst + got, reinterpret_cast<const std::byte*>(&h + 1), h.payloadBytes);
    got += h.payloadBytes;
    releaseReceive(in.slot);
    if (got == messageBytes) break;
    in = nextIncoming();
    if (in.header->type != uint32_t(WireType::kMessageData)) {
      fail("malformed frame (message cut short)");
    }
  }
  return {std::as_bytes(std::span<const uint64_t>(message_.data(), words)), bulkBytes};
}

void RdmaConnection::loadSegment() {
  Incoming in = nextIncoming();
  int slot = in.slot;
  const WireHeader& h = *in.header;
  segment_ = BulkSegment{};
  segment_.active = true;
  if (h.type == uint32_t(WireType::kBulkWritten)) {
    // Trust only our own offer: the whole frame's bulk, exactly the size we offered.
    if (!frameOffer_.active || h.b != frameOffer_.size || h.b != pendingBulk_) {
      fail("malformed frame (bulk written without a matching offer)");
    }
    segment_.written = true;
    segment_.bytes = frameOffer_.data;
    segment_.size = h.b;
    frameOffer_.active = false;
    releaseReceive(slot);
    return;
  }
  if (h.type == uint32_t(WireType::kBulkInline)) {
    segment_.slot = slot;
    segment_.bytes = reinterpret_cast<const std::byte*>(&h + 1);
    segment_.size = h.payloadBytes;
    if (segment_.size == 0) fail("malformed frame (empty bulk piece)");
    return;
  }
  if (h.type != uint32_t(WireType::kBulkRemote) || h.b == 0)
    fail("malformed frame (expected bulk)");
  segment_.remote = true;
  segment_.remoteAddress = h.a;
  segment_.rkey = h.rkey;
  segment_.size = h.b;
  releaseReceive(slot);  // the descriptor is copied out; its buffer can take the next SEND
}

// One signaled RDMA READ or WRITE of `n` bytes between local and remote memory.
void RdmaConnection::postOneSided(ibv_wr_opcode opcode, const std::byte* local, uint64_t n,
                                  uint32_t lkey, uint64_t remote, uint32_t rkey) {
  bool read = opcode == IBV_WR_RDMA_READ;
  ibv_sge sge{reinterpret_cast<uintptr_t>(local), uint32_t(n), lkey};
  ibv_send_wr wr{};
  wr.wr_id = read ? kWrRead : kWrWrite;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = opcode;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = remote;
  wr.wr.rdma.rkey = rkey;
  ibv_send_wr* bad = nullptr;
  if (ibv_post_send(id_->qp, &wr, &bad) != 0) {
    fail(std::string("posting RDMA ") + (read ? "READ" : "WRITE") +
         " failed: " + std::strerror(errno));
  }
}

void RdmaConnection::postRead(std::byte* dst, uint32_t lkey, uint64_t remote, uint32_t rkey,
                              uint64_t size) {
  uint64_t offset = 0;
  while (offset < size) {
    if (readsPosted_ - readsDone_ >= maxReadsInFlight_) {
      waitUntil([&] { return readsPosted_ - readsDone_ < maxReadsInFlight_; }, receiveTimeoutMs_,
                "RDMA READ");
    }
    uint64_t n = std::min(kMaxReadBytes, size - offset);
    postOneSided(IBV_WR_RDMA_READ, dst + offset, n, lkey, remote + offset, rkey);
    readsPosted_++;
    offset += n;
  }
}

void RdmaConnection::readRemote(std::byte* dst, uint32_t lkey, uint64_t remote, uint32_t rkey,
                                uint64_t size) {
  postRead(dst, lkey, remote, rkey, size);
  waitUntil([&] { return readsDone_ == readsPosted_; }, receiveTimeoutMs_, "RDMA READ");
}

RdmaConnection::StagingRing& RdmaConnection::ring(StagingRing& r, int access) {
  if (!r.mr) {
    r.bytes.resize(kRdmaStagingChunks * kRdmaStagingChunkBytes);
    r.mr = ibv_reg_mr(pd_, r.bytes.data(), r.bytes.size(), access);
    if (!r.mr) fail(std::string("registering the staging ring: ") + std::strerror(errno));
  }
  return r;
}

bool RdmaConnection::staged(const void* p, size_t size) const {
  return stagePageable_ && !findPinnedRange(p, size);
}

void RdmaConnection::sendStaged(OutSlot& out, const std::byte* bytes, size_t size) {
  StagingRing& r = ring(sendRing_, IBV_ACCESS_REMOTE_READ);
  for (size_t offset = 0; offset < size; offset += kRdmaStagingChunkBytes) {
    size_t n = std::min(kRdmaStagingChunkBytes, size - offset);
    uint64_t slot = sendRingNext_++ % kRdmaStagingChunks;
    // The chunk is free once the peer has read what was last announced from it.
    if (sendRingUsed_[slot]) {
      uint64_t needed = sendRingAnnounced_[slot] + 1;
      waitUntil([&] { return remoteBulkDone_ >= needed; }, receiveTimeoutMs_, "staging chunk");
    }
    std::byte* chunk = r.chunk(slot);
    std::memcpy(chunk, bytes + offset, n);
    openSlot(out, WireType::kBulkRemote, false);
    out.a = reinterpret_cast<uintptr_t>(chunk);
    out.b = n;
    out.rkey = r.mr->rkey;
    postSlot(out);
    sendRingUsed_[slot] = true;
    sendRingAnnounced_[slot] = remoteBulkAnnounced_++;
    stats_.bulkBytesSentStaged += n;
  }
}

void RdmaConnection::readStaged(std::byte* dst, uint64_t remote, uint32_t rkey, uint64_t size) {
  StagingRing& r = ring(receiveRing_, IBV_ACCESS_LOCAL_WRITE);
  uint64_t chunks = (size + kRdmaStagingChunkBytes - 1) / kRdmaStagingChunkBytes;
  auto length = [&](uint64_t i) {
    return std::min<uint64_t>(kRdmaStagingChunkBytes, size - i * kRdmaStagingChunkBytes);
  };
  // READs complete in the order they were posted (one RC send queue), so chunk i is in once
  // readsDone_ passes the ordinal of its READ.
  uint64_t firstRead = readsPosted_;
  uint64_t posted = 0;
  for (uint64_t copied = 0; copied < chunks; ++copied) {
    while (posted < chunks && posted - copied < kRdmaStagingChunks) {
      postRead(r.chunk(posted), r.mr->lkey, remote + posted * kRdmaStagingChunkBytes, rkey,
               length(posted));
      posted++;
    }
    waitUntil([&] { return readsDone_ > firstRead + copied; }, receiveTimeoutMs_, "RDMA READ");
    std::memcpy(dst + copied * kRdmaStagingChunkBytes, r.chunk(copied), length(copied));
  }
}

void RdmaConnection::consumeBulk(std::byte* dst, size_t size) {
  checkUsable();
  if (size > pendingBulk_) throw TransportError("bulk read past the end of the frame");
  std::optional<RegistrationLease> lease;
  bool stage = dst && staged(dst, size);
  size_t done = 0;
  while (done < size) {
    if (!segment_.active) loadSegment();
    uint64_t n = std::min<uint64_t>(size - done, segment_.size - segment_.offset);
    if (segment_.written) {
      // Already in place when read to the offered address; moved if the caller reads elsewhere.
      if (dst && dst + done != segment_.bytes + segment_.offset) {
        std::memmove(dst + done, segment_.bytes + segment_.offset, n);
      }
      stats_.bulkBytesReceivedWritten += n;
    } else if (!segment_.remote) {
      if (dst) std::memcpy(dst + done, segment_.bytes + segment_.offset, n);
      stats_.bulkBytesReceivedInline += n;
    } else if (dst && stage) {
      readStaged(dst + done, segment_.remoteAddress + segment_.offset, segment_.rkey, n);
      stats_.bulkBytesReceivedStaged += n;
    } else if (dst) {
      if (!lease) {
        lease = registrations_->acquire(dst + done, size - done, IBV_ACCESS_LOCAL_WRITE);
        if (!lease) fail("cannot register the receive buffer for RDMA READ");
        // acquire() covers [dst + done, dst + size): later pieces of this call reuse it.
      }
      readRemote(dst + done, lease->lkey(), segment_.remoteAddress + segment_.offset, segment_.rkey,
                 n);
      stats_.bulkBytesReceivedZeroCopy += n;
    }
    segment_.offset += n;
    done += n;
    pendingBulk_ -= n;
    if (segment_.offset == segment_.size) {
      segment_.active = false;
      if (segment_.written) {
        // Nothing to return: the writer waited for its own WRITE completions.
      } else if (segment_.remote) {
        // Control messages keep a reserved credit, so this never waits on the peer's data.
        OutSlot out;
        openSlot(out, WireType::kBulkDone, true);
        postSlot(out);
      } else {
        releaseReceive(segment_.slot);
      }
    }
  }
}

void RdmaConnection::receiveBulk(void* dst, size_t size) {
  if (size && !dst) throw TransportError("receiveBulk: null destination");
  consumeBulk(static_cast<std::byte*>(dst), size);
}

void RdmaConnection::discardBulk(size_t size) { consumeBulk(nullptr, size); }

void RdmaConnection::shutdown() {
  shutdown_ = true;
  uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wakeFd_, &one, sizeof one);
  // Moves the QP to error: posted work completes with flush errors on both sides.
  if (id_) rdma_disconnect(id_);
}

}  // namespace gpupool::transport::rdma
