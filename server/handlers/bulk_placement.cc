#include "server/handlers/bulk_placement.h"

#include <algorithm>

#include "server/staged_copy.h"

namespace gpupool::server {

Status receiveIntoDevice(RequestContext& request, BackendContext& context, uint64_t dst,
                         uint64_t bytes, uint64_t stream, bool async) {
  if (!bytes) return Status::success();
  transport::Connection& connection = request.session.connection;
  if (void* direct = async ? nullptr : context.hostView(dst, bytes)) {
    // The bytes land in device memory straight from the connection: no staging copy at all.
    if (Status st = context.streamSynchronize(stream); !st.ok()) return st;
    connection.receiveBulk(direct, bytes);
    return Status::success();
  }
  if (auto staged = stagedHostToDevice(connection, context, dst, bytes, stream, async)) {
    return *staged;
  }
  // A backend without staging buffers: chunks copied one after another.
  ScratchBuffer& staging = request.session.staging;
  staging.resize(std::min(bytes, kBulkChunkBytes));
  Status st;
  for (uint64_t done = 0; done < bytes && st.ok();) {
    uint64_t n = std::min(bytes - done, kBulkChunkBytes);
    connection.receiveBulk(staging.data(), n);
    st = context.copyHostToDevice(dst + done, staging.data(), n, stream, async);
    done += n;
  }
  return st;
}

Status replyFromDevice(RequestContext& request, BackendContext& context, uint64_t src,
                       uint64_t bytes, uint64_t stream) {
  SessionState& session = request.session;
  if (void* direct = bytes ? context.hostView(src, bytes) : nullptr) {
    // Sent straight from device memory; nothing runs on the stream until the reply is out.
    if (Status st = context.streamSynchronize(stream); !st.ok()) return st;
    request.replyBulk.push_back({direct, bytes});
    return Status::success();
  }
  // Pipelined through staging where the backend and transport allow: the session sends it.
  if (auto started = bytes ? StagedDeviceRead::start(session.connection, context, src, bytes,
                                                     stream, &session.stagedReply)
                           : std::nullopt) {
    return *started;
  }
  // Even an empty copy goes to the backend, which reports what the stream holds.
  session.staging.resize(bytes);
  Status st = context.copyDeviceToHost(session.staging.data(), src, bytes, stream);
  if (st.ok() && bytes) request.replyBulk.push_back({session.staging.data(), bytes});
  return st;
}

}  // namespace gpupool::server
