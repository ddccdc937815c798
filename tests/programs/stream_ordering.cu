// The ordering CUDA promises between streams, with the legacy default stream (nvcc's default):
// 1. work on a blocking stream waits for earlier legacy-stream work, and legacy-stream work waits
//    for earlier blocking-stream work (a late writer, then a reader on the other stream);
// 2. a non-blocking stream does not wait for the legacy stream, nor the legacy stream for it (a
//    kernel spins until a copy on the other stream sets its flag);
// 3. cudaStreamWaitEvent orders a reader after a writer on another stream; cudaEventQuery says
//    cudaErrorNotReady before the writer is done and cudaSuccess after;
// 4. a host function (cudaLaunchHostFunc) runs after the work before it on its stream, and the
//    work after it waits for it;
// 5. cudaStreamPerThread (the per-thread default stream by its handle) orders with the legacy
//    stream both ways but does not wait for other blocking streams.
#include "stream_order_checks.h"

namespace {

struct HostFunctionData {
  const int* copiedOut;  // pinned: what the stream copied out before the host function
  int* copiedIn;         // pinned: what the stream copies in after it
  int seen;
};

void CUDART_CB doubleIt(void* data) {
  auto* d = static_cast<HostFunctionData*>(data);
  d->seen = *d->copiedOut;
  *d->copiedIn = 2 * d->seen;
}

}  // namespace

int main() {
  const OrderBuffers b;
  cudaStream_t blocking, nonBlocking, other;
  CHECK_CUDA(cudaStreamCreate(&blocking));
  CHECK_CUDA(cudaStreamCreateWithFlags(&nonBlocking, cudaStreamNonBlocking));
  CHECK_CUDA(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));

  // 1.
  expectReaderWaits(b, 0, blocking, 42, "a blocking stream waits for the legacy stream");
  expectReaderWaits(b, blocking, 0, 7, "the legacy stream waits for a blocking stream");
  expectReaderWaits(b, cudaStreamLegacy, blocking, 9,
                    "a blocking stream waits for cudaStreamLegacy");

  // 2.
  expectNoWait(b, 0, nonBlocking, "a non-blocking stream does not wait for the legacy stream");
  expectNoWait(b, nonBlocking, 0, "the legacy stream does not wait for a non-blocking stream");

  // 3.
  b.reset();
  cudaEvent_t written, neverRecorded;
  CHECK_CUDA(cudaEventCreateWithFlags(&written, cudaEventDisableTiming));
  CHECK_CUDA(cudaEventCreate(&neverRecorded));
  CHECK_CUDA(cudaEventQuery(neverRecorded));  // an event never recorded counts as complete
  spinThenWrite<<<1, 1, 0, nonBlocking>>>(msToNs(kWriterDelayMs), b.value, 5);
  CHECK_CUDA(cudaEventRecord(written, nonBlocking));
  const cudaError_t before = cudaEventQuery(written);
  CHECK_CUDA(cudaStreamWaitEvent(other, written, 0));
  plusOne<<<1, 1, 0, other>>>(b.value, b.result);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaStreamSynchronize(other));
  const cudaError_t after = cudaEventQuery(written);
  CHECK(before == cudaErrorNotReady,
        "cudaEventQuery right after recording behind a %llu ms kernel returned %s", kWriterDelayMs,
        cudaGetErrorName(before));
  CHECK(cudaGetLastError() == cudaSuccess, "cudaErrorNotReady was recorded as the last error");
  CHECK(after == cudaSuccess,
        "cudaEventQuery once a stream that waited for the event is done returned %s",
        cudaGetErrorName(after));
  const int waited = b.read(b.result);
  CHECK(waited == 6, "cudaStreamWaitEvent: the reader got %d, expected 5", waited - 1);
  std::printf("cudaStreamWaitEvent orders another stream; cudaEventQuery before and after ok\n");

  // 4. Stream order: writer, copy out, host function (reads that, writes twice it), copy in.
  b.reset();
  int* pinned = nullptr;
  CHECK_CUDA(cudaMallocHost(&pinned, 2 * sizeof(int)));
  pinned[0] = pinned[1] = 0;
  HostFunctionData data{&pinned[0], &pinned[1], -1};
  spinThenWrite<<<1, 1, 0, nonBlocking>>>(msToNs(kWriterDelayMs), b.value, 11);
  CHECK_CUDA(
      cudaMemcpyAsync(&pinned[0], b.value, sizeof(int), cudaMemcpyDeviceToHost, nonBlocking));
  CHECK_CUDA(cudaLaunchHostFunc(nonBlocking, doubleIt, &data));
  CHECK_CUDA(
      cudaMemcpyAsync(b.result, &pinned[1], sizeof(int), cudaMemcpyHostToDevice, nonBlocking));
  CHECK_CUDA(cudaStreamSynchronize(nonBlocking));
  CHECK(data.seen == 11, "the host function saw %d, expected 11: it ran before the work before it",
        data.seen);
  const int doubled = b.read(b.result);
  CHECK(doubled == 22, "the copy after the host function brought %d, expected 22: it did not wait",
        doubled);
  std::printf("cudaLaunchHostFunc in stream order ok\n");

  // 5. The per-thread default stream, by its handle in a legacy-stream program: it waits for the
  //    legacy stream and the legacy stream for it, but not for other blocking streams.
  expectReaderWaits(b, cudaStreamPerThread, 0, 13,
                    "the legacy stream waits for cudaStreamPerThread");
  expectReaderWaits(b, 0, cudaStreamPerThread, 17,
                    "cudaStreamPerThread waits for the legacy stream");
  expectNoWait(b, blocking, cudaStreamPerThread,
               "cudaStreamPerThread does not wait for a blocking stream");

  CHECK_CUDA(cudaFreeHost(pinned));
  CHECK_CUDA(cudaEventDestroy(written));
  CHECK_CUDA(cudaEventDestroy(neverRecorded));
  CHECK_CUDA(cudaStreamDestroy(blocking));
  CHECK_CUDA(cudaStreamDestroy(nonBlocking));
  CHECK_CUDA(cudaStreamDestroy(other));
  return pass();
}
