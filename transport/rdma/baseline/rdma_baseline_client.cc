#include "transport/rdma/baseline/rdma_baseline_client.h"

#include <cerrno>
#include <cstring>

#include "transport/rdma/baseline/rdma_baseline_queue.h"
#include "transport/rdma/rdma_transport.h"
#include "transport/rdma/verbs_call.h"

namespace gpupool::transport {

using rdma::BaselineAccept;
using rdma::BaselineRequest;

RdmaBaselineClient::RdmaBaselineClient(const Endpoint& endpoint, uint32_t maxMessageBytes,
                                       uint64_t sinkBytes, unsigned timeoutMs) {
  rdma::CmHandles cm;
  timeoutMs = rdma::startActiveSide(endpoint, timeoutMs, cm);
  queue_ = std::make_unique<rdma::BaselineQueue>(cm, maxMessageBytes);
  source_.resize(sinkBytes ? sinkBytes : 1);
  sourceMr_.reset(rdma::checkCreated(ibv_reg_mr(queue_->pd(), source_.data(), source_.size(), 0),
                                     "ibv_reg_mr"));

  BaselineRequest request{rdma::kBaselineMagic, maxMessageBytes, sinkBytes};
  rdma_conn_param param{};
  param.private_data = &request;
  param.private_data_len = sizeof request;
  param.retry_count = 7;
  param.rnr_retry_count = 7;
  std::string where = endpoint.url();
  if (rdma_connect(queue_->id(), &param) != 0) {
    throw TransportError(TransportError::Kind::kUnavailable,
                         "connecting to " + where + ": " + std::strerror(errno));
  }
  std::vector<std::byte> reply;
  rdma::awaitCmEvent(queue_->cmChannel(), RDMA_CM_EVENT_ESTABLISHED, timeoutMs + 1000,
                     "raw-verbs baseline at " + where, &reply);
  BaselineAccept accept{};
  if (reply.size() >= sizeof accept) std::memcpy(&accept, reply.data(), sizeof accept);
  if (accept.magic != rdma::kBaselineMagic || accept.sinkBytes < sinkBytes) {
    throw TransportError(TransportError::Kind::kUnavailable,
                         where + " does not offer the raw-verbs baseline");
  }
  sinkAddress_ = accept.sinkAddress;
  sinkBytes_ = accept.sinkBytes;
  sinkRkey_ = accept.rkey;
}

// sourceMr_ goes before the queue that owns its PD (members unwind in reverse).
RdmaBaselineClient::~RdmaBaselineClient() = default;

std::string RdmaBaselineClient::deviceName() const { return queue_->deviceName(); }
uint32_t RdmaBaselineClient::maxInline() const { return queue_->maxInline(); }

void RdmaBaselineClient::pingPong(uint32_t size) {
  if (size == 0 || size > queue_->maxMessageBytes()) {
    throw TransportError(TransportError::Kind::kMalformed,
                         "ping-pong size " + std::to_string(size) + " outside 1.." +
                             std::to_string(queue_->maxMessageBytes()));
  }
  queue_->postSend(size);
  bool sent = false, answered = false;
  queue_->pollUntil(
      [&](const ibv_wc& wc) {
        uint64_t kind = wc.wr_id & rdma::kBaselineWrKindMask;
        if (kind == rdma::kBaselineWrSend) {
          sent = true;
        } else if (kind == rdma::kBaselineWrRecv) {
          if (wc.byte_len != size)
            throw TransportError(TransportError::Kind::kMalformed,
                                 "baseline reply of the wrong size");
          queue_->postReceive(uint32_t(wc.wr_id & ~rdma::kBaselineWrKindMask));
          answered = true;
        }
      },
      [&] { return sent && answered; });
}

void RdmaBaselineClient::writeStream(uint64_t size, uint64_t count) {
  if (size == 0 || size > sinkBytes_ || size > UINT32_MAX) {
    throw TransportError(
        TransportError::Kind::kMalformed,
        "RDMA WRITE size " + std::to_string(size) + " outside 1.." + std::to_string(sinkBytes_));
  }
  // Every 16th WRITE (and the last) is signaled; a completion retires every WRITE up to it,
  // since an RC send queue completes in order. This is how perftest keeps the CQ out of the way.
  constexpr uint64_t kSignalEvery = 16;
  uint64_t posted = 0, retired = 0;
  auto post = [&] {
    while (posted < count && posted - retired < rdma::kBaselineTxDepth) {
      ibv_sge sge{reinterpret_cast<uintptr_t>(source_.data()), uint32_t(size), sourceMr_->lkey};
      ibv_send_wr wr{};
      wr.wr_id = rdma::kBaselineWrWrite | posted;
      wr.sg_list = &sge;
      wr.num_sge = 1;
      wr.opcode = IBV_WR_RDMA_WRITE;
      bool last = posted + 1 == count;
      wr.send_flags = (last || posted % kSignalEvery == kSignalEvery - 1) ? IBV_SEND_SIGNALED : 0;
      if (size <= queue_->maxInline()) wr.send_flags |= IBV_SEND_INLINE;
      wr.wr.rdma.remote_addr = sinkAddress_;
      wr.wr.rdma.rkey = sinkRkey_;
      ibv_send_wr* bad = nullptr;
      if (int ret = ibv_post_send(queue_->id()->qp, &wr, &bad)) {
        throw TransportError(TransportError::Kind::kDisconnected,
                             "posting RDMA WRITE: " + std::string(std::strerror(ret)));
      }
      posted++;
    }
  };
  post();
  queue_->pollUntil(
      [&](const ibv_wc& wc) {
        if ((wc.wr_id & rdma::kBaselineWrKindMask) != rdma::kBaselineWrWrite) return;
        retired = (wc.wr_id & ~rdma::kBaselineWrKindMask) + 1;
        post();
      },
      [&] { return retired == count; });
}

}  // namespace gpupool::transport
