// Copies and memsets: host<->device, device<->device, 2D (with an array end: copy3d_api.cc), peer;
// each also as its per-thread-default-stream twin.
//
// Device pointers are the server's addresses, unchanged. Host memory never leaves this process
// except as the bulk bytes of a copy, sent straight from the caller's buffer and received straight
// into it, or, for pinned memory a server on this host maps (shared_host_memory.h), not at all.
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "array_objects.h"
#include "client_log.h"
#include "driver_export.h"
#include "driver_state.h"
#include "host_function_fence.h"
#include "managed_memory.h"
#include "raw_enum.h"
#include "stream_capture.h"

using namespace gpupool::client;
using gpupool::transport::ConstBuffer;

namespace {

// The context whose server holds [address, address+bytes), and the stream to use there: the
// caller's stream when it belongs to that context, else that context's default stream (a pointer
// of another device or another server is served where it lives, as CUDA's unified addressing does).
CUresult route(CUstream stream, CUdeviceptr address, size_t bytes, ContextObject** ctx,
               uint64_t* remoteStream) {
  ContextObject* streamContext = nullptr;
  if (CUresult r = resolveStream(stream, &streamContext, remoteStream); r != CUDA_SUCCESS) {
    return r;
  }
  DeviceAllocation info;
  if (!DriverState::get().findDevice(address, bytes, nullptr, &info)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (info.context != streamContext) {
    if (CUresult r = DriverState::get().ensureRemote(info.context); r != CUDA_SUCCESS) return r;
    *remoteStream = 0;
  }
  *ctx = info.context;
  return CUDA_SUCCESS;
}

CUresult copyDeviceToDevice(const char* what, CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                            CUstream stream, bool async);

// Whether host pointer p is managed memory, which is device memory too: a copy from or into it
// stays on the device, and the host mirror follows at the next synchronization.
bool isManagedHostPointer(const void* p, size_t bytes) {
  DeviceAllocation info;
  return DriverState::get().findDevice(reinterpret_cast<CUdeviceptr>(p), bytes, nullptr, &info) &&
         info.managed;
}

CUresult copyHostToDevice(const char* what, CUdeviceptr dst, const void* src, size_t bytes,
                          CUstream stream, bool async) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (bytes && isManagedHostPointer(src, bytes)) {
    return copyDeviceToDevice(what, dst, reinterpret_cast<CUdeviceptr>(src), bytes, stream, async);
  }
  if (!async) {
    if (CUresult r = checkUnsafeDuringCapture(what); r != CUDA_SUCCESS) return r;
  }
  if (bytes == 0) return CUDA_SUCCESS;
  if (!src) return CUDA_ERROR_INVALID_VALUE;
  ContextObject* ctx = nullptr;
  uint64_t s = 0;
  if (CUresult r = route(stream, dst, bytes, &ctx, &s); r != CUDA_SUCCESS) return r;
  // The bytes are taken now, so a host function still to run before this copy must have run; and
  // a synchronous copy would stop the server's thread at its gate.
  auto fence = HostFunctionFence::hold(HostFunctionFence::Work::kCall, fenceScopeOf(ctx));
  auto shared = sharedHostRange(*ctx->server, src, bytes);
  auto build = [&](wire::Request::Builder b) {
    auto m = b.initMemcpyHtoD();
    m.setContext(ctx->remote);
    m.setDst(dst);
    m.setBytes(bytes);
    m.setStream(s);
    m.setAsync(async);
    if (shared) {
      m.setHostFile(shared->file);
      m.setHostOffset(shared->offset);
    }
  };
  CUresult posted;
  if (shared) {
    // The server reads them where they lie (its mapping of this pinned memory): nothing travels.
    // Synchronous, it must have read them before this returns, so the caller may reuse them.
    posted = async ? ctx->server->post(what, build) : ctx->server->call(what, build);
  } else {
    // No answer needed: like CUDA from pageable memory, the call is done once the bytes are
    // handed over; a failure on the server shows at the next synchronizing call.
    ConstBuffer bulk{src, bytes};
    posted = ctx->server->post(what, build, std::span<const ConstBuffer>(&bulk, 1));
  }
  if (posted != CUDA_SUCCESS || async) return posted;
  return refreshManagedAfterWrite(ctx, dst);
}

CUresult copyDeviceToHost(const char* what, void* dst, CUdeviceptr src, size_t bytes,
                          CUstream stream) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!stream) {
    if (CUresult r = checkUnsafeDuringCapture(what); r != CUDA_SUCCESS) return r;
  }
  if (bytes == 0) return CUDA_SUCCESS;
  if (!dst) return CUDA_ERROR_INVALID_VALUE;
  if (isManagedHostPointer(dst, bytes)) {
    // Complete on return, as this copy is here: the mirror takes the bytes before it returns.
    return copyDeviceToDevice(what, reinterpret_cast<CUdeviceptr>(dst), src, bytes, stream, false);
  }
  ContextObject* ctx = nullptr;
  uint64_t s = 0;
  if (CUresult r = route(stream, src, bytes, &ctx, &s); r != CUDA_SUCCESS) {
    // An unknown source still goes to the server, which says precisely what is wrong with it.
    if (r != CUDA_ERROR_INVALID_VALUE) return r;
    if (CUresult rr = resolveStream(stream, &ctx, &s); rr != CUDA_SUCCESS) return rr;
  }
  // Pinned memory the server maps is written where it lies, and the reply carries no bytes.
  auto shared = sharedHostRange(*ctx->server, dst, bytes);
  return ctx->server->call(
      what,
      [&](wire::Request::Builder b) {
        auto m = b.initMemcpyDtoH();
        m.setContext(ctx->remote);
        m.setSrc(src);
        m.setBytes(bytes);
        m.setStream(s);
        if (shared) {
          m.setHostFile(shared->file);
          m.setHostOffset(shared->offset);
        }
      },
      {},
      [&](wire::Response::Reader, ReplyBulk& bulk) {
        // Straight into the caller's buffer: no intermediate copy.
        if (shared) return CUDA_SUCCESS;
        return bulk.read(dst, bytes) ? CUDA_SUCCESS : CUDA_ERROR_UNKNOWN;
      },
      shared ? gpupool::transport::MutableBuffer{} : gpupool::transport::MutableBuffer{dst, bytes});
}

