// Checks of the order between two streams, for stream_ordering.cu and
// stream_ordering_per_thread.cu: a late writer then a reader that must wait for it, and a kernel
// waiting for a flag set by a copy on a stream that must not wait for the kernel.
#pragma once

#include "concurrency.h"

// The writers spin this long first, so that a reader that did not wait reads the old value.
constexpr unsigned long long kWriterDelayMs = 200;

// The flag for the waits, and the value and result of the late writer and its reader.
struct OrderBuffers : FlagBuffers {
  int* value = nullptr;
  int* result = nullptr;

  OrderBuffers() {
    CHECK_CUDA(cudaMalloc(&value, sizeof(int)));
    CHECK_CUDA(cudaMalloc(&result, sizeof(int)));
  }
  ~OrderBuffers() {
    CHECK_CUDA(cudaFree(value));
    CHECK_CUDA(cudaFree(result));
  }

  // Zeroes everything once the device is idle.
  void reset() const {
    FlagBuffers::reset();
    CHECK_CUDA(cudaMemset(value, 0, sizeof(int)));
    CHECK_CUDA(cudaMemset(result, 0, sizeof(int)));
    CHECK_CUDA(cudaDeviceSynchronize());
  }
  int read(const int* device) const {
    int host = 0;
    CHECK_CUDA(cudaMemcpy(&host, device, sizeof(host), cudaMemcpyDeviceToHost));
    return host;
  }
};

// A late write of `value` on `writer`, then value + 1 read on `reader`, which must wait for it.
inline void expectReaderWaits(const OrderBuffers& b, cudaStream_t writer, cudaStream_t reader,
                              int value, const char* what) {
  b.reset();
  spinThenWrite<<<1, 1, 0, writer>>>(msToNs(kWriterDelayMs), b.value, value);
  plusOne<<<1, 1, 0, reader>>>(b.value, b.result);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  const int got = b.read(b.result);
  CHECK(got == value + 1, "%s: the reader got %d, expected %d: it did not wait for the writer",
        what, got - 1, value);
  std::printf("%s ok\n", what);
}

// A kernel on `waiting` spins until a copy on `setting` sets its flag: `setting` must not wait
// for `waiting`.
inline void expectNoWait(const OrderBuffers& b, cudaStream_t waiting, cudaStream_t setting,
                         const char* what) {
  b.reset();
  spinUntilFlag<<<1, 1, 0, waiting>>>(b.flag, b.outcome, kFlagDeadlineNs);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(b.setAsync(setting));
  CHECK_CUDA(cudaStreamSynchronize(setting));
  CHECK_CUDA(cudaStreamSynchronize(waiting));
  const unsigned outcome = b.readOutcome();
  CHECK(outcome == kFlagSeen, "%s: the kernel %s: the copy waited for it", what,
        flagWaitOutcomeName(outcome));
  std::printf("%s ok\n", what);
}
