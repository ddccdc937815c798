// Sixteen host threads at once, each with its own non-blocking stream, as a server with a thread
// per request does: each allocates device and pinned memory, copies in, runs kernels, copies out,
// records and queries events (one stream waiting on an event of its own), synchronizes, and checks
// its results. All threads share the device's primary context.
#include <thread>
#include <vector>

#include "concurrency.h"

namespace {

constexpr int kThreads = 16;
constexpr int kRoundsPerThread = 3;
constexpr int kElements = 1000;  // not a multiple of the block size
constexpr size_t kBytes = kElements * sizeof(int);

__global__ void scaleAndAdd(int* data, int n, int scale, int add) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] = data[i] * scale + add;
}

int expected(int thread, int round, int i) {
  const int input = i + 1000 * thread + 7 * round;
  return (input * 2 + thread) * 3 + round;
}

std::string work(int thread) {
  cudaStream_t stream;
  RETURN_IF_CUDA_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaEvent_t start, uploaded, done;
  RETURN_IF_CUDA_ERROR(cudaEventCreate(&start));
  RETURN_IF_CUDA_ERROR(cudaEventCreateWithFlags(&uploaded, cudaEventDisableTiming));
  RETURN_IF_CUDA_ERROR(cudaEventCreate(&done));
  int* host = nullptr;
  RETURN_IF_CUDA_ERROR(cudaMallocHost(&host, kBytes));
  for (int round = 0; round < kRoundsPerThread; ++round) {
    int* device = nullptr;
    RETURN_IF_CUDA_ERROR(cudaMalloc(&device, kBytes));
    for (int i = 0; i < kElements; ++i) host[i] = i + 1000 * thread + 7 * round;
    RETURN_IF_CUDA_ERROR(cudaEventRecord(start, stream));
    RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(device, host, kBytes, cudaMemcpyHostToDevice, stream));
    RETURN_IF_CUDA_ERROR(cudaEventRecord(uploaded, stream));
    RETURN_IF_CUDA_ERROR(cudaStreamWaitEvent(stream, uploaded, 0));
    scaleAndAdd<<<(kElements + 127) / 128, 128, 0, stream>>>(device, kElements, 2, thread);
    scaleAndAdd<<<(kElements + 127) / 128, 128, 0, stream>>>(device, kElements, 3, round);
    RETURN_IF_CUDA_ERROR(cudaGetLastError());
    RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(host, device, kBytes, cudaMemcpyDeviceToHost, stream));
    RETURN_IF_CUDA_ERROR(cudaEventRecord(done, stream));
    const cudaError_t query = cudaEventQuery(done);
    if (query != cudaSuccess && query != cudaErrorNotReady) {
      return std::string("cudaEventQuery returned ") + cudaGetErrorName(query);
    }
    RETURN_IF_CUDA_ERROR(cudaEventSynchronize(done));
    RETURN_IF_CUDA_ERROR(cudaEventQuery(done));
    RETURN_IF_CUDA_ERROR(cudaEventQuery(uploaded));
    float ms = -1;
    RETURN_IF_CUDA_ERROR(cudaEventElapsedTime(&ms, start, done));
    if (!(ms >= 0 && ms < 60000)) return "elapsed time " + std::to_string(ms) + " ms";
    RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream));
    RETURN_IF_CUDA_ERROR(cudaStreamQuery(stream));
    for (int i = 0; i < kElements; ++i) {
      if (host[i] != expected(thread, round, i)) {
        return "round " + std::to_string(round) + " element " + std::to_string(i) + " = " +
               std::to_string(host[i]) + ", expected " + std::to_string(expected(thread, round, i));
      }
    }
    RETURN_IF_CUDA_ERROR(cudaFree(device));
  }
  RETURN_IF_CUDA_ERROR(cudaFreeHost(host));
  RETURN_IF_CUDA_ERROR(cudaEventDestroy(start));
  RETURN_IF_CUDA_ERROR(cudaEventDestroy(uploaded));
  RETURN_IF_CUDA_ERROR(cudaEventDestroy(done));
  RETURN_IF_CUDA_ERROR(cudaStreamDestroy(stream));
  return "";
}

}  // namespace

int main() {
  CHECK_CUDA(cudaFree(nullptr));  // the runtime is initialized before the threads race
  const Stopwatch clock;
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back([&errors, t] { errors[t] = work(t); });
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) {
    CHECK(errors[t].empty(), "host thread %d: %s", t, errors[t].c_str());
  }
  std::printf(
      "%d host threads x %d rounds (alloc, copies, 2 kernels, events, synchronize) ok in "
      "%.1f ms\n",
      kThreads, kRoundsPerThread, clock.ms());
  return pass();
}
