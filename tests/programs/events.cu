// Events: record/synchronize/query, elapsed times (non-negative, ordered, antisymmetric),
// cudaStreamWaitEvent ordering work across streams, and the documented errors of
// cudaEventElapsedTime (timing disabled, never recorded).
#include <cstring>
#include <vector>

#include "self_check.h"

namespace {

constexpr size_t kBytes = 64u << 20;

float elapsed(cudaEvent_t start, cudaEvent_t end) {
  float ms = -1.0f;
  CHECK_CUDA(cudaEventElapsedTime(&ms, start, end));
  return ms;
}

}  // namespace

int main() {
  std::vector<unsigned char> host(kBytes);
  for (size_t i = 0; i < kBytes; ++i) host[i] = static_cast<unsigned char>(i * 13 + (i >> 12));
  unsigned char* x = nullptr;
  unsigned char* y = nullptr;
  CHECK_CUDA(cudaMalloc(&x, kBytes));
  CHECK_CUDA(cudaMalloc(&y, kBytes));

  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));

  // A never-recorded event counts as complete.
  cudaEvent_t first, second, third;
  CHECK_CUDA(cudaEventCreate(&first));
  CHECK_CUDA(cudaEventCreate(&second));
  CHECK_CUDA(cudaEventCreate(&third));
  CHECK_CUDA(cudaEventQuery(first));
  float ms = 0;
  EXPECT_CUDA_ERROR(cudaEventElapsedTime(&ms, first, second), cudaErrorInvalidResourceHandle);
  CHECK(cudaGetLastError() == cudaErrorInvalidResourceHandle,
        "cudaGetLastError did not report the failed cudaEventElapsedTime");
  std::printf("unrecorded events ok\n");

  CHECK_CUDA(cudaEventRecord(first, stream));
  CHECK_CUDA(cudaMemcpyAsync(x, host.data(), kBytes, cudaMemcpyHostToDevice, stream));
  CHECK_CUDA(cudaEventRecord(second, stream));
  CHECK_CUDA(cudaMemcpyAsync(y, x, kBytes, cudaMemcpyDeviceToDevice, stream));
  CHECK_CUDA(cudaEventRecord(third, stream));
  CHECK_CUDA(cudaEventSynchronize(third));
  CHECK_CUDA(cudaEventQuery(third));
  CHECK_CUDA(cudaEventQuery(first));  // earlier in the same stream: complete too

  const float firstToSecond = elapsed(first, second);
  const float secondToThird = elapsed(second, third);
  const float firstToThird = elapsed(first, third);
  const float thirdToFirst = elapsed(third, first);
  std::printf("elapsed first->second=%.3f second->third=%.3f first->third=%.3f ms\n", firstToSecond,
              secondToThird, firstToThird);
  CHECK(firstToSecond >= 0 && secondToThird >= 0, "negative elapsed time %f / %f", firstToSecond,
        secondToThird);
  CHECK(firstToThird >= firstToSecond && firstToThird >= secondToThird,
        "elapsed times out of order: %f < %f or %f", firstToThird, firstToSecond, secondToThird);
  // Event timestamps have ~0.5 us resolution; allow a little slack on the sum.
  CHECK(firstToThird <= firstToSecond + secondToThird + 0.01f, "%f > %f + %f", firstToThird,
        firstToSecond, secondToThird);
  CHECK(thirdToFirst <= 0.001f, "reversed elapsed time %f is positive", thirdToFirst);
  CHECK(firstToSecond > 0, "a 64 MiB copy took no time (%f ms)", firstToSecond);

  // Timing disabled: usable for ordering, not for elapsed time.
  cudaEvent_t untimed;
  CHECK_CUDA(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming));
  CHECK_CUDA(cudaEventRecord(untimed, stream));
  CHECK_CUDA(cudaEventSynchronize(untimed));
  EXPECT_CUDA_ERROR(cudaEventElapsedTime(&ms, first, untimed), cudaErrorInvalidResourceHandle);
  EXPECT_CUDA_ERROR(cudaEventElapsedTime(&ms, untimed, third), cudaErrorInvalidResourceHandle);
  CHECK(cudaGetLastError() == cudaErrorInvalidResourceHandle, "last error not recorded");
  CHECK(cudaGetLastError() == cudaSuccess, "cudaGetLastError did not reset");
  std::printf("cudaEventDisableTiming ok\n");

  // Cross-stream ordering: the consumer waits for the producer's copy before reading `x`.
  cudaStream_t producer, consumer;
  CHECK_CUDA(cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking));
  CHECK_CUDA(cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking));
  CHECK_CUDA(cudaMemset(x, 0, kBytes));
  CHECK_CUDA(cudaMemset(y, 0xFF, kBytes));
  CHECK_CUDA(cudaDeviceSynchronize());
  for (size_t i = 0; i < kBytes; ++i) host[i] = static_cast<unsigned char>(i * 29 + 3);
  cudaEvent_t produced;
  CHECK_CUDA(cudaEventCreateWithFlags(&produced, cudaEventDisableTiming));
  CHECK_CUDA(cudaMemcpyAsync(x, host.data(), kBytes, cudaMemcpyHostToDevice, producer));
  CHECK_CUDA(cudaEventRecord(produced, producer));
  CHECK_CUDA(cudaStreamWaitEvent(consumer, produced, 0));
  CHECK_CUDA(cudaMemcpyAsync(y, x, kBytes, cudaMemcpyDeviceToDevice, consumer));
  std::vector<unsigned char> result(kBytes, 0);
  CHECK_CUDA(cudaMemcpyAsync(result.data(), y, kBytes, cudaMemcpyDeviceToHost, consumer));
  CHECK_CUDA(cudaStreamSynchronize(consumer));
  CHECK_CUDA(cudaEventQuery(produced));  // the consumer waited for it, so it has completed
  for (size_t i = 0; i < kBytes; ++i) {
    CHECK(result[i] == host[i], "cudaStreamWaitEvent: byte %zu is 0x%02x, expected 0x%02x", i,
          result[i], host[i]);
  }
  std::printf("cudaStreamWaitEvent ordering ok\n");

  for (cudaEvent_t event : {first, second, third, untimed, produced}) {
    CHECK_CUDA(cudaEventDestroy(event));
  }
  for (cudaStream_t s : {stream, producer, consumer}) CHECK_CUDA(cudaStreamDestroy(s));
  CHECK_CUDA(cudaFree(x));
  CHECK_CUDA(cudaFree(y));
  return pass();
}
