// 3D copies and copies to and from CUDA arrays: cuMemcpy3D (+Async, Peer), the 1D array copies
// (cuMemcpyHtoA, AtoH, AtoA, AtoD, DtoA), cuMemcpy2D with an array end (copy_api.cc hands it
// here) and the batched copies (cuMemcpyBatchAsync, cuMemcpy3DBatchAsync).
//
// Every region is checked here first (arrays by their descriptors), so a bad one fails with the
// driver's CUDA_ERROR_INVALID_VALUE before a byte moves; the server checks again. A host end
// travels packed (rows back to back); ends on two different servers or contexts are staged
// through this host.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "array_objects.h"
#include "client_log.h"
#include "driver_export.h"
#include "host_function_fence.h"
#include "raw_enum.h"
#include "stream_capture.h"

using namespace gpupool::client;
using gpupool::transport::ConstBuffer;

namespace {

// One end of a 3D copy, resolved.
struct RegionEnd {
  enum class Kind : uint8_t { kHost = 0, kDevice = 1, kArray = 2 } kind = Kind::kHost;
  uint8_t* host = nullptr;  // host: the region's first byte
  CUdeviceptr device = 0;   // device: the allocation's address as given (offsets below)
  ArrayObject* array = nullptr;
  ContextObject* context = nullptr;  // device and array ends
  size_t x = 0, y = 0, z = 0, pitch = 0, height = 0;
};

// `type` is the CUmemorytype as the caller passed it (rawEnumValue): any number may arrive.
CUresult resolveEnd(const char* what, int type, const void* host, CUdeviceptr device, CUarray array,
                    size_t x, size_t y, size_t z, size_t pitch, size_t height,
                    const CUDA_MEMCPY3D& c, RegionEnd* end) {
  auto& state = gpupool::client::DriverState::get();
  if (type == CU_MEMORYTYPE_UNIFIED) {
    bool isDevice = false;
    if (CUresult r = state.unifiedIsDevice(what, device, &isDevice); r != CUDA_SUCCESS) return r;
    type = isDevice ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
    host = reinterpret_cast<const void*>(device);
  }
  end->x = x;
  end->y = y;
  end->z = z;
  end->pitch = pitch;
  end->height = height;
  bool multiRow = c.Height > 1 || c.Depth > 1;
  switch (type) {
    case CU_MEMORYTYPE_HOST:
    case CU_MEMORYTYPE_DEVICE: {
      if (multiRow && pitch < x + c.WidthInBytes) {
        return refuseCall(CUDA_ERROR_INVALID_VALUE,
                          std::string(what) + ": pitch is smaller than the row");
      }
      if (c.Depth > 1 && height < y + c.Height) {
        return refuseCall(CUDA_ERROR_INVALID_VALUE,
                          std::string(what) + ": slice height is smaller than the region");
      }
      if (type == CU_MEMORYTYPE_HOST) {
        if (!host) return CUDA_ERROR_INVALID_VALUE;
        end->kind = RegionEnd::Kind::kHost;
        end->host =
            const_cast<uint8_t*>(static_cast<const uint8_t*>(host)) + (z * height + y) * pitch + x;
        return CUDA_SUCCESS;
      }
      DeviceAllocation info;
      size_t first = (z * height + y) * pitch + x;
      size_t extent = ((c.Depth - 1) * height + (c.Height - 1)) * pitch + c.WidthInBytes;
      if (!state.findDevice(device + first, extent, nullptr, &info)) {
        return refuseCall(CUDA_ERROR_INVALID_VALUE,
                          std::string(what) + ": device region outside its allocation");
      }
      end->kind = RegionEnd::Kind::kDevice;
      end->device = device;
      end->context = info.context;
      return CUDA_SUCCESS;
    }
    case CU_MEMORYTYPE_ARRAY: {
      ArrayObject* a = asArray(array);
      if (!a) return CUDA_ERROR_INVALID_VALUE;
      if (!gpupool::arrayRegionInside(a->shape, x, y, z, c.WidthInBytes, c.Height, c.Depth)) {
        return refuseCall(CUDA_ERROR_INVALID_VALUE,
                          std::string(what) + ": region lies outside the array");
      }
      end->kind = RegionEnd::Kind::kArray;
      end->array = a;
      end->context = a->context;
      return CUDA_SUCCESS;
    }
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

// Row r (of all depth x height rows) of a host end.
uint8_t* hostRow(const RegionEnd& e, const CUDA_MEMCPY3D& c, size_t r) {
  size_t z = r / c.Height, y = r % c.Height;
  return e.host + (z * e.height + y) * e.pitch;
}

void setEnd(wire::Request::CopyEnd::Builder b, const RegionEnd& e) {
  b.setKind(static_cast<uint8_t>(e.kind));
  if (e.kind == RegionEnd::Kind::kHost) return;  // packed: no offsets
  b.setHandle(e.kind == RegionEnd::Kind::kArray ? e.array->remote : e.device);
  b.setXBytes(e.x);
  b.setY(e.y);
  b.setZ(e.z);
  b.setPitch(e.pitch);
  b.setHeight(e.height);
}

// Both ends known; at most one is on the host, and the others are in `ctx`.
CUresult sendCopy(const char* what, ContextObject* ctx, uint64_t stream, const RegionEnd& src,
                  const RegionEnd& dst, const CUDA_MEMCPY3D& c, bool async) {
  size_t rows = c.Height * c.Depth, width = c.WidthInBytes, packedBytes = rows * width;
  std::vector<uint8_t> packed;
  ConstBuffer bulk{nullptr, 0};
  if (src.kind == RegionEnd::Kind::kHost) {
    packed.resize(packedBytes);
    for (size_t r = 0; r < rows; ++r) {
      std::memcpy(packed.data() + r * width, hostRow(src, c, r), width);
    }
    bulk = {packed.data(), packed.size()};
    HostFunctionFence::await(HostFunctionFence::Work::kCall, fenceScopeOf(ctx));
  }
  return ctx->server->call(
      what,
      [&](wire::Request::Builder b) {
        auto m = b.initMemcpy3D();
        m.setContext(ctx->remote);
        setEnd(m.initSrc(), src);
        setEnd(m.initDst(), dst);
        m.setWidthBytes(width);
        m.setHeight(c.Height);
        m.setDepth(c.Depth);
        m.setStream(stream);
        m.setAsync(async);
      },
      std::span<const ConstBuffer>(&bulk, bulk.size ? 1 : 0),
      [&](wire::Response::Reader, ReplyBulk& reply) {
        if (dst.kind != RegionEnd::Kind::kHost) return CUDA_SUCCESS;
        for (size_t r = 0; r < rows; ++r) {
          if (!reply.read(hostRow(dst, c, r), width)) return CUDA_ERROR_UNKNOWN;
        }
        return CUDA_SUCCESS;
      });
}

}  // namespace

namespace gpupool::client {

CUresult copyRegion3D(const char* what, const CUDA_MEMCPY3D& c, CUstream stream, bool async) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!async) {
    if (CUresult r = checkUnsafeDuringCapture(what); r != CUDA_SUCCESS) return r;
  }
  ContextObject* streamContext = nullptr;
  uint64_t s = 0;
  if (CUresult r = resolveStream(stream, &streamContext, &s); r != CUDA_SUCCESS) return r;
  if (c.WidthInBytes == 0 || c.Height == 0 || c.Depth == 0) return CUDA_SUCCESS;
  RegionEnd src, dst;
  if (CUresult r =
          resolveEnd(what, rawEnumValue(c.srcMemoryType), c.srcHost, c.srcDevice, c.srcArray,
                     c.srcXInBytes, c.srcY, c.srcZ, c.srcPitch, c.srcHeight, c, &src);
      r != CUDA_SUCCESS) {
    return r;
  }
  if (CUresult r =
          resolveEnd(what, rawEnumValue(c.dstMemoryType), c.dstHost, c.dstDevice, c.dstArray,
                     c.dstXInBytes, c.dstY, c.dstZ, c.dstPitch, c.dstHeight, c, &dst);
      r != CUDA_SUCCESS) {
    return r;
  }
  size_t rows = c.Height * c.Depth;
  if (src.kind == RegionEnd::Kind::kHost && dst.kind == RegionEnd::Kind::kHost) {
    for (size_t r = 0; r < rows; ++r) {
      std::memmove(hostRow(dst, c, r), hostRow(src, c, r), c.WidthInBytes);
    }
    return CUDA_SUCCESS;
  }
  ContextObject* ctx = src.context ? src.context : dst.context;
  if (src.context && dst.context && src.context != dst.context) {
    // Two contexts (maybe two servers): through this host, packed, in order.
    std::vector<uint8_t> staging(rows * c.WidthInBytes);
    RegionEnd middle;
    middle.host = staging.data();
    middle.pitch = c.WidthInBytes;
    middle.height = c.Height;
    uint64_t s1 = src.context == streamContext ? s : 0;
    if (CUresult r = DriverState::get().ensureRemote(src.context); r != CUDA_SUCCESS) return r;
    if (CUresult r = sendCopy(what, src.context, s1, src, middle, c, false); r != CUDA_SUCCESS) {
      return r;
    }
    uint64_t s2 = dst.context == streamContext ? s : 0;
    if (CUresult r = DriverState::get().ensureRemote(dst.context); r != CUDA_SUCCESS) return r;
    return sendCopy(what, dst.context, s2, middle, dst, c, false);
  }
  if (ctx != streamContext) {
    if (CUresult r = DriverState::get().ensureRemote(ctx); r != CUDA_SUCCESS) return r;
    s = 0;
  }
  if (!async) HostFunctionFence::await(HostFunctionFence::Work::kCall, fenceScopeOf(ctx));
  return sendCopy(what, ctx, s, src, dst, c, async);
}

}  // namespace gpupool::client

