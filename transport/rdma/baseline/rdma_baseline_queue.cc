#include "transport/rdma/baseline/rdma_baseline_queue.h"

#include <fcntl.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "transport/rdma/rdma_queue_pair.h"
#include "transport/rdma/verbs_call.h"

namespace gpupool::transport::rdma {

BaselineQueue::BaselineQueue(CmHandles& cm, uint32_t maxMessageBytes)
    : channel_(std::exchange(cm.channel, nullptr)),
      id_(std::exchange(cm.id, nullptr)),
      maxMessageBytes_(maxMessageBytes) {
  // A throw below unwinds what was created so far, in reverse (the members' order).
  pd_.reset(checkCreated(ibv_alloc_pd(id_->verbs), "ibv_alloc_pd"));
  // Waits poll the CM channel without blocking, between bursts of CQ polls.
  ::fcntl(channel_->fd, F_SETFL, ::fcntl(channel_->fd, F_GETFL) | O_NONBLOCK);
  int cqe = int(kBaselineTxDepth + kBaselineRecvDepth + 16);
  cq_.reset(checkCreated(ibv_create_cq(id_->verbs, cqe, nullptr, nullptr, 0), "ibv_create_cq"));
  maxInline_ = createRcQueuePair(id_.get(), pd_.get(), cq_.get(), kBaselineTxDepth,
                                 kBaselineRecvDepth, kRequestedInlineBytes);
  qp_.created(id_.get());
  messages_.resize(size_t(kBaselineRecvDepth + 1) * maxMessageBytes_);
  messagesMr_.reset(checkCreated(
      ibv_reg_mr(pd_.get(), messages_.data(), messages_.size(), IBV_ACCESS_LOCAL_WRITE),
      "ibv_reg_mr"));
  for (uint32_t slot = 0; slot < kBaselineRecvDepth; ++slot) postReceive(slot);
}

// The members then unwind in reverse order of creation, the queue pair first.
BaselineQueue::~BaselineQueue() {
  if (qp_) rdma_disconnect(id_.get());
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
  checkReturned(ibv_post_recv(id_->qp, &wr, &bad), "ibv_post_recv");
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
  checkReturned(ibv_post_send(id_->qp, &wr, &bad), "ibv_post_send");
}

int BaselineQueue::poll(ibv_wc* wcs, int capacity) {
  int n = ibv_poll_cq(cq_.get(), capacity, wcs);
  if (n < 0) throw TransportError(TransportError::Kind::kDisconnected, "ibv_poll_cq failed");
  for (int i = 0; i < n; ++i) {
    if (wcs[i].status != IBV_WC_SUCCESS) {
      throw TransportError(
          TransportError::Kind::kDisconnected,
          std::string("RDMA work request failed: ") + ibv_wc_status_str(wcs[i].status));
    }
  }
  return n;
}

void BaselineQueue::throwIfDisconnected() {
  rdma_cm_event* event = nullptr;
  while (rdma_get_cm_event(channel_.get(), &event) == 0) {
    auto type = event->event;
    rdma_ack_cm_event(event);
    if (type == RDMA_CM_EVENT_DISCONNECTED || type == RDMA_CM_EVENT_DEVICE_REMOVAL) {
      throw TransportError(TransportError::Kind::kDisconnected, "the baseline server disconnected");
    }
  }
}

}  // namespace gpupool::transport::rdma
