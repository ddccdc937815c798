#include "transport/rdma/rdma_queue_pair.h"

#include <cerrno>
#include <cstring>
#include <string>

#include "transport/connection.h"

namespace gpupool::transport::rdma {

uint32_t createRcQueuePair(rdma_cm_id* id, ibv_pd* pd, ibv_cq* cq, uint32_t sendDepth,
                           uint32_t receiveDepth, uint32_t inlineBytes) {
  ibv_qp_init_attr attr{};
  attr.send_cq = cq;
  attr.recv_cq = cq;
  attr.qp_type = IBV_QPT_RC;
  attr.cap.max_send_wr = sendDepth;
  attr.cap.max_recv_wr = receiveDepth;
  attr.cap.max_send_sge = 1;
  attr.cap.max_recv_sge = 1;
  attr.cap.max_inline_data = inlineBytes;
  if (rdma_create_qp(id, pd, &attr) == 0) return attr.cap.max_inline_data;
  if (inlineBytes != 0) {
    // Devices without inline data refuse the request: send from registered memory instead.
    attr.cap.max_inline_data = 0;
    if (rdma_create_qp(id, pd, &attr) == 0) return 0;
  }
  throw TransportError(TransportError::Kind::kUnavailable,
                       std::string("rdma_create_qp: ") + std::strerror(errno));
}

}  // namespace gpupool::transport::rdma