namespace {

CUDA_MEMCPY3D fromPeer(const CUDA_MEMCPY3D_PEER& p) {
  CUDA_MEMCPY3D c{};
  c.srcXInBytes = p.srcXInBytes;
  c.srcY = p.srcY;
  c.srcZ = p.srcZ;
  c.srcLOD = p.srcLOD;
  std::memcpy(&c.srcMemoryType, &p.srcMemoryType, sizeof c.srcMemoryType);  // any number may arrive
  c.srcHost = p.srcHost;
  c.srcDevice = p.srcDevice;
  c.srcArray = p.srcArray;
  c.srcPitch = p.srcPitch;
  c.srcHeight = p.srcHeight;
  c.dstXInBytes = p.dstXInBytes;
  c.dstY = p.dstY;
  c.dstZ = p.dstZ;
  c.dstLOD = p.dstLOD;
  std::memcpy(&c.dstMemoryType, &p.dstMemoryType, sizeof c.dstMemoryType);
  c.dstHost = p.dstHost;
  c.dstDevice = p.dstDevice;
  c.dstArray = p.dstArray;
  c.dstPitch = p.dstPitch;
  c.dstHeight = p.dstHeight;
  c.WidthInBytes = p.WidthInBytes;
  c.Height = p.Height;
  c.Depth = p.Depth;
  return c;
}

CUresult copyPeer3D(const char* what, const CUDA_MEMCPY3D_PEER* p, CUstream stream, bool async) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  if ((p->srcContext && !asContext(p->srcContext)) ||
      (p->dstContext && !asContext(p->dstContext))) {
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  return copyRegion3D(what, fromPeer(*p), stream, async);
}

// A 1D copy of `bytes` between arrays, device memory and host memory.
CUresult copyLinear(const char* what, CUmemorytype dstType, CUarray dstArray, size_t dstOffset,
                    void* dstHost, CUdeviceptr dstDevice, CUmemorytype srcType, CUarray srcArray,
                    size_t srcOffset, const void* srcHost, CUdeviceptr srcDevice, size_t bytes,
                    CUstream stream, bool async) {
  CUDA_MEMCPY3D c{};
  c.dstMemoryType = dstType;
  c.dstArray = dstArray;
  c.dstXInBytes = dstType == CU_MEMORYTYPE_ARRAY ? dstOffset : 0;
  c.dstHost = dstHost;
  c.dstDevice = dstDevice;
  c.dstPitch = bytes;
  c.srcMemoryType = srcType;
  c.srcArray = srcArray;
  c.srcXInBytes = srcType == CU_MEMORYTYPE_ARRAY ? srcOffset : 0;
  c.srcHost = srcHost;
  c.srcDevice = srcDevice;
  c.srcPitch = bytes;
  c.WidthInBytes = bytes;
  c.Height = 1;
  c.Depth = 1;
  if ((dstType == CU_MEMORYTYPE_ARRAY && !asArray(dstArray)) ||
      (srcType == CU_MEMORYTYPE_ARRAY && !asArray(srcArray))) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return copyRegion3D(what, c, stream, async);
}

}  // namespace