CUresult copyDeviceToDevice(const char* what, CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                            CUstream stream, bool async) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!async) {
    if (CUresult r = checkUnsafeDuringCapture(what); r != CUDA_SUCCESS) return r;
  }
  if (bytes == 0) return CUDA_SUCCESS;
  auto& state = DriverState::get();
  DeviceAllocation dstInfo, srcInfo;
  if (!state.findDevice(dst, bytes, nullptr, &dstInfo) ||
      !state.findDevice(src, bytes, nullptr, &srcInfo)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (dstInfo.context != srcInfo.context) {
    // Different devices (maybe different servers): the bytes go through this host, in order.
    std::vector<uint8_t> staging(bytes);
    if (CUresult r = copyDeviceToHost(what, staging.data(), src, bytes, stream);
        r != CUDA_SUCCESS) {
      return r;
    }
    return copyHostToDevice(what, dst, staging.data(), bytes, stream, false);
  }
  CaptureScope capturing;  // a capturing stream takes the copy as a node
  ContextObject* ctx = nullptr;
  uint64_t s = 0;
  if (CUresult r = route(stream, dst, bytes, &ctx, &s); r != CUDA_SUCCESS) return r;
  if (CUresult r = CUDA_SUCCESS; captureCopy(stream, dst, src, bytes, &r)) return r;
  // A synchronous copy: the server waits for it in order.
  auto fence = async ? HostFunctionFence::Ticket{}
                     : HostFunctionFence::hold(HostFunctionFence::Work::kCall, fenceScopeOf(ctx));
  CUresult posted = ctx->server->post(what, [&](wire::Request::Builder b) {
    auto m = b.initMemcpyDtoD();
    m.setContext(ctx->remote);
    m.setDst(dst);
    m.setSrc(src);
    m.setBytes(bytes);
    m.setStream(s);
    m.setAsync(async);
  });
  if (posted != CUDA_SUCCESS || async) return posted;
  return refreshManagedAfterWrite(ctx, dst);
}

