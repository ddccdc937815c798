// Copies between host and device and within a device: ranges checked before a byte moves, bulk
// placed by bulk_placement, or read from and written to the client's shared pinned memory
// (shared_host_files.h) where the copy names a shared file.
#include "server/handlers/bulk_placement.h"
#include "server/handlers/request_table.h"
#include "server/staged_copy.h"

namespace gpupool::server {
namespace {

using wire::Request;

Status hostToDevice(RequestContext& request, Request::Reader r) {
  auto m = r.getMemcpyHtoD();
  BackendContext* context = nullptr;
  if (Status st = request.context(m.getContext(), &context); !st.ok()) return st;
  uint64_t bytes = m.getBytes();
  uint64_t sent = m.getHostFile() ? 0 : bytes;  // from a shared file, no bytes travel
  if (sent != request.bulkBytes()) {
    return Status::error(CUDA_ERROR_INVALID_VALUE, "copy size does not match the bytes sent");
  }
  // The whole destination is checked first, so a bad range writes nothing.
  if (Status st = checkDeviceRange(*context, m.getDst(), bytes, "host-to-device copy"); !st.ok())
    return st;
  if (m.getHostFile()) {
    // Read where the client's pinned memory lies (mapped here): the bytes move once.
    SharedHostFiles::Range source;
    if (Status st = request.session.hostFiles.find(m.getHostFile(), m.getHostOffset(), bytes,
                                                   "host-to-device copy", &source);
        !st.ok())
      return st;
    // Through the staging slots where the backend has them (the cuda backend: an asynchronous
    // copy then waits for no earlier work of its stream), else straight from the mapping.
    if (auto staged = stagedHostToDevice(source.data, *context, m.getDst(), bytes, m.getStream(),
                                         m.getAsync()))
      return *staged;
    return context->copyHostToDevice(m.getDst(), source.data, bytes, m.getStream(), m.getAsync());
  }
  return receiveIntoDevice(request, *context, m.getDst(), bytes, m.getStream(), m.getAsync());
}

Status deviceToHost(RequestContext& request, Request::Reader r) {
  auto m = r.getMemcpyDtoH();
  BackendContext* context = nullptr;
  if (Status st = request.context(m.getContext(), &context); !st.ok()) return st;
  uint64_t bytes = m.getBytes();
  if (Status st = checkDeviceRange(*context, m.getSrc(), bytes, "device-to-host copy"); !st.ok())
    return st;
  if (m.getHostFile()) {
    // Written where the client's pinned memory lies (mapped here); the reply carries no bytes.
    SharedHostFiles::Range target;
    if (Status st = request.session.hostFiles.find(m.getHostFile(), m.getHostOffset(), bytes,
                                                   "device-to-host copy", &target);
        !st.ok())
      return st;
    return context->copyDeviceToHost(target.data, m.getSrc(), bytes, m.getStream());
  }
  return replyFromDevice(request, *context, m.getSrc(), bytes, m.getStream());
}

// A device-to-host copy waits for its stream before its bytes can leave: on a waiter thread, so
// the session serves other calls meanwhile.
Status copySourceDrained(RequestContext& request, Request::Reader r) {
  auto m = r.getMemcpyDtoH();
  return request.withContext(m.getContext(), [&](BackendContext& context) {
    return streamDrained(context, m.getStream());
  });
}

Status waitForCopySource(RequestContext& request, Request::Reader r) {
  auto m = r.getMemcpyDtoH();
  return request.withContext(m.getContext(), [&](BackendContext& context) {
    return context.streamSynchronize(m.getStream());
  });
}

Status deviceToDevice(RequestContext& request, Request::Reader r) {
  auto m = r.getMemcpyDtoD();
  BackendContext* context = nullptr;
  if (Status st = request.context(m.getContext(), &context); !st.ok()) return st;
  return context->copyDeviceToDevice(m.getDst(), m.getSrc(), m.getBytes(), m.getStream(),
                                     m.getAsync());
}

// A pitched copy with at least one device side; host rows travel packed (pitch = width).
Status copy2D(RequestContext& request, Request::Reader r) {
  auto m = r.getMemcpy2D();
  BackendContext* context = nullptr;
  if (Status st = request.context(m.getContext(), &context); !st.ok()) return st;
  Copy2D c;
  c.srcIsDevice = m.getSrcIsDevice();
  c.dstIsDevice = m.getDstIsDevice();
  c.widthBytes = m.getWidthBytes();
  c.height = m.getHeight();
  c.srcDevice = m.getSrc().getAddress();
  c.srcPitch = m.getSrc().getPitch();
  c.dstDevice = m.getDst().getAddress();
  c.dstPitch = m.getDst().getPitch();
  if (!c.srcIsDevice && !c.dstIsDevice) {
    return Status::error(CUDA_ERROR_INVALID_VALUE, "host-to-host copies stay on the client");
  }
  if (c.height && c.widthBytes > UINT64_MAX / c.height) {
    return Status::error(CUDA_ERROR_INVALID_VALUE, "2D copy too large");
  }
  uint64_t packed = c.widthBytes * c.height;
  ScratchBuffer& staging = request.session.staging;
  if (!c.srcIsDevice) {
    if (request.bulkBytes() != packed) {
      return Status::error(CUDA_ERROR_INVALID_VALUE, "2D copy size does not match the bytes sent");
    }
    staging.resize(packed);
    request.receiveBulk(staging.data(), packed);
    c.srcHost = staging.data();
    c.srcPitch = c.widthBytes;
  }
  if (!c.dstIsDevice) {
    // The reply is staged whole: the rows must lie in one allocation before that many bytes are
    // allocated for them.
    if (Status st =
            checkDeviceRange(*context, c.srcDevice, c.widthBytes, "2D copy", c.srcPitch, c.height);
        !st.ok())
      return st;
    staging.resize(packed);
    c.dstHost = staging.data();
    c.dstPitch = c.widthBytes;
  }
  Status st = context->copy2D(c, m.getStream(), m.getAsync() && c.dstIsDevice);
  if (st.ok() && !c.dstIsDevice && packed) request.replyBulk.push_back({staging.data(), packed});
  return st;
}

constexpr RequestHandlerRow kRows[] = {
    {Request::MEMCPY_HTO_D, hostToDevice},
    {Request::MEMCPY_DTO_H, deviceToHost, waitForCopySource, copySourceDrained},
    {Request::MEMCPY_DTO_D, deviceToDevice},
    {Request::MEMCPY2_D, copy2D},
};

}  // namespace

std::span<const RequestHandlerRow> copyHandlers() { return kRows; }

}  // namespace gpupool::server