GPUPOOL_DRIVER_API CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D* copy) {
  if (!copy) return CUDA_ERROR_INVALID_VALUE;
  return copyRegion3D("cuMemcpy3D", *copy, nullptr, false);
}
GPUPOOL_TWIN(CUresult, cuMemcpy3D_v2, cuMemcpy3D_v2_ptds, (const CUDA_MEMCPY3D* copy), (copy))

GPUPOOL_DRIVER_API CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D* copy, CUstream stream) {
  if (!copy) return CUDA_ERROR_INVALID_VALUE;
  return copyRegion3D("cuMemcpy3DAsync", *copy, stream, true);
}
GPUPOOL_TWIN(CUresult, cuMemcpy3DAsync_v2, cuMemcpy3DAsync_v2_ptsz,
             (const CUDA_MEMCPY3D* copy, CUstream stream), (copy, stream))

GPUPOOL_DRIVER_API CUresult cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER* copy) {
  return copyPeer3D("cuMemcpy3DPeer", copy, nullptr, false);
}
GPUPOOL_TWIN(CUresult, cuMemcpy3DPeer, cuMemcpy3DPeer_ptds, (const CUDA_MEMCPY3D_PEER* copy),
             (copy))

GPUPOOL_DRIVER_API CUresult cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER* copy, CUstream stream) {
  return copyPeer3D("cuMemcpy3DPeerAsync", copy, stream, true);
}
GPUPOOL_TWIN(CUresult, cuMemcpy3DPeerAsync, cuMemcpy3DPeerAsync_ptsz,
             (const CUDA_MEMCPY3D_PEER* copy, CUstream stream), (copy, stream))

