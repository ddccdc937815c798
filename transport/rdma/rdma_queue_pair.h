// The reliable-connected queue pair every RDMA user here creates on its rdma_cm id: one CQ for
// sends and receives, one scatter/gather element per work request.
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <cstdint>

namespace gpupool::transport::rdma {

// Inline send data asked for by every queue pair here (perftest's default): small SENDs (a
// synchronous call's request or reply) are copied into the work request at post time, so the
// device need not read them from registered memory, one DMA read less per message.
constexpr uint32_t kRequestedInlineBytes = 220;

// Creates the QP of `id` in `pd` on `cq`, asking for `inlineBytes` of inline send data and, where
// the device refuses that, for none. Returns the inline size granted. Throws TransportError.
uint32_t createRcQueuePair(rdma_cm_id* id, ibv_pd* pd, ibv_cq* cq, uint32_t sendDepth,
                           uint32_t receiveDepth, uint32_t inlineBytes = 0);

}  // namespace gpupool::transport::rdma
