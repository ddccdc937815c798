// cuCtxRecordEvent and cuCtxWaitEvent: an event recorded for a context stands for the work of all
// of its streams at the time (a stream held by a wait keeps it from completing), and a context
// made to wait for an event holds all of its later work behind it, on the streams it had and on
// those made afterwards. Calls on a context whose stream captures are refused and invalidate the
// capture; an event of another context cannot be recorded for this one.
#include <cuda.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "driver_check.h"

namespace {

// Busy for a while, then sets *done: work ordered after it sees 1.
__global__ void slowThenSet(unsigned* done, int iterations) {
  unsigned v = 1;
  for (int i = 0; i < iterations; ++i) v = v * 3u + 1u;
  *reinterpret_cast<volatile unsigned*>(done + 1) = v;
  *reinterpret_cast<volatile unsigned*>(done) = 1;
}

unsigned read32(CUdeviceptr p) {
  unsigned v = 0;
  CHECK_CU(cuMemcpyDtoH(&v, p, sizeof v));
  return v;
}

}  // namespace

int main() {
  CHECK_CUDA(cudaSetDevice(0));
  CHECK_CUDA(cudaFree(nullptr));  // makes the primary context current
  CUcontext ctx;
  CHECK_CU(cuCtxGetCurrent(&ctx));
  CUdevice device;
  CHECK_CU(cuCtxGetDevice(&device));

  CUstream a, b;
  CHECK_CU(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
  CHECK_CU(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  CUdeviceptr words;  // [0] flag, [4..5] kernel output, [8] [9] [10] copies
  CHECK_CU(cuMemAlloc(&words, 64 * sizeof(unsigned)));
  CHECK_CU(cuMemsetD32(words, 0, 64));
  const CUdeviceptr flag = words, done = words + 16, copyA = words + 32, copyC = words + 36,
                    copyLegacy = words + 40;
  CUevent event;
  CHECK_CU(cuEventCreate(&event, CU_EVENT_DISABLE_TIMING));

  // A context event does not complete while one of the context's streams is held.
  CHECK_CU(cuStreamWaitValue32(a, flag, 1, CU_STREAM_WAIT_VALUE_EQ));
  CHECK_CU(cuCtxRecordEvent(ctx, event));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(cuEventQuery(event) == CUDA_ERROR_NOT_READY,
        "the context event completed while a stream of the context was held");
  CHECK_CU(cuStreamWriteValue32(b, flag, 1, CU_STREAM_WRITE_VALUE_DEFAULT));
  CHECK_CU(cuEventSynchronize(event));
  CHECK_CU(cuStreamSynchronize(a));

  // The context event covers the legacy stream's work too.
  slowThenSet<<<1, 1>>>(reinterpret_cast<unsigned*>(done), 200000);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CU(cuCtxRecordEvent(ctx, event));
  CHECK_CU(cuStreamWaitEvent(b, event, 0));
  CHECK_CU(cuMemcpyDtoDAsync(copyA, done, 4, b));
  CHECK_CU(cuStreamSynchronize(b));
  CHECK(read32(copyA) == 1, "work after the context event ran before the legacy stream's kernel");

  // A context wait holds the streams the context has, the legacy stream and streams made later.
  CHECK_CU(cuMemsetD32(words, 0, 64));
  CHECK_CU(cuCtxSynchronize());
  slowThenSet<<<1, 1, 0, reinterpret_cast<cudaStream_t>(b)>>>(reinterpret_cast<unsigned*>(done),
                                                              200000);
  CHECK_CUDA(cudaGetLastError());
  CUevent afterKernel;
  CHECK_CU(cuEventCreate(&afterKernel, CU_EVENT_DISABLE_TIMING));
  CHECK_CU(cuEventRecord(afterKernel, b));
  CHECK_CU(cuCtxWaitEvent(ctx, afterKernel));
  CUstream c;
  CHECK_CU(cuStreamCreate(&c, CU_STREAM_NON_BLOCKING));
  CHECK_CU(cuMemcpyDtoDAsync(copyA, done, 4, a));
  CHECK_CU(cuMemcpyDtoDAsync(copyC, done, 4, c));
  CHECK_CU(cuMemcpyDtoDAsync(copyLegacy, done, 4, CU_STREAM_LEGACY));
  CHECK_CU(cuCtxSynchronize());
  CHECK(read32(copyA) == 1,
        "an existing stream's work ran before the event it was made to wait for");
  CHECK(read32(copyC) == 1, "a new stream's work ran before the event the context waits for");
  CHECK(read32(copyLegacy) == 1, "the legacy stream's work ran before the event");

  // An event of another context cannot be recorded for this one.
  CUcontext other;
  CHECK_CU(cuCtxCreate(&other, nullptr, 0, device));
  CUevent foreign;
  CHECK_CU(cuEventCreate(&foreign, CU_EVENT_DISABLE_TIMING));
  CHECK_CU(cuCtxPopCurrent(nullptr));
  expectError(cuCtxRecordEvent(ctx, foreign), CUDA_ERROR_INVALID_HANDLE,
              "cuCtxRecordEvent with another context's event");
  // Waiting for one is allowed; it is done.
  CHECK_CU(cuCtxPushCurrent(other));
  CUstream otherStream;
  CHECK_CU(cuStreamCreate(&otherStream, CU_STREAM_NON_BLOCKING));
  CHECK_CU(cuEventRecord(foreign, otherStream));
  CHECK_CU(cuCtxPopCurrent(nullptr));
  CHECK_CU(cuCtxWaitEvent(ctx, foreign));
  CHECK_CU(cuStreamDestroy(otherStream));
  CHECK_CU(cuEventDestroy(foreign));
  CHECK_CU(cuCtxDestroy(other));

  // While a stream of the context captures, both calls are refused and invalidate the capture.
  CHECK_CU(cuStreamBeginCapture(c, CU_STREAM_CAPTURE_MODE_RELAXED));
  expectError(cuCtxRecordEvent(ctx, event), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
              "cuCtxRecordEvent during capture");
  CUgraph graph = nullptr;
  expectError(cuStreamEndCapture(c, &graph), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
              "end of the invalidated capture");
  CHECK_CU(cuStreamBeginCapture(c, CU_STREAM_CAPTURE_MODE_RELAXED));
  expectError(cuCtxWaitEvent(ctx, event), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
              "cuCtxWaitEvent during capture");
  expectError(cuStreamEndCapture(c, &graph), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
              "end of the invalidated capture");

  CHECK_CU(cuEventDestroy(event));
  CHECK_CU(cuEventDestroy(afterKernel));
  CHECK_CU(cuStreamDestroy(a));
  CHECK_CU(cuStreamDestroy(b));
  CHECK_CU(cuStreamDestroy(c));
  CHECK_CU(cuMemFree(words));
  std::printf("context_events_driver: ok\n");
  return pass();
}