GPUPOOL_DRIVER_API CUresult cuMemcpyHtoA_v2(CUarray dst, size_t dstOffset, const void* src,
                                            size_t bytes) {
  return copyLinear("cuMemcpyHtoA", CU_MEMORYTYPE_ARRAY, dst, dstOffset, nullptr, 0,
                    CU_MEMORYTYPE_HOST, nullptr, 0, src, 0, bytes, nullptr, false);
}
GPUPOOL_TWIN(CUresult, cuMemcpyHtoA_v2, cuMemcpyHtoA_v2_ptds,
             (CUarray dst, size_t dstOffset, const void* src, size_t bytes),
             (dst, dstOffset, src, bytes))

GPUPOOL_DRIVER_API CUresult cuMemcpyHtoAAsync_v2(CUarray dst, size_t dstOffset, const void* src,
                                                 size_t bytes, CUstream stream) {
  return copyLinear("cuMemcpyHtoAAsync", CU_MEMORYTYPE_ARRAY, dst, dstOffset, nullptr, 0,
                    CU_MEMORYTYPE_HOST, nullptr, 0, src, 0, bytes, stream, true);
}
GPUPOOL_TWIN(CUresult, cuMemcpyHtoAAsync_v2, cuMemcpyHtoAAsync_v2_ptsz,
             (CUarray dst, size_t dstOffset, const void* src, size_t bytes, CUstream stream),
             (dst, dstOffset, src, bytes, stream))

GPUPOOL_DRIVER_API CUresult cuMemcpyAtoH_v2(void* dst, CUarray src, size_t srcOffset,
                                            size_t bytes) {
  return copyLinear("cuMemcpyAtoH", CU_MEMORYTYPE_HOST, nullptr, 0, dst, 0, CU_MEMORYTYPE_ARRAY,
                    src, srcOffset, nullptr, 0, bytes, nullptr, false);
}
GPUPOOL_TWIN(CUresult, cuMemcpyAtoH_v2, cuMemcpyAtoH_v2_ptds,
             (void* dst, CUarray src, size_t srcOffset, size_t bytes), (dst, src, srcOffset, bytes))