// cuMemcpy/cuMemcpyAsync: the direction follows from which pointers are our device allocations.
CUresult copyUnified(const char* what, CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                     CUstream stream, bool async) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  auto& state = DriverState::get();
  bool dstDevice = false, srcDevice = false;
  if (CUresult r = state.unifiedIsDevice(what, dst, &dstDevice); r != CUDA_SUCCESS) return r;
  if (CUresult r = state.unifiedIsDevice(what, src, &srcDevice); r != CUDA_SUCCESS) return r;
  if (dstDevice && srcDevice) return copyDeviceToDevice(what, dst, src, bytes, stream, async);
  if (dstDevice) {
    return copyHostToDevice(what, dst, reinterpret_cast<const void*>(src), bytes, stream, async);
  }
  if (srcDevice) return copyDeviceToHost(what, reinterpret_cast<void*>(dst), src, bytes, stream);
  if (bytes == 0) return CUDA_SUCCESS;
  if (!dst || !src) return CUDA_ERROR_INVALID_VALUE;
  std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
  return CUDA_SUCCESS;
}

// Whether [dst, dst+extent) lies in one pinned host allocation of this library (cuMemHostAlloc,
// cuMemAllocHost, cuMemHostRegister): under unified addressing a program may memset it like
// device memory (XLA's autotuner does).
bool inPinnedHostMemory(CUdeviceptr dst, size_t extent) {
  uintptr_t base = 0;
  HostAllocation info;
  if (!DriverState::get().findHost(reinterpret_cast<const void*>(dst), &base, &info)) return false;
  return dst - base <= info.size && extent <= info.size - (dst - base);
}

// A memset of pinned host memory, in stream order: the stream's earlier work is waited for, then
// the bytes are written here, where they live (a pool GPU cannot reach them). Later work that
// reads them (a copy from it) reads them at its call, so it sees them. Refused on a capturing
// stream: a graph node could not write the client's memory.
CUresult memsetHost(const char* what, CUdeviceptr dst, uint32_t value, unsigned elementSize,
                    size_t width, size_t height, size_t pitch, CUstream stream) {
  ContextObject* ctx = nullptr;
  uint64_t s = 0;
  if (CUresult r = resolveStream(stream, &ctx, &s, what); r != CUDA_SUCCESS) return r;
  HostFunctionFence::await(HostFunctionFence::Work::kCall, fenceScopeOf(ctx));
  CUresult r = ctx->server->call(what, [&](wire::Request::Builder b) {
    auto sync = b.initStreamSynchronize();
    sync.setContext(ctx->remote);
    sync.setStream(s);
  });
  if (r != CUDA_SUCCESS) return r;
  for (size_t row = 0; row < height; ++row) {
    auto* at = reinterpret_cast<uint8_t*>(dst + row * pitch);
    for (size_t i = 0; i < width; ++i) std::memcpy(at + i * elementSize, &value, elementSize);
  }
  return CUDA_SUCCESS;
}

