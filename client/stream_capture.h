// Stream capture (cuStreamBeginCapture .. cuStreamEndCapture), on the client: while a stream
// captures, the calls that can be captured (kernel launches, memsets, device-to-device copies,
// event records and waits, host functions, stream-ordered allocations and frees, stream memory
// operations) become graph nodes instead of being sent, and every other call that names the
// stream fails as a real driver fails it, invalidating the capture.
//
// The hooks below are called by the files that own those calls (launch_api.cc, copy_api.cc,
// stream_event_api.cc, host_func_api.cc, driver_state.cc, stream_mem_ops_api.cc); each capture
// hook returns true when it took the call (its result in *result), false when the stream does not
// capture and the call goes on as usual.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <vector>

#include "driver_state.h"

namespace gpupool::client {

// While one lives on a thread, resolveStream lets a capturing stream through: its caller turns the
// call into a node.
class CaptureScope {
 public:
  CaptureScope();
  ~CaptureScope();
  CaptureScope(const CaptureScope&) = delete;
  CaptureScope& operator=(const CaptureScope&) = delete;

 private:
  bool outer_;
};

// For resolveStream: a call on a capturing stream outside a CaptureScope cannot be captured
// (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, capture invalidated); the legacy stream while a blocking
// stream of `ctx` captures would be an implicit dependency (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT).
CUresult capturingStreamUse(StreamObject* stream, const char* what = nullptr);
CUresult legacyStreamUse(ContextObject* ctx);
// A call on the whole context (cuCtxRecordEvent, cuCtxWaitEvent): refused with
// CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, invalidating the captures, while a stream of `ctx`
// captures or `event` (when given) is part of a capture.
CUresult contextCaptureUse(ContextObject* ctx, EventObject* event, const char* what);
// A potentially unsafe call (a synchronous copy or memset, cuCtxSynchronize): refused with
// CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, invalidating the captures that forbid it, when the
// calling thread's capture mode says so (see cuThreadExchangeStreamCaptureMode).
CUresult checkUnsafeDuringCapture(const char* what);

// A launch on a capturing stream becomes a kernel node, with the COOPERATIVE,
// CLUSTER_DIMENSION and PREFERRED_CLUSTER_DIMENSION attributes a cooperative or clustered launch
// asks for (a cluster that does not divide the grid: CUDA_ERROR_INVALID_CLUSTER_SIZE).
bool captureKernel(CUstream stream, FunctionObject* f, const unsigned grid[3],
                   const unsigned block[3], unsigned sharedBytes,
                   const std::vector<uint8_t>& params, bool cooperative,
                   const CUlaunchAttributeValue* cluster, const CUlaunchAttributeValue* preferred,
                   CUresult* result);
bool captureMemset(CUstream stream, CUdeviceptr dst, uint32_t value, unsigned elementSize,
                   size_t width, size_t height, size_t pitch, CUresult* result);
bool captureCopy(CUstream stream, CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUresult* result);
// cuStreamBatchMemOp, cuStreamWaitValue* and cuStreamWriteValue*: a batch memory operation node
// holding `ops` (already checked for the stream's context).
bool captureMemOps(CUstream stream, const std::vector<CUstreamBatchMemOpParams>& ops,
                   CUresult* result);
bool captureEventRecord(CUstream stream, EventObject* event, unsigned flags, CUresult* result);
bool captureEventWait(CUstream stream, EventObject* event, unsigned flags, CUresult* result);
bool captureHostFunction(CUstream stream, CUhostFn fn, void* data, CUresult* result);
// cuMemAllocAsync / cuMemAllocFromPoolAsync and cuMemFreeAsync: a memory alloc node (its address
// in *dptr) and a memory free node (client/graph_memory.h).
bool captureMemAlloc(CUstream stream, size_t bytes, CUdeviceptr* dptr, CUresult* result);
bool captureMemFree(CUstream stream, CUdeviceptr dptr, CUresult* result);
// An event recorded outside capture no longer stands for captured work.
void eventRecordedOutsideCapture(EventObject* event);

}  // namespace gpupool::client