GPUPOOL_DRIVER_API CUresult cuMemcpyAtoHAsync_v2(void* dst, CUarray src, size_t srcOffset,
                                                 size_t bytes, CUstream stream) {
  // Completes before returning: the bytes arrive with the reply, in stream order.
  return copyLinear("cuMemcpyAtoHAsync", CU_MEMORYTYPE_HOST, nullptr, 0, dst, 0,
                    CU_MEMORYTYPE_ARRAY, src, srcOffset, nullptr, 0, bytes, stream, true);
}
GPUPOOL_TWIN(CUresult, cuMemcpyAtoHAsync_v2, cuMemcpyAtoHAsync_v2_ptsz,
             (void* dst, CUarray src, size_t srcOffset, size_t bytes, CUstream stream),
             (dst, src, srcOffset, bytes, stream))

GPUPOOL_DRIVER_API CUresult cuMemcpyAtoA_v2(CUarray dst, size_t dstOffset, CUarray src,
                                            size_t srcOffset, size_t bytes) {
  return copyLinear("cuMemcpyAtoA", CU_MEMORYTYPE_ARRAY, dst, dstOffset, nullptr, 0,
                    CU_MEMORYTYPE_ARRAY, src, srcOffset, nullptr, 0, bytes, nullptr, false);
}
GPUPOOL_TWIN(CUresult, cuMemcpyAtoA_v2, cuMemcpyAtoA_v2_ptds,
             (CUarray dst, size_t dstOffset, CUarray src, size_t srcOffset, size_t bytes),
             (dst, dstOffset, src, srcOffset, bytes))

GPUPOOL_DRIVER_API CUresult cuMemcpyAtoD_v2(CUdeviceptr dst, CUarray src, size_t srcOffset,
                                            size_t bytes) {
  return copyLinear("cuMemcpyAtoD", CU_MEMORYTYPE_DEVICE, nullptr, 0, nullptr, dst,
                    CU_MEMORYTYPE_ARRAY, src, srcOffset, nullptr, 0, bytes, nullptr, false);
}
GPUPOOL_TWIN(CUresult, cuMemcpyAtoD_v2, cuMemcpyAtoD_v2_ptds,
             (CUdeviceptr dst, CUarray src, size_t srcOffset, size_t bytes),
             (dst, src, srcOffset, bytes))

GPUPOOL_DRIVER_API CUresult cuMemcpyDtoA_v2(CUarray dst, size_t dstOffset, CUdeviceptr src,
                                            size_t bytes) {
  return copyLinear("cuMemcpyDtoA", CU_MEMORYTYPE_ARRAY, dst, dstOffset, nullptr, 0,
                    CU_MEMORYTYPE_DEVICE, nullptr, 0, nullptr, src, bytes, nullptr, false);
}
GPUPOOL_TWIN(CUresult, cuMemcpyDtoA_v2, cuMemcpyDtoA_v2_ptds,
             (CUarray dst, size_t dstOffset, CUdeviceptr src, size_t bytes),
             (dst, dstOffset, src, bytes))

// ---- Batches: each copy in the stream, in order (the driver allows any order) ----