CUresult memset(const char* what, CUdeviceptr dst, uint32_t value, unsigned elementSize,
                size_t width, size_t height, size_t pitch, CUstream stream, bool async) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!async) {
    if (CUresult r = checkUnsafeDuringCapture(what); r != CUDA_SUCCESS) return r;
  }
  if (width == 0 || height == 0) return CUDA_SUCCESS;
  if (height == 1) pitch = width * elementSize;
  if (pitch < width * elementSize) return CUDA_ERROR_INVALID_VALUE;
  const size_t extent = pitch * (height - 1) + width * elementSize;
  if (inPinnedHostMemory(dst, extent)) {
    // Pinned host memory of this library where the server also placed device memory: which one
    // is meant cannot be told.
    if (bool device = false;
        DriverState::get().unifiedIsDevice(what, dst, &device) != CUDA_SUCCESS) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    return memsetHost(what, dst, value, elementSize, width, height, pitch, stream);
  }
  ContextObject* ctx = nullptr;
  uint64_t s = 0;
  bool known = true;
  {
    CaptureScope capturing;  // a capturing stream takes the memset as a node
    if (CUresult r = route(stream, dst, extent, &ctx, &s); r != CUDA_SUCCESS) {
      if (r != CUDA_ERROR_INVALID_VALUE) return r;
      known = false;
    } else if (CUresult r = CUDA_SUCCESS;
               captureMemset(stream, dst, value, elementSize, width, height, pitch, &r)) {
      return r;
    }
  }
  if (!known) {
    // Memory this library did not hand out (another library's mapping, say): the server knows
    // its context's memory and says whether the range is there, synchronously, as the driver
    // refuses an unknown range at the call. A capturing stream cannot take it as a node.
    if (CUresult r = resolveStream(stream, &ctx, &s, what); r != CUDA_SUCCESS) return r;
  }
  // A synchronous memset: the server waits for it in order.
  auto fence = async ? HostFunctionFence::Ticket{}
                     : HostFunctionFence::hold(HostFunctionFence::Work::kCall, fenceScopeOf(ctx));
  auto build = [&](wire::Request::Builder b) {
    auto m = b.initMemset();
    m.setContext(ctx->remote);
    m.setDst(dst);
    m.setValue(value);
    m.setElementSize(elementSize);
    m.setWidth(width);
    m.setHeight(height);
    m.setPitch(pitch);
    m.setStream(s);
    m.setAsync(async);
  };
  return known ? ctx->server->post(what, build) : ctx->server->call(what, build);
}

// Where one end of a 2D copy lives.
struct End {
  bool device = false;
  CUdeviceptr address = 0;  // device end
  uint8_t* host = nullptr;  // host end
  size_t pitch = 0;
};

