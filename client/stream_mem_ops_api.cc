// Stream memory operations: cuStreamWaitValue32/64, cuStreamWriteValue32/64 and
// cuStreamBatchMemOp, in their v1 and _v2 ABIs and per-thread-default-stream twins.
//
// Each call is checked here and posted as one streamMemOps request (the caller does not wait); the
// server queues the operations on the stream, where a wait holds that stream only
// (server/handlers/memop_handlers.cc). On a capturing stream the batch becomes a batch memory
// operation node (stream_capture.cc), as the driver has captured them since CUDA 11.7. What the
// pool cannot do is refused, with its reason under GPU_POOL_LOG=1: FLUSH and FLUSH_REMOTE_WRITES
// with CUDA_ERROR_NOT_SUPPORTED, as NVIDIA refuses them where CAN_FLUSH_REMOTE_WRITES is 0 (the
// pool reports 0; observed on driver 580.159.04, H200), and memory that is not the stream's
// context's device memory (host memory is on another machine) with CUDA_ERROR_INVALID_VALUE.
#include <string>
#include <vector>

#include "client_log.h"
#include "driver_export.h"
#include "driver_state.h"
#include "raw_enum.h"
#include "stream_capture.h"
#include "stream_mem_ops.h"

using namespace gpupool::client;

namespace {

constexpr unsigned kMaxOps = 255;  // "must be less than 256"

CUresult refuse(const char* what, const std::string& why) {
  return refuseCall(CUDA_ERROR_INVALID_VALUE, std::string(what) + ": " + why);
}

CUresult refuseFlush(const char* what, const char* which) {
  return refuseCall(CUDA_ERROR_NOT_SUPPORTED, std::string(what) + ": " + which +
                                                  ": the pool reports CAN_FLUSH_REMOTE_WRITES 0");
}

// Checks one operation of a batch for `ctx`; `v2` selects the _v2 ABI's rules. Clears the write
// flag NO_MEMORY_BARRIER, which only permits reordering: a write with its barrier honours it.
CUresult check(const char* what, ContextObject* ctx, bool v2, CUstreamBatchMemOpParams* op) {
  const auto kind = static_cast<unsigned>(rawEnumValue(op->operation));
  bool wide = false;
  switch (kind) {
    case CU_STREAM_MEM_OP_WAIT_VALUE_64:
      wide = true;
      [[fallthrough]];
    case CU_STREAM_MEM_OP_WAIT_VALUE_32: {
      unsigned flags = op->waitValue.flags;
      if (flags & CU_STREAM_WAIT_VALUE_FLUSH) {
        return refuseFlush(what, "CU_STREAM_WAIT_VALUE_FLUSH");
      }
      if (flags > CU_STREAM_WAIT_VALUE_NOR) return refuse(what, "unknown wait flags");
      break;
    }
    case CU_STREAM_MEM_OP_WRITE_VALUE_64:
      wide = true;
      [[fallthrough]];
    case CU_STREAM_MEM_OP_WRITE_VALUE_32: {
      unsigned flags = op->writeValue.flags;
      if (flags == CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER && !v2) {
        op->writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
      } else if (flags == CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER) {
        return refuse(what,
                      "CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER is not supported in the v2 API");
      } else if (flags != CU_STREAM_WRITE_VALUE_DEFAULT) {
        return refuse(what, "unknown write flags");
      }
      break;
    }
    case CU_STREAM_MEM_OP_BARRIER:
      if (!v2) return refuse(what, "CU_STREAM_MEM_OP_BARRIER exists in the v2 API only");
      if (op->memoryBarrier.flags != CU_STREAM_MEMORY_BARRIER_TYPE_SYS &&
          op->memoryBarrier.flags != CU_STREAM_MEMORY_BARRIER_TYPE_GPU) {
        return refuse(what, "unknown memory barrier type");
      }
      return CUDA_SUCCESS;
    case CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES:
      return refuseFlush(what, "CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES");
    default:
      return refuse(what, "unknown operation " + std::to_string(kind));
  }
  // waitValue and writeValue share the layout of `address`.
  CUdeviceptr address = op->waitValue.address;
  const size_t bytes = wide ? 8 : 4;
  if (address % bytes != 0) return refuse(what, "address not aligned to the value's size");
  DeviceAllocation info;
  if (!DriverState::get().findDevice(address, bytes, nullptr, &info) || info.context != ctx) {
    return refuse(what, "the address is not device memory of the stream's context");
  }
  return CUDA_SUCCESS;
}

CUresult memOps(const char* what, CUstream stream, unsigned count,
                const CUstreamBatchMemOpParams* params, unsigned flags, bool v2) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (flags != 0) return refuse(what, "flags must be 0");
  if (count == 0 || count > kMaxOps || !params) {
    return refuse(what, "a batch holds 1 to 255 operations");
  }
  CaptureScope capturing;  // a capturing stream takes the batch as a batch memop node
  ContextObject* ctx = nullptr;
  uint64_t s = 0;
  if (CUresult r = resolveStream(stream, &ctx, &s); r != CUDA_SUCCESS) return r;
  std::vector<CUstreamBatchMemOpParams> ops;
  if (CUresult r = checkStreamMemOps(what, ctx, v2, count, params, &ops); r != CUDA_SUCCESS) {
    return r;
  }
  if (CUresult r = CUDA_SUCCESS; captureMemOps(stream, ops, &r)) return r;
  return ctx->server->post(what, [&](wire::Request::Builder b) {
    auto m = b.initStreamMemOps();
    m.setContext(ctx->remote);
    m.setStream(s);
    fillStreamMemOps(m.initOps(count), ops);
  });
}