namespace {

bool validAccessOrder(CUmemcpySrcAccessOrder order) {
  return order == CU_MEMCPY_SRC_ACCESS_ORDER_STREAM ||
         order == CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL ||
         order == CU_MEMCPY_SRC_ACCESS_ORDER_ANY;
}

// failIdx (the CUDA 12.8 ABI): the copy that failed, or SIZE_MAX when the batch as a whole did.
CUresult copyBatch(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count,
                   CUmemcpyAttributes* attrs, size_t* attrsIdxs, size_t numAttrs, size_t* failIdx,
                   CUstream stream) {
  if (failIdx) *failIdx = SIZE_MAX;
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (count == 0 || !dsts || !srcs || !sizes || !attrs || !attrsIdxs || numAttrs == 0 ||
      numAttrs > count || attrsIdxs[0] != 0) {
    return refuseCall(CUDA_ERROR_INVALID_VALUE, "cuMemcpyBatchAsync: invalid batch");
  }
  if (stream == nullptr || stream == CU_STREAM_LEGACY) {
    return refuseCall(CUDA_ERROR_INVALID_VALUE,
                      "cuMemcpyBatchAsync: the legacy NULL stream is not allowed");
  }
  for (size_t i = 0; i < numAttrs; ++i) {
    if ((i > 0 && attrsIdxs[i] <= attrsIdxs[i - 1]) || attrsIdxs[i] >= count ||
        !validAccessOrder(attrs[i].srcAccessOrder)) {
      return refuseCall(CUDA_ERROR_INVALID_VALUE, "cuMemcpyBatchAsync: invalid attributes");
    }
  }
  for (size_t i = 0; i < count; ++i) {
    if (CUresult r = cuMemcpyAsync(dsts[i], srcs[i], sizes[i], stream); r != CUDA_SUCCESS) {
      if (failIdx) *failIdx = i;
      return r;
    }
  }
  return CUDA_SUCCESS;
}

CUresult operandEnd(const CUmemcpy3DOperand& o, size_t elementBytes, const CUextent3D& extent,
                    bool source, CUDA_MEMCPY3D* c) {
  if (o.type == CU_MEMCPY_OPERAND_TYPE_ARRAY) {
    ArrayObject* a = asArray(o.op.array.array);
    if (!a) return CUDA_ERROR_INVALID_VALUE;
    size_t x = o.op.array.offset.x * elementBytes;
    if (source) {
      c->srcMemoryType = CU_MEMORYTYPE_ARRAY;
      c->srcArray = o.op.array.array;
      c->srcXInBytes = x;
      c->srcY = o.op.array.offset.y;
      c->srcZ = o.op.array.offset.z;
    } else {
      c->dstMemoryType = CU_MEMORYTYPE_ARRAY;
      c->dstArray = o.op.array.array;
      c->dstXInBytes = x;
      c->dstY = o.op.array.offset.y;
      c->dstZ = o.op.array.offset.z;
    }
    return CUDA_SUCCESS;
  }
  if (o.type != CU_MEMCPY_OPERAND_TYPE_POINTER) return CUDA_ERROR_INVALID_VALUE;
  if ((o.op.ptr.rowLength && o.op.ptr.rowLength < extent.width) ||
      (o.op.ptr.layerHeight && o.op.ptr.layerHeight < extent.height)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  size_t pitch = (o.op.ptr.rowLength ? o.op.ptr.rowLength : extent.width) * elementBytes;
  size_t height = o.op.ptr.layerHeight ? o.op.ptr.layerHeight : extent.height;
  if (source) {
    c->srcMemoryType = CU_MEMORYTYPE_UNIFIED;
    c->srcDevice = o.op.ptr.ptr;
    c->srcPitch = pitch;
    c->srcHeight = height;
  } else {
    c->dstMemoryType = CU_MEMORYTYPE_UNIFIED;
    c->dstDevice = o.op.ptr.ptr;
    c->dstPitch = pitch;
    c->dstHeight = height;
  }
  return CUDA_SUCCESS;
}

CUresult copyBatch3D(size_t numOps, CUDA_MEMCPY3D_BATCH_OP* ops, unsigned long long flags,
                     size_t* failIdx, CUstream stream) {
  if (failIdx) *failIdx = SIZE_MAX;
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (numOps == 0 || !ops || flags != 0) {
    return refuseCall(CUDA_ERROR_INVALID_VALUE, "cuMemcpy3DBatchAsync: invalid batch");
  }
  if (stream == nullptr || stream == CU_STREAM_LEGACY) {
    return refuseCall(CUDA_ERROR_INVALID_VALUE,
                      "cuMemcpy3DBatchAsync: the legacy NULL stream is not allowed");
  }
  for (size_t i = 0; i < numOps; ++i) {
    if (failIdx) *failIdx = i;
    const CUDA_MEMCPY3D_BATCH_OP& op = ops[i];
    if (!validAccessOrder(op.srcAccessOrder) || op.extent.width == 0 || op.extent.height == 0 ||
        op.extent.depth == 0) {
      return refuseCall(CUDA_ERROR_INVALID_VALUE, "cuMemcpy3DBatchAsync: invalid operation");
    }
    // Extents are in elements: the arrays' (which must agree), else bytes.
    size_t elementBytes = 1;
    ArrayObject* srcArray =
        op.src.type == CU_MEMCPY_OPERAND_TYPE_ARRAY ? asArray(op.src.op.array.array) : nullptr;
    ArrayObject* dstArray =
        op.dst.type == CU_MEMCPY_OPERAND_TYPE_ARRAY ? asArray(op.dst.op.array.array) : nullptr;
    if (srcArray) elementBytes = gpupool::arrayElementBytes(srcArray->shape);
    if (dstArray) {
      size_t e = gpupool::arrayElementBytes(dstArray->shape);
      if (srcArray && e != elementBytes) {
        return refuseCall(CUDA_ERROR_INVALID_VALUE,
                          "cuMemcpy3DBatchAsync: the arrays' element sizes differ");
      }
      elementBytes = e;
    }
    CUDA_MEMCPY3D c{};
    if (CUresult r = operandEnd(op.src, elementBytes, op.extent, true, &c); r != CUDA_SUCCESS) {
      return r;
    }
    if (CUresult r = operandEnd(op.dst, elementBytes, op.extent, false, &c); r != CUDA_SUCCESS) {
      return r;
    }
    c.WidthInBytes = op.extent.width * elementBytes;
    c.Height = op.extent.height;
    c.Depth = op.extent.depth;
    if (CUresult r = copyRegion3D("cuMemcpy3DBatchAsync", c, stream, true); r != CUDA_SUCCESS) {
      return r;
    }
  }
  if (failIdx) *failIdx = SIZE_MAX;
  return CUDA_SUCCESS;
}

}  // namespace

GPUPOOL_DRIVER_API CUresult cuMemcpyBatchAsync_v2(CUdeviceptr* dsts, CUdeviceptr* srcs,
                                                  size_t* sizes, size_t count,
                                                  CUmemcpyAttributes* attrs, size_t* attrsIdxs,
                                                  size_t numAttrs, CUstream stream) {
  return copyBatch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, nullptr, stream);
}
GPUPOOL_TWIN(CUresult, cuMemcpyBatchAsync_v2, cuMemcpyBatchAsync_v2_ptsz,
             (CUdeviceptr * dsts, CUdeviceptr* srcs, size_t* sizes, size_t count,
              CUmemcpyAttributes* attrs, size_t* attrsIdxs, size_t numAttrs, CUstream stream),
             (dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, stream))