CUresult endOf(const char* what, int type, const void* host, CUdeviceptr device, CUarray array,
               size_t x, size_t y, size_t pitch, End* end) {
  if (type == CU_MEMORYTYPE_UNIFIED) {
    bool isDevice = false;
    if (CUresult r = DriverState::get().unifiedIsDevice(what, device, &isDevice);
        r != CUDA_SUCCESS) {
      return r;
    }
    type = isDevice ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
    host = reinterpret_cast<const void*>(device);
  }
  end->pitch = pitch;
  switch (type) {
    case CU_MEMORYTYPE_HOST:
      if (!host) return CUDA_ERROR_INVALID_VALUE;
      end->host = const_cast<uint8_t*>(static_cast<const uint8_t*>(host)) + y * pitch + x;
      return CUDA_SUCCESS;
    case CU_MEMORYTYPE_DEVICE:
      end->device = true;
      end->address = device + y * pitch + x;
      return CUDA_SUCCESS;
    default:  // arrays go through copyRegion3D (client/copy3d_api.cc)
      (void)array;
      return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult copy2D(const char* what, const CUDA_MEMCPY2D* c, CUstream stream, bool async) {
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  // The memory types are read raw: any number may arrive, and an unknown one is an error below.
  if (rawEnumValue(c->srcMemoryType) == CU_MEMORYTYPE_ARRAY ||
      rawEnumValue(c->dstMemoryType) == CU_MEMORYTYPE_ARRAY) {
    // An array end: the copy is a 3D one of depth 1.
    CUDA_MEMCPY3D c3{};
    c3.srcXInBytes = c->srcXInBytes;
    c3.srcY = c->srcY;
    std::memcpy(&c3.srcMemoryType, &c->srcMemoryType, sizeof c3.srcMemoryType);
    c3.srcHost = c->srcHost;
    c3.srcDevice = c->srcDevice;
    c3.srcArray = c->srcArray;
    c3.srcPitch = c->srcPitch;
    c3.dstXInBytes = c->dstXInBytes;
    c3.dstY = c->dstY;
    std::memcpy(&c3.dstMemoryType, &c->dstMemoryType, sizeof c3.dstMemoryType);
    c3.dstHost = c->dstHost;
    c3.dstDevice = c->dstDevice;
    c3.dstArray = c->dstArray;
    c3.dstPitch = c->dstPitch;
    c3.WidthInBytes = c->WidthInBytes;
    c3.Height = c->Height;
    c3.Depth = 1;
    return copyRegion3D(what, c3, stream, async);
  }
  ContextObject* ctx = nullptr;
  uint64_t s = 0;
  if (CUresult r = resolveStream(stream, &ctx, &s); r != CUDA_SUCCESS) return r;
  End src, dst;
  if (CUresult r = endOf(what, rawEnumValue(c->srcMemoryType), c->srcHost, c->srcDevice,
                         c->srcArray, c->srcXInBytes, c->srcY, c->srcPitch, &src);
      r != CUDA_SUCCESS) {
    return r;
  }
  if (CUresult r = endOf(what, rawEnumValue(c->dstMemoryType), c->dstHost, c->dstDevice,
                         c->dstArray, c->dstXInBytes, c->dstY, c->dstPitch, &dst);
      r != CUDA_SUCCESS) {
    return r;
  }
  size_t width = c->WidthInBytes, height = c->Height;
  if (width == 0 || height == 0) return CUDA_SUCCESS;
  if ((height > 1 && (src.pitch < width || dst.pitch < width))) return CUDA_ERROR_INVALID_VALUE;
  if (!src.device && !dst.device) {
    for (size_t r = 0; r < height; ++r) {
      std::memmove(dst.host + r * dst.pitch, src.host + r * src.pitch, width);
    }
    return CUDA_SUCCESS;
  }
  // A host end travels packed: rows back to back.
  std::vector<uint8_t> packed;
  ConstBuffer bulk{nullptr, 0};
  if (!src.device) {
    if (src.pitch == width) {
      bulk = {src.host, width * height};
    } else {
      packed.resize(width * height);
      for (size_t r = 0; r < height; ++r) {
        std::memcpy(packed.data() + r * width, src.host + r * src.pitch, width);
      }
      bulk = {packed.data(), packed.size()};
    }
  }
  return ctx->server->call(
      what,
      [&](wire::Request::Builder b) {
        auto m = b.initMemcpy2D();
        m.setContext(ctx->remote);
        m.setSrcIsDevice(src.device);
        m.setDstIsDevice(dst.device);
        m.getSrc().setAddress(src.address);
        m.getSrc().setPitch(src.pitch);
        m.getDst().setAddress(dst.address);
        m.getDst().setPitch(dst.pitch);
        m.setWidthBytes(width);
        m.setHeight(height);
        m.setStream(s);
        m.setAsync(async);
      },
      std::span<const ConstBuffer>(&bulk, bulk.size ? 1 : 0),
      [&](wire::Response::Reader, ReplyBulk& reply) {
        if (dst.device) return CUDA_SUCCESS;
        if (dst.pitch == width) {
          return reply.read(dst.host, width * height) ? CUDA_SUCCESS : CUDA_ERROR_UNKNOWN;
        }
        for (size_t r = 0; r < height; ++r) {
          if (!reply.read(dst.host + r * dst.pitch, width)) return CUDA_ERROR_UNKNOWN;
        }
        return CUDA_SUCCESS;
      },
      // Rows land back to back only when the host pitch is the width.
      !dst.device && dst.pitch == width
          ? gpupool::transport::MutableBuffer{dst.host, width * height}
          : gpupool::transport::MutableBuffer{});
}

}  // namespace

// ---- Copies (each also as its per-thread-default-stream twin) ----

GPUPOOL_DRIVER_API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t bytes) {
  return copyHostToDevice("cuMemcpyHtoD", dst, src, bytes, nullptr, false);
}
GPUPOOL_TWIN(CUresult, cuMemcpyHtoD_v2, cuMemcpyHtoD_v2_ptds,
             (CUdeviceptr dst, const void* src, size_t bytes), (dst, src, bytes))