CUresult single(const char* what, CUstream stream, CUstreamBatchMemOpType kind, CUdeviceptr address,
                uint64_t value, unsigned flags, bool v2) {
  CUstreamBatchMemOpParams op{};
  op.operation = kind;
  bool wait = kind == CU_STREAM_MEM_OP_WAIT_VALUE_32 || kind == CU_STREAM_MEM_OP_WAIT_VALUE_64;
  bool wide = kind == CU_STREAM_MEM_OP_WAIT_VALUE_64 || kind == CU_STREAM_MEM_OP_WRITE_VALUE_64;
  if (wait) {
    op.waitValue.address = address;
    op.waitValue.flags = flags;
    if (wide) {
      op.waitValue.value64 = value;
    } else {
      op.waitValue.value = static_cast<cuuint32_t>(value);
    }
  } else {
    op.writeValue.address = address;
    op.writeValue.flags = flags;
    if (wide) {
      op.writeValue.value64 = value;
    } else {
      op.writeValue.value = static_cast<cuuint32_t>(value);
    }
  }
  return memOps(what, stream, 1, &op, 0, v2);
}

}  // namespace

namespace gpupool::client {

CUresult checkStreamMemOps(const char* what, ContextObject* ctx, bool v2, unsigned count,
                           const CUstreamBatchMemOpParams* params,
                           std::vector<CUstreamBatchMemOpParams>* out) {
  if (count == 0 || count > kMaxOps || !params) {
    return refuse(what, "a batch holds 1 to 255 operations");
  }
  std::vector<CUstreamBatchMemOpParams> ops(params, params + count);
  for (auto& op : ops) {
    if (CUresult r = check(what, ctx, v2, &op); r != CUDA_SUCCESS) return r;
  }
  *out = std::move(ops);
  return CUDA_SUCCESS;
}

void fillStreamMemOps(capnp::List<wire::Request::StreamMemOp>::Builder list,
                      const std::vector<CUstreamBatchMemOpParams>& ops) {
  for (unsigned i = 0; i < ops.size(); ++i) {
    const CUstreamBatchMemOpParams& op = ops[i];
    auto o = list[i];
    o.setKind(static_cast<uint32_t>(op.operation));
    switch (op.operation) {
      case CU_STREAM_MEM_OP_BARRIER:
        o.setFlags(op.memoryBarrier.flags);
        break;
      case CU_STREAM_MEM_OP_WAIT_VALUE_32:
      case CU_STREAM_MEM_OP_WAIT_VALUE_64:
        o.setAddress(op.waitValue.address);
        o.setFlags(op.waitValue.flags);
        o.setValue(op.operation == CU_STREAM_MEM_OP_WAIT_VALUE_64 ? op.waitValue.value64
                                                                  : op.waitValue.value);
        break;
      default:
        o.setAddress(op.writeValue.address);
        o.setFlags(op.writeValue.flags);
        o.setValue(op.operation == CU_STREAM_MEM_OP_WRITE_VALUE_64 ? op.writeValue.value64
                                                                   : op.writeValue.value);
        break;
    }
  }
}

}  // namespace gpupool::client

// Each name in four ABIs: v1, v1 per-thread, _v2 and _v2 per-thread.
GPUPOOL_DRIVER_API CUresult cuStreamWaitValue32(CUstream stream, CUdeviceptr address,
                                                cuuint32_t value, unsigned int flags) {
  return single("cuStreamWaitValue32", stream, CU_STREAM_MEM_OP_WAIT_VALUE_32, address, value,
                flags, false);
}
GPUPOOL_TWIN(CUresult, cuStreamWaitValue32, cuStreamWaitValue32_ptsz,
             (CUstream stream, CUdeviceptr address, cuuint32_t value, unsigned int flags),
             (stream, address, value, flags))
GPUPOOL_DRIVER_API CUresult cuStreamWaitValue32_v2(CUstream stream, CUdeviceptr address,
                                                   cuuint32_t value, unsigned int flags) {
  return single("cuStreamWaitValue32", stream, CU_STREAM_MEM_OP_WAIT_VALUE_32, address, value,
                flags, true);
}
GPUPOOL_TWIN(CUresult, cuStreamWaitValue32_v2, cuStreamWaitValue32_v2_ptsz,
             (CUstream stream, CUdeviceptr address, cuuint32_t value, unsigned int flags),
             (stream, address, value, flags))