GPUPOOL_DRIVER_API CUresult cuMemcpy3DBatchAsync_v2(size_t numOps, CUDA_MEMCPY3D_BATCH_OP* ops,
                                                    unsigned long long flags, CUstream stream) {
  return copyBatch3D(numOps, ops, flags, nullptr, stream);
}
GPUPOOL_TWIN(CUresult, cuMemcpy3DBatchAsync_v2, cuMemcpy3DBatchAsync_v2_ptsz,
             (size_t numOps, CUDA_MEMCPY3D_BATCH_OP* ops, unsigned long long flags,
              CUstream stream),
             (numOps, ops, flags, stream))

// The CUDA 12.8 ABI, with failIdx.
GPUPOOL_DRIVER_API CUresult cuMemcpyBatchAsync(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes,
                                               size_t count, CUmemcpyAttributes* attrs,
                                               size_t* attrsIdxs, size_t numAttrs, size_t* failIdx,
                                               CUstream stream) {
  return copyBatch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx, stream);
}
GPUPOOL_TWIN(CUresult, cuMemcpyBatchAsync, cuMemcpyBatchAsync_ptsz,
             (CUdeviceptr * dsts, CUdeviceptr* srcs, size_t* sizes, size_t count,
              CUmemcpyAttributes* attrs, size_t* attrsIdxs, size_t numAttrs, size_t* failIdx,
              CUstream stream),
             (dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx, stream))

GPUPOOL_DRIVER_API CUresult cuMemcpy3DBatchAsync(size_t numOps, CUDA_MEMCPY3D_BATCH_OP* ops,
                                                 size_t* failIdx, unsigned long long flags,
                                                 CUstream stream) {
  return copyBatch3D(numOps, ops, flags, failIdx, stream);
}
GPUPOOL_TWIN(CUresult, cuMemcpy3DBatchAsync, cuMemcpy3DBatchAsync_ptsz,
             (size_t numOps, CUDA_MEMCPY3D_BATCH_OP* ops, size_t* failIdx, unsigned long long flags,
              CUstream stream),
             (numOps, ops, failIdx, flags, stream))