GPUPOOL_DRIVER_API CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t bytes) {
  return copyDeviceToHost("cuMemcpyDtoH", dst, src, bytes, nullptr);
}
GPUPOOL_TWIN(CUresult, cuMemcpyDtoH_v2, cuMemcpyDtoH_v2_ptds,
             (void* dst, CUdeviceptr src, size_t bytes), (dst, src, bytes))

GPUPOOL_DRIVER_API CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
  return copyDeviceToDevice("cuMemcpyDtoD", dst, src, bytes, nullptr, false);
}
GPUPOOL_TWIN(CUresult, cuMemcpyDtoD_v2, cuMemcpyDtoD_v2_ptds,
             (CUdeviceptr dst, CUdeviceptr src, size_t bytes), (dst, src, bytes))

GPUPOOL_DRIVER_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t bytes,
                                                 CUstream stream) {
  return copyHostToDevice("cuMemcpyHtoDAsync", dst, src, bytes, stream, true);
}
GPUPOOL_TWIN(CUresult, cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync_v2_ptsz,
             (CUdeviceptr dst, const void* src, size_t bytes, CUstream stream),
             (dst, src, bytes, stream))

GPUPOOL_DRIVER_API CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t bytes,
                                                 CUstream stream) {
  // Completes before returning: the bytes arrive with the reply, in stream order.
  return copyDeviceToHost("cuMemcpyDtoHAsync", dst, src, bytes, stream);
}
GPUPOOL_TWIN(CUresult, cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync_v2_ptsz,
             (void* dst, CUdeviceptr src, size_t bytes, CUstream stream), (dst, src, bytes, stream))

GPUPOOL_DRIVER_API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                                                 CUstream stream) {
  return copyDeviceToDevice("cuMemcpyDtoDAsync", dst, src, bytes, stream, true);
}
GPUPOOL_TWIN(CUresult, cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync_v2_ptsz,
             (CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream),
             (dst, src, bytes, stream))

GPUPOOL_DRIVER_API CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
  return copyUnified("cuMemcpy", dst, src, bytes, nullptr, false);
}
GPUPOOL_TWIN(CUresult, cuMemcpy, cuMemcpy_ptds, (CUdeviceptr dst, CUdeviceptr src, size_t bytes),
             (dst, src, bytes))

GPUPOOL_DRIVER_API CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                                          CUstream stream) {
  return copyUnified("cuMemcpyAsync", dst, src, bytes, stream, true);
}
GPUPOOL_TWIN(CUresult, cuMemcpyAsync, cuMemcpyAsync_ptsz,
             (CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream),
             (dst, src, bytes, stream))

GPUPOOL_DRIVER_API CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D* copy) {
  return copy2D("cuMemcpy2D", copy, nullptr, false);
}
GPUPOOL_TWIN(CUresult, cuMemcpy2D_v2, cuMemcpy2D_v2_ptds, (const CUDA_MEMCPY2D* copy), (copy))
GPUPOOL_DRIVER_API CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D* copy) {
  return copy2D("cuMemcpy2DUnaligned", copy, nullptr, false);
}
GPUPOOL_TWIN(CUresult, cuMemcpy2DUnaligned_v2, cuMemcpy2DUnaligned_v2_ptds,
             (const CUDA_MEMCPY2D* copy), (copy))
