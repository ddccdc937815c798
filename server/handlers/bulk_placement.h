// Moving a copy's bytes between the connection and device memory the cheapest way the backend
// and the transport allow: straight into or out of device memory the backend exposes (hostView),
// pipelined through the context's staging slots, or in chunks through the session's scratch
// buffer.
#pragma once

#include <cstdint>

#include "server/handlers/request_context.h"

namespace gpupool::server {

// Host-side bulk moves through the scratch buffer in pieces of this size, so it stays small
// whatever the copy size.
constexpr uint64_t kBulkChunkBytes = 8u << 20;

// Reads the request's next `bytes` of bulk into [dst, dst+bytes) of `context` on `stream`
// (the range checked by the caller). A synchronous copy has completed on return.
Status receiveIntoDevice(RequestContext& request, BackendContext& context, uint64_t dst,
                         uint64_t bytes, uint64_t stream, bool async);

// Makes [src, src+bytes) of `context` the reply's bulk, read in `stream` order (the range checked
// by the caller).
Status replyFromDevice(RequestContext& request, BackendContext& context, uint64_t src,
                       uint64_t bytes, uint64_t stream);

}  // namespace gpupool::server
