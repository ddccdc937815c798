// CUDA arrays and 3D copies: arrays are created (charged to the tenant's quota like any
// allocation), named by the context's handles (so one session never reaches another's), and
// destroyed; 3D copies move regions between host, device memory and arrays, host ends packed.
#include "server/handlers/request_table.h"

namespace gpupool::server {
namespace {

using wire::Request;

Status arrayOp(RequestContext& request, Request::Reader r) {
  auto m = r.getArrayOp();
  BackendContext* context = nullptr;
  if (Status st = request.context(m.getContext(), &context); !st.ok()) return st;
  switch (m.getOp()) {
    case Request::ArrayOpKind::CREATE: {
      ArrayShape shape;
      shape.width = m.getWidth();
      shape.height = m.getHeight();
      shape.depth = m.getDepth();
      shape.format = m.getFormat();
      shape.channels = m.getChannels();
      shape.flags = m.getFlags();
      unsigned levels = m.getLevels();
      std::string reason;
      if (CUresult res = checkArrayShape(shape, levels, levels != 0, &reason);
          res != CUDA_SUCCESS) {
        return Status::error(res, reason);
      }
      uint64_t array = 0;
      auto create = [&](uint64_t* at) { return context->arrayCreate(shape, levels, at); };
      if (Status st =
              chargedAllocation(request, *context, arrayTotalBytes(shape, levels), create, &array);
          !st.ok()) {
        return st;
      }
      request.reply.setHandle(array);
      return Status::success();
    }
    case Request::ArrayOpKind::DESTROY: {
      uint64_t bytes = 0;
      Status st = context->arrayDestroy(m.getArray(), &bytes);
      if (st.ok() && request.session.tenant) {
        request.session.tenant->freed(m.getContext(), bytes);
      }
      return st;
    }
    case Request::ArrayOpKind::LEVEL: {
      uint64_t array = 0;
      Status st = context->arrayLevel(m.getArray(), m.getLevel(), &array);
      if (st.ok()) request.reply.setHandle(array);
      return st;
    }
  }
  return Status::error(CUDA_ERROR_INVALID_VALUE, "unknown array operation");
}

// Host ends travel packed: widthBytes x height x depth, rows back to back.
Status copy3D(RequestContext& request, Request::Reader r) {
  auto m = r.getMemcpy3D();
  BackendContext* context = nullptr;
  if (Status st = request.context(m.getContext(), &context); !st.ok()) return st;
  Copy3D c;
  c.widthBytes = m.getWidthBytes();
  c.height = m.getHeight();
  c.depth = m.getDepth();
  auto endOf = [](wire::Request::CopyEnd::Reader in, CopyEnd3D* out) {
    switch (in.getKind()) {
      case 0:
        out->kind = CopyEnd3D::Kind::kHost;
        break;
      case 1:
        out->kind = CopyEnd3D::Kind::kDevice;
        break;
      case 2:
        out->kind = CopyEnd3D::Kind::kArray;
        break;
      default:
        return false;
    }
    out->handle = in.getHandle();
    out->xBytes = in.getXBytes();
    out->y = in.getY();
    out->z = in.getZ();
    out->pitch = in.getPitch();
    out->height = in.getHeight();
    return true;
  };
  if (!endOf(m.getSrc(), &c.src) || !endOf(m.getDst(), &c.dst)) {
    return Status::error(CUDA_ERROR_INVALID_VALUE, "unknown 3D copy end");
  }
  bool hostSrc = c.src.kind == CopyEnd3D::Kind::kHost;
  bool hostDst = c.dst.kind == CopyEnd3D::Kind::kHost;
  if (hostSrc && hostDst) {
    return Status::error(CUDA_ERROR_INVALID_VALUE, "host-to-host copies stay on the client");
  }
  if ((c.height && c.widthBytes > UINT64_MAX / c.height) ||
      (c.depth && c.widthBytes * c.height > UINT64_MAX / c.depth)) {
    return Status::error(CUDA_ERROR_INVALID_VALUE, "3D copy too large");
  }
  uint64_t packed = c.widthBytes * c.height * c.depth;
  if (request.bulkBytes() != (hostSrc ? packed : 0)) {
    return Status::error(CUDA_ERROR_INVALID_VALUE, "3D copy size does not match the bytes sent");
  }
  ScratchBuffer& staging = request.session.staging;
  if (hostSrc) {
    staging.resize(packed);
    request.receiveBulk(staging.data(), packed);
    c.src.srcHost = staging.data();
  }
  if (hostDst) {
    // The staging buffer holds the reply, so a bogus size must not allocate it: the source is
    // checked first (the backend checks it again, with the destination, before a byte moves).
    if (c.src.kind == CopyEnd3D::Kind::kDevice) {
      uint64_t pitch = c.src.pitch ? c.src.pitch : c.widthBytes;
      uint64_t rowsPerSlice = c.src.height ? c.src.height : c.height;
      if (c.depth > 1 && rowsPerSlice < c.src.y + c.height) {
        return Status::error(CUDA_ERROR_INVALID_VALUE, "3D copy source height too small");
      }
      uint64_t start = (c.src.z * rowsPerSlice + c.src.y) * pitch + c.src.xBytes;
      if (Status st = checkDeviceRange(*context, c.src.handle + start, c.widthBytes, "3D copy",
                                       pitch, (c.depth - 1) * rowsPerSlice + c.height);
          !st.ok()) {
        return st;
      }
    } else {
      // An array region is checked by the backend; none is larger than the device.
      uint64_t freeBytes = 0, totalBytes = 0;
      (void)context->memGetInfo(&freeBytes, &totalBytes);
      if (packed > totalBytes) {
        return Status::error(CUDA_ERROR_INVALID_VALUE, "3D copy region larger than the device");
      }
    }
    staging.resize(packed);
    c.dst.dstHost = staging.data();
  }
  Status st = context->copy3D(c, m.getStream(), m.getAsync() && !hostDst);
  if (st.ok() && hostDst && packed) request.replyBulk.push_back({staging.data(), packed});
  return st;
}

constexpr RequestHandlerRow kRows[] = {
    {Request::ARRAY_OP, arrayOp},
    {Request::MEMCPY3_D, copy3D},
};

}  // namespace

std::span<const RequestHandlerRow> arrayHandlers() { return kRows; }

}  // namespace gpupool::server