GPUPOOL_DRIVER_API CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D* copy, CUstream stream) {
  return copy2D("cuMemcpy2DAsync", copy, stream, true);
}
GPUPOOL_TWIN(CUresult, cuMemcpy2DAsync_v2, cuMemcpy2DAsync_v2_ptsz,
             (const CUDA_MEMCPY2D* copy, CUstream stream), (copy, stream))

// ---- Memset ----

GPUPOOL_DRIVER_API CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, size_t n) {
  return memset("cuMemsetD8", dst, value, 1, n, 1, n, nullptr, false);
}
GPUPOOL_TWIN(CUresult, cuMemsetD8_v2, cuMemsetD8_v2_ptds,
             (CUdeviceptr dst, unsigned char value, size_t n), (dst, value, n))
GPUPOOL_DRIVER_API CUresult cuMemsetD16_v2(CUdeviceptr dst, unsigned short value, size_t n) {
  return memset("cuMemsetD16", dst, value, 2, n, 1, n * 2, nullptr, false);
}
GPUPOOL_TWIN(CUresult, cuMemsetD16_v2, cuMemsetD16_v2_ptds,
             (CUdeviceptr dst, unsigned short value, size_t n), (dst, value, n))
GPUPOOL_DRIVER_API CUresult cuMemsetD32_v2(CUdeviceptr dst, unsigned int value, size_t n) {
  return memset("cuMemsetD32", dst, value, 4, n, 1, n * 4, nullptr, false);
}
GPUPOOL_TWIN(CUresult, cuMemsetD32_v2, cuMemsetD32_v2_ptds,
             (CUdeviceptr dst, unsigned int value, size_t n), (dst, value, n))

GPUPOOL_DRIVER_API CUresult cuMemsetD2D8_v2(CUdeviceptr dst, size_t pitch, unsigned char value,
                                            size_t width, size_t height) {
  return memset("cuMemsetD2D8", dst, value, 1, width, height, pitch, nullptr, false);
}
GPUPOOL_TWIN(CUresult, cuMemsetD2D8_v2, cuMemsetD2D8_v2_ptds,
             (CUdeviceptr dst, size_t pitch, unsigned char value, size_t width, size_t height),
             (dst, pitch, value, width, height))
GPUPOOL_DRIVER_API CUresult cuMemsetD2D16_v2(CUdeviceptr dst, size_t pitch, unsigned short value,
                                             size_t width, size_t height) {
  return memset("cuMemsetD2D16", dst, value, 2, width, height, pitch, nullptr, false);
}
GPUPOOL_TWIN(CUresult, cuMemsetD2D16_v2, cuMemsetD2D16_v2_ptds,
             (CUdeviceptr dst, size_t pitch, unsigned short value, size_t width, size_t height),
             (dst, pitch, value, width, height))
GPUPOOL_DRIVER_API CUresult cuMemsetD2D32_v2(CUdeviceptr dst, size_t pitch, unsigned int value,
                                             size_t width, size_t height) {
  return memset("cuMemsetD2D32", dst, value, 4, width, height, pitch, nullptr, false);
}
GPUPOOL_TWIN(CUresult, cuMemsetD2D32_v2, cuMemsetD2D32_v2_ptds,
             (CUdeviceptr dst, size_t pitch, unsigned int value, size_t width, size_t height),
             (dst, pitch, value, width, height))

GPUPOOL_DRIVER_API CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t n,
                                            CUstream stream) {
  return memset("cuMemsetD8Async", dst, value, 1, n, 1, n, stream, true);
}
GPUPOOL_TWIN(CUresult, cuMemsetD8Async, cuMemsetD8Async_ptsz,
             (CUdeviceptr dst, unsigned char value, size_t n, CUstream stream),
             (dst, value, n, stream))
GPUPOOL_DRIVER_API CUresult cuMemsetD16Async(CUdeviceptr dst, unsigned short value, size_t n,
                                             CUstream stream) {
  return memset("cuMemsetD16Async", dst, value, 2, n, 1, n * 2, stream, true);
}
GPUPOOL_TWIN(CUresult, cuMemsetD16Async, cuMemsetD16Async_ptsz,
             (CUdeviceptr dst, unsigned short value, size_t n, CUstream stream),
             (dst, value, n, stream))
