// The checks and the wire form that cuStreamBatchMemOp (stream_mem_ops_api.cc) shares with batch
// memory operation graph nodes (graph_model.cc, graph_api.cc) and their capture
// (stream_capture.cc).
#pragma once

#include <cuda.h>

#include <vector>

#include "driver_state.h"

namespace gpupool::client {

// Checks a batch of stream memory operations for `ctx` (1 to 255 of them; kinds, flags, alignment,
// each address device memory of `ctx`) under the v1 or _v2 ABI's rules, into `out`. The v1 ABI's
// write flag NO_MEMORY_BARRIER only permits reordering and is cleared (a write keeps its barrier).
// Failures log their reason under GPU_POOL_LOG=1 as `what`.
CUresult checkStreamMemOps(const char* what, ContextObject* ctx, bool v2, unsigned count,
                           const CUstreamBatchMemOpParams* params,
                           std::vector<CUstreamBatchMemOpParams>* out);

// Writes checked operations in their wire form.
void fillStreamMemOps(capnp::List<wire::Request::StreamMemOp>::Builder list,
                      const std::vector<CUstreamBatchMemOpParams>& ops);

}  // namespace gpupool::client
