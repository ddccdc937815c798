// Work on different streams overlaps, measured with events as the CUDA samples that test overlap
// do (simpleStreams, concurrentKernels):
// 1. a host-to-device copy on one stream runs while a kernel spins for kKernelMs on another: the
//    copy's event completes first, both by event timing and by cudaEventQuery on the host;
// 2. two kernels that each spin for kKernelMs on two streams finish in well under twice that.
// Spinning on %globaltimer keeps the kernels' length in wall time, however busy the host is.
#include <cstring>

#include "concurrency.h"

namespace {

constexpr unsigned long long kKernelMs = 1000;
constexpr size_t kCopyBytes = 1u << 20;

float elapsedMs(cudaEvent_t from, cudaEvent_t to) {
  float ms = -1;
  CHECK_CUDA(cudaEventElapsedTime(&ms, from, to));
  return ms;
}

}  // namespace

int main() {
  cudaStream_t kernelStream, copyStream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&kernelStream, cudaStreamNonBlocking));
  CHECK_CUDA(cudaStreamCreateWithFlags(&copyStream, cudaStreamNonBlocking));
  cudaEvent_t start, kernelDone, copyDone;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&kernelDone));
  CHECK_CUDA(cudaEventCreate(&copyDone));
  unsigned char* host = nullptr;
  unsigned char* device = nullptr;
  CHECK_CUDA(cudaMallocHost(&host, kCopyBytes));
  CHECK_CUDA(cudaMalloc(&device, kCopyBytes));
  for (size_t i = 0; i < kCopyBytes; ++i) host[i] = static_cast<unsigned char>(i * 31 + 7);
  // Loads the kernel now: with lazy loading a GPU would load it at the timed launch.
  spinThenWrite<<<1, 1, 0, kernelStream>>>(0, nullptr, 0);
  CHECK_CUDA(cudaStreamSynchronize(kernelStream));

  // 1. The copy starts after the kernel's start event (its stream waits for it) and must end
  //    before the kernel does.
  CHECK_CUDA(cudaEventRecord(start, kernelStream));
  spinThenWrite<<<1, 1, 0, kernelStream>>>(msToNs(kKernelMs), nullptr, 0);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaEventRecord(kernelDone, kernelStream));
  CHECK_CUDA(cudaStreamWaitEvent(copyStream, start, 0));
  CHECK_CUDA(cudaMemcpyAsync(device, host, kCopyBytes, cudaMemcpyHostToDevice, copyStream));
  CHECK_CUDA(cudaEventRecord(copyDone, copyStream));
  CHECK_CUDA(cudaEventSynchronize(copyDone));
  const cudaError_t kernelState = cudaEventQuery(kernelDone);
  CHECK_CUDA(cudaEventSynchronize(kernelDone));
  const float copyMs = elapsedMs(start, copyDone);
  const float kernelMs = elapsedMs(start, kernelDone);
  std::printf(
      "from the kernel's start event: copy of %zu bytes done after %.2f ms, kernel done "
      "after %.2f ms\n",
      kCopyBytes, copyMs, kernelMs);
  CHECK(kernelMs >= 0.9f * kKernelMs, "the kernel took %.2f ms, expected about %llu", kernelMs,
        kKernelMs);
  CHECK(kernelState == cudaErrorNotReady,
        "cudaEventQuery of the kernel's event, once the copy's event completed, returned %s: "
        "the copy did not overlap the kernel",
        cudaGetErrorName(kernelState));
  CHECK(copyMs < 0.5f * kernelMs, "the copy ended %.2f ms after the start, the kernel %.2f ms",
        copyMs, kernelMs);
  std::memset(host, 0, kCopyBytes);
  CHECK_CUDA(cudaMemcpy(host, device, kCopyBytes, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < kCopyBytes; ++i) {
    CHECK(host[i] == static_cast<unsigned char>(i * 31 + 7), "byte %zu of the copy is wrong", i);
  }
  std::printf("copy overlapped the kernel\n");

  // 2. Two kernels on two streams, both after the same start event.
  cudaEvent_t otherDone;
  CHECK_CUDA(cudaEventCreate(&otherDone));
  CHECK_CUDA(cudaEventRecord(start, kernelStream));
  CHECK_CUDA(cudaStreamWaitEvent(copyStream, start, 0));
  spinThenWrite<<<1, 1, 0, kernelStream>>>(msToNs(kKernelMs), nullptr, 0);
  spinThenWrite<<<1, 1, 0, copyStream>>>(msToNs(kKernelMs), nullptr, 0);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaEventRecord(kernelDone, kernelStream));
  CHECK_CUDA(cudaEventRecord(otherDone, copyStream));
  CHECK_CUDA(cudaDeviceSynchronize());
  const float firstMs = elapsedMs(start, kernelDone);
  const float secondMs = elapsedMs(start, otherDone);
  std::printf("two %llu ms kernels on two streams: done after %.2f ms and %.2f ms\n", kKernelMs,
              firstMs, secondMs);
  CHECK(firstMs < 1.5f * kKernelMs && secondMs < 1.5f * kKernelMs,
        "kernels on two streams ran one after the other (%.2f ms and %.2f ms for two %llu ms "
        "kernels)",
        firstMs, secondMs, kKernelMs);
  std::printf("kernels on two streams overlapped\n");

  CHECK_CUDA(cudaEventDestroy(otherDone));
  CHECK_CUDA(cudaEventDestroy(start));
  CHECK_CUDA(cudaEventDestroy(kernelDone));
  CHECK_CUDA(cudaEventDestroy(copyDone));
  CHECK_CUDA(cudaStreamDestroy(kernelStream));
  CHECK_CUDA(cudaStreamDestroy(copyStream));
  CHECK_CUDA(cudaFreeHost(host));
  CHECK_CUDA(cudaFree(device));
  return pass();
}
