// Large host<->device copies for memory the session cannot reach through hostView (the cuda
// backend), pipelined through the context's staging slots (BackendContext::stagingBuffer): the
// device copy of one chunk overlaps the network transfer of the next, in both directions.
#pragma once

#include <capnp/message.h>

#include <cstddef>
#include <cstdint>
#include <optional>

#include "server/backend.h"
#include "transport/connection.h"

namespace gpupool::server {

// Receives the next `bytes` of the current frame's bulk into [dst, dst+bytes) on `stream`, chunk by
// chunk: while the backend copies chunk n to the device, chunk n+1 arrives in the other slot. A
// synchronous copy has completed on return; an asynchronous one has consumed its bulk and runs on
// in stream order. On an error the rest of the bulk is left unread for the caller to discard.
// Nullopt (nothing read) when the backend has no staging.
std::optional<Status> stagedHostToDevice(transport::Connection& connection, BackendContext& context,
                                         uint64_t dst, uint64_t bytes, uint64_t stream, bool async);

// The same from memory this server holds that its caller may change once the copy has returned
// (a client's shared pinned memory, server/shared_host_files.h): an asynchronous copy has read
// `src` on return. Nullopt when the backend has no staging.
std::optional<Status> stagedHostToDevice(const std::byte* src, BackendContext& context,
                                         uint64_t dst, uint64_t bytes, uint64_t stream, bool async);

// A device→host copy sent as the bulk of a reply while it is still being read: the device copy of
// chunk n+1 overlaps the send of chunk n.
class StagedDeviceRead {
 public:
  // Starts reading [src, src+bytes) (checked by the caller, bytes > 0) on `stream` and waits for
  // the first chunk, so an error the stream holds is known before anything is sent. Nullopt when
  // the backend has no staging or `connection` cannot stream bulk; otherwise the read has started
  // if and only if the status is ok.
  static std::optional<Status> start(transport::Connection& connection, BackendContext& context,
                                     uint64_t src, uint64_t bytes, uint64_t stream,
                                     std::optional<StagedDeviceRead>* read);

  uint64_t bytes() const { return bytes_; }

  // Sends `reply` with the copied bytes as its bulk. A failure after the reply has left is
  // returned; the bytes it could not read are sent as zeros so the frame stays whole.
  Status send(capnp::MessageBuilder& reply);

 private:
  StagedDeviceRead(transport::Connection& connection, BackendContext& context, uint64_t src,
                   uint64_t bytes, uint64_t stream)
      : connection_(connection), context_(context), src_(src), bytes_(bytes), stream_(stream) {}

  // Enqueues chunk `chunk` into its slot, if the copy has such a chunk.
  Status stage(uint64_t chunk);
  uint64_t chunkBytes(uint64_t chunk) const;

  transport::Connection& connection_;
  BackendContext& context_;
  uint64_t src_, bytes_, stream_;
  uint64_t chunks_ = 0;
};

}  // namespace gpupool::server