GPUPOOL_DRIVER_API CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int value, size_t n,
                                             CUstream stream) {
  return memset("cuMemsetD32Async", dst, value, 4, n, 1, n * 4, stream, true);
}
GPUPOOL_TWIN(CUresult, cuMemsetD32Async, cuMemsetD32Async_ptsz,
             (CUdeviceptr dst, unsigned int value, size_t n, CUstream stream),
             (dst, value, n, stream))
GPUPOOL_DRIVER_API CUresult cuMemsetD2D8Async(CUdeviceptr dst, size_t pitch, unsigned char value,
                                              size_t width, size_t height, CUstream stream) {
  return memset("cuMemsetD2D8Async", dst, value, 1, width, height, pitch, stream, true);
}
GPUPOOL_TWIN(CUresult, cuMemsetD2D8Async, cuMemsetD2D8Async_ptsz,
             (CUdeviceptr dst, size_t pitch, unsigned char value, size_t width, size_t height,
              CUstream stream),
             (dst, pitch, value, width, height, stream))
GPUPOOL_DRIVER_API CUresult cuMemsetD2D16Async(CUdeviceptr dst, size_t pitch, unsigned short value,
                                               size_t width, size_t height, CUstream stream) {
  return memset("cuMemsetD2D16Async", dst, value, 2, width, height, pitch, stream, true);
}
GPUPOOL_TWIN(CUresult, cuMemsetD2D16Async, cuMemsetD2D16Async_ptsz,
             (CUdeviceptr dst, size_t pitch, unsigned short value, size_t width, size_t height,
              CUstream stream),
             (dst, pitch, value, width, height, stream))
GPUPOOL_DRIVER_API CUresult cuMemsetD2D32Async(CUdeviceptr dst, size_t pitch, unsigned int value,
                                               size_t width, size_t height, CUstream stream) {
  return memset("cuMemsetD2D32Async", dst, value, 4, width, height, pitch, stream, true);
}
GPUPOOL_TWIN(CUresult, cuMemsetD2D32Async, cuMemsetD2D32Async_ptsz,
             (CUdeviceptr dst, size_t pitch, unsigned int value, size_t width, size_t height,
              CUstream stream),
             (dst, pitch, value, width, height, stream))

// ---- Peer copies: devices of a pool never map each other's memory, so the bytes are staged ----

GPUPOOL_DRIVER_API CUresult cuMemcpyPeer(CUdeviceptr dst, CUcontext dstContext, CUdeviceptr src,
                                         CUcontext srcContext, size_t bytes) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!asContext(dstContext) || !asContext(srcContext)) return CUDA_ERROR_INVALID_CONTEXT;
  return copyDeviceToDevice("cuMemcpyPeer", dst, src, bytes, nullptr, false);
}
GPUPOOL_TWIN(CUresult, cuMemcpyPeer, cuMemcpyPeer_ptds,
             (CUdeviceptr dst, CUcontext dstContext, CUdeviceptr src, CUcontext srcContext,
              size_t bytes),
             (dst, dstContext, src, srcContext, bytes))

GPUPOOL_DRIVER_API CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dstContext,
                                              CUdeviceptr src, CUcontext srcContext, size_t bytes,
                                              CUstream stream) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!asContext(dstContext) || !asContext(srcContext)) return CUDA_ERROR_INVALID_CONTEXT;
  return copyDeviceToDevice("cuMemcpyPeerAsync", dst, src, bytes, stream, true);
}
GPUPOOL_TWIN(CUresult, cuMemcpyPeerAsync, cuMemcpyPeerAsync_ptsz,
             (CUdeviceptr dst, CUcontext dstContext, CUdeviceptr src, CUcontext srcContext,
              size_t bytes, CUstream stream),
             (dst, dstContext, src, srcContext, bytes, stream))
