// RdmaConnection, the heartbeat: how a connection finds that its peer's host stopped answering.
//
// A reliable connection learns that only while it has something unacknowledged on the wire, so a
// quiet one (an idle session; a client waiting for a long call's answer, whose request was
// acknowledged long ago) would wait for a vanished host for ever. The probe is a zero-length RDMA
// WRITE: the peer's adapter acknowledges it without its program (busy, stopped, or in a debugger)
// and without taking a receive buffer or a credit, and a zero-length WRITE needs no address or
// key (InfiniBand C9-88), so the peer registers nothing for it.
#include <infiniband/verbs.h>

#include <string>

#include "transport/rdma/rdma_connection.h"
#include "transport/rdma/rdma_connection_internal.h"
#include "transport/rdma/verbs_call.h"
#include "transport/rdma/verbs_library.h"

namespace gpupool::transport::rdma {

void RdmaConnection::setDeadPeerTimeoutMs(unsigned ms) {
  std::lock_guard lock(mutex_);
  heartbeatMs_ = ms;
  lastHeard_ = Clock::now();
}

int RdmaConnection::heartbeatLookMs() const {
  const unsigned ms = heartbeatMs_;
  return ms ? static_cast<int>(heartbeatLookIntervalMs(ms)) : -1;
}

void RdmaConnection::checkPeer() {
  std::lock_guard lock(mutex_);
  checkUsable();
  if (!heartbeatMs_ || shutdown_) return;
  // Nobody drives the CQ: the probe's answer may wait there. Taking it here (with whatever came
  // along) keeps an idle connection's look from judging a probe that was answered.
  if (!polling_) {
    while (pollCompletions()) {
    }
    if (wholeMessageQueued()) signalReadiness();
  }
  lookAtPeer(Clock::now());
}

void RdmaConnection::lookAtPeer(Clock::time_point now) {
  const unsigned ms = heartbeatMs_;
  if (!ms || broken_ || shutdown_) return;
  const auto timeout = std::chrono::milliseconds(ms);
  if (!probeOutstanding_) {
    // A third of the timeout silent: ask. The adapter then has the other two thirds to give up.
    if (now - lastHeard_ >= timeout / 3) postProbe(now);
    return;
  }
  // Adapters whose retries outlast the timeout (a large QP timeout, or none): judged here.
  if (now - probePostedAt_ >= timeout * 2 / 3 && now - lastHeard_ >= timeout) {
    fail(Kind::kTimeout, "the peer stopped answering: its host acknowledged nothing for " +
                             std::to_string(ms) + " ms (RDMA heartbeat)");
  }
}

void RdmaConnection::postProbe(Clock::time_point now) {
  ibv_send_wr wr{};
  wr.wr_id = kWrProbe;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.num_sge = 0;  // zero length: no address, no key
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  if (int ret = ibv_post_send(id_->qp, &wr, &bad)) {
    fail(Kind::kDisconnected, verbsError("ibv_post_send (heartbeat probe)", ret));
  }
  probeOutstanding_ = true;
  probePostedAt_ = now;
  stats_.heartbeatProbes++;
}

void RdmaConnection::stopAnswering() {
  std::lock_guard lock(mutex_);
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  if (int ret = ibv_modify_qp(id_->qp, &attr, IBV_QP_STATE)) {
    fail(Kind::kDisconnected, verbsError("ibv_modify_qp", ret));
  }
}

}  // namespace gpupool::transport::rdma
