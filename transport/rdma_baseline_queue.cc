#include "transport/rdma_baseline_queue.h"

#include <fcntl.h>

#include <cerrno>
#include <cstring>

#include "transport/rdma_queue_pair.h"

namespace gpupool::transport::rdma {
namespace {

// perftest's default inline size for its latency tests; smaller sends go inline, as there.
constexpr uint32_t kWantedInline = 220;

}  // namespace

BaselineQueue::BaselineQueue(CmHandles& cm, uint32_t maxMessageBytes)
    : channel_(cm.channel), id_(cm.id), maxMessageBytes_(maxMessageBytes) {
  cm.channel = nullptr;
  cm.id = nullptr;
  try {
    pd_ = ibv_alloc_pd(id_->verbs);
    if (!pd_) throw TransportError(std::string("ibv_alloc_pd: ") + std::strerror(errno));
    // Waits poll the CM channel without blocking, between bursts of CQ polls.
    ::fcntl(channel_->fd, F_SETFL, ::fcntl(channel_->fd, F_GETFL) | O_NONBLOCK);
    int cqe = int(kBaselineTxDepth + kBaselineRecvDepth + 16);
    cq_ = ibv_create_cq(id_->verbs, cqe, nullptr, nullptr, 0);
    if (!cq_) throw TransportError(std::string("ibv_create_cq: ") + std::strerror(errno));
    maxInline_ =
        createRcQueuePair(id_, pd_, cq_, kBaselineTxDepth, kBaselineRecvDepth, kWantedInline);
    qpCreated_ = true;
    messages_.resize(size_t(kBaselineRecvDepth + 1) * maxMessageBytes_);
    messagesMr_ = ibv_reg_mr(pd_, messages_.data(), messages_.size(), IBV_ACCESS_LOCAL_WRITE);
    if (!messagesMr_) throw TransportError(std::string("ibv_reg_mr: ") + std::strerror(errno));
    for (uint32_t slot = 0; slot < kBaselineRecvDepth; ++slot) postReceive(slot);
  } catch (...) {
    release();
    throw;
  }
}

BaselineQueue::~BaselineQueue() { release(); }

void BaselineQueue::release() {
  if (id_ && qpCreated_) rdma_disconnect(id_);
  if (qpCreated_) rdma_destroy_qp(id_);
  qpCreated_ = false;
  if (messagesMr_) ibv_dereg_mr(messagesMr_);
  messagesMr_ = nullptr;
  if (cq_) ibv_destroy_cq(cq_);
  cq_ = nullptr;
  if (pd_) ibv_dealloc_pd(pd_);
  pd_ = nullptr;
  if (id_) rdma_destroy_id(id_);
  id_ = nullptr;
  if (channel_) rdma_destroy_event_channel(channel_);
  channel_ = nullptr;
}

std::string BaselineQueue::deviceName() const {
  return id_ && id_->verbs ? ibv_get_device_name(id_->verbs->device) : "unknown";
}

void BaselineQueue::postReceive(uint32_t slot) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(messages_.data() + size_t(slot) * maxMessageBytes_),
              maxMessageBytes_, messagesMr_->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = kBaselineWrRecv | slot;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (ibv_post_recv(id_->qp, &wr, &bad) != 0) {
    throw TransportError(std::string("ibv_post_recv: ") + std::strerror(errno));
  }
}

void BaselineQueue::postSend(uint32_t size) {
  std::byte* slot = messages_.data() + size_t(kBaselineRecvDepth) * maxMessageBytes_;
  ibv_sge sge{reinterpret_cast<uintptr_t>(slot), size, messagesMr_->lkey};
  ibv_send_wr wr{};
  wr.wr_id = kBaselineWrSend;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED | (size <= maxInline_ ? IBV_SEND_INLINE : 0);
  ibv_send_wr* bad = nullptr;
  if (ibv_post_send(id_->qp, &wr, &bad) != 0) {
    throw TransportError(std::string("ibv_post_send: ") + std::strerror(errno));
  }
}

int BaselineQueue::poll(ibv_wc* wcs, int capacity) {
  int n = ibv_poll_cq(cq_, capacity, wcs);
  if (n < 0) throw TransportError("ibv_poll_cq failed");
  for (int i = 0; i < n; ++i) {
    if (wcs[i].status != IBV_WC_SUCCESS) {
      throw TransportError(std::string("RDMA work request failed: ") +
                           ibv_wc_status_str(wcs[i].status));
    }
  }
  return n;
}

void BaselineQueue::throwIfDisconnected() {
  rdma_cm_event* event = nullptr;
  while (rdma_get_cm_event(channel_, &event) == 0) {
    auto type = event->event;
    rdma_ack_cm_event(event);
    if (type == RDMA_CM_EVENT_DISCONNECTED || type == RDMA_CM_EVENT_DEVICE_REMOVAL) {
      throw TransportError("the baseline server disconnected");
    }
  }
}

}  // namespace gpupool::transport::rdma