GPUPOOL_DRIVER_API CUresult cuStreamWaitValue64(CUstream stream, CUdeviceptr address,
                                                cuuint64_t value, unsigned int flags) {
  return single("cuStreamWaitValue64", stream, CU_STREAM_MEM_OP_WAIT_VALUE_64, address, value,
                flags, false);
}
GPUPOOL_TWIN(CUresult, cuStreamWaitValue64, cuStreamWaitValue64_ptsz,
             (CUstream stream, CUdeviceptr address, cuuint64_t value, unsigned int flags),
             (stream, address, value, flags))
GPUPOOL_DRIVER_API CUresult cuStreamWaitValue64_v2(CUstream stream, CUdeviceptr address,
                                                   cuuint64_t value, unsigned int flags) {
  return single("cuStreamWaitValue64", stream, CU_STREAM_MEM_OP_WAIT_VALUE_64, address, value,
                flags, true);
}
GPUPOOL_TWIN(CUresult, cuStreamWaitValue64_v2, cuStreamWaitValue64_v2_ptsz,
             (CUstream stream, CUdeviceptr address, cuuint64_t value, unsigned int flags),
             (stream, address, value, flags))

GPUPOOL_DRIVER_API CUresult cuStreamWriteValue32(CUstream stream, CUdeviceptr address,
                                                 cuuint32_t value, unsigned int flags) {
  return single("cuStreamWriteValue32", stream, CU_STREAM_MEM_OP_WRITE_VALUE_32, address, value,
                flags, false);
}
GPUPOOL_TWIN(CUresult, cuStreamWriteValue32, cuStreamWriteValue32_ptsz,
             (CUstream stream, CUdeviceptr address, cuuint32_t value, unsigned int flags),
             (stream, address, value, flags))
GPUPOOL_DRIVER_API CUresult cuStreamWriteValue32_v2(CUstream stream, CUdeviceptr address,
                                                    cuuint32_t value, unsigned int flags) {
  return single("cuStreamWriteValue32", stream, CU_STREAM_MEM_OP_WRITE_VALUE_32, address, value,
                flags, true);
}
GPUPOOL_TWIN(CUresult, cuStreamWriteValue32_v2, cuStreamWriteValue32_v2_ptsz,
             (CUstream stream, CUdeviceptr address, cuuint32_t value, unsigned int flags),
             (stream, address, value, flags))

GPUPOOL_DRIVER_API CUresult cuStreamWriteValue64(CUstream stream, CUdeviceptr address,
                                                 cuuint64_t value, unsigned int flags) {
  return single("cuStreamWriteValue64", stream, CU_STREAM_MEM_OP_WRITE_VALUE_64, address, value,
                flags, false);
}
GPUPOOL_TWIN(CUresult, cuStreamWriteValue64, cuStreamWriteValue64_ptsz,
             (CUstream stream, CUdeviceptr address, cuuint64_t value, unsigned int flags),
             (stream, address, value, flags))
GPUPOOL_DRIVER_API CUresult cuStreamWriteValue64_v2(CUstream stream, CUdeviceptr address,
                                                    cuuint64_t value, unsigned int flags) {
  return single("cuStreamWriteValue64", stream, CU_STREAM_MEM_OP_WRITE_VALUE_64, address, value,
                flags, true);
}
GPUPOOL_TWIN(CUresult, cuStreamWriteValue64_v2, cuStreamWriteValue64_v2_ptsz,
             (CUstream stream, CUdeviceptr address, cuuint64_t value, unsigned int flags),
             (stream, address, value, flags))

GPUPOOL_DRIVER_API CUresult cuStreamBatchMemOp(CUstream stream, unsigned int count,
                                               CUstreamBatchMemOpParams* params,
                                               unsigned int flags) {
  return memOps("cuStreamBatchMemOp", stream, count, params, flags, false);
}
GPUPOOL_TWIN(CUresult, cuStreamBatchMemOp, cuStreamBatchMemOp_ptsz,
             (CUstream stream, unsigned int count, CUstreamBatchMemOpParams* params,
              unsigned int flags),
             (stream, count, params, flags))
GPUPOOL_DRIVER_API CUresult cuStreamBatchMemOp_v2(CUstream stream, unsigned int count,
                                                  CUstreamBatchMemOpParams* params,
                                                  unsigned int flags) {
  return memOps("cuStreamBatchMemOp", stream, count, params, flags, true);
}
GPUPOOL_TWIN(CUresult, cuStreamBatchMemOp_v2, cuStreamBatchMemOp_v2_ptsz,
             (CUstream stream, unsigned int count, CUstreamBatchMemOpParams* params,
              unsigned int flags),
             (stream, count, params, flags))
