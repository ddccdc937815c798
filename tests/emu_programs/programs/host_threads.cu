// Several host threads, each with its own stream, buffers and kernel launches, running at the
// same time on one device (one context, as the runtime shares the primary context across threads).
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "self_check.h"

__global__ void affine(int* data, int n, int scale, int offset) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] = data[i] * scale + offset;
}

int main() {
  const int kThreads = 4;
  const int kIterations = 5;
  const int n = 2000;
  std::atomic<int> failures{0};
  std::vector<std::string> errors(kThreads);
  auto work = [&](int t) {
    auto fail = [&](const std::string& what) {
      errors[t] = what;
      ++failures;
    };
    cudaStream_t stream;
    if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
      return fail("cudaStreamCreate");
    }
    std::vector<int> host(n);
    for (int i = 0; i < n; ++i) host[i] = i + t;
    int* device = nullptr;
    if (cudaMalloc(&device, n * sizeof(int)) != cudaSuccess) return fail("cudaMalloc");
    if (cudaMemcpyAsync(device, host.data(), n * sizeof(int), cudaMemcpyHostToDevice, stream) !=
        cudaSuccess) {
      return fail("copy in");
    }
    for (int k = 0; k < kIterations; ++k) {
      affine<<<(n + 255) / 256, 256, 0, stream>>>(device, n, 2, t * 10 + k);
      if (cudaGetLastError() != cudaSuccess) return fail("launch");
    }
    if (cudaMemcpyAsync(host.data(), device, n * sizeof(int), cudaMemcpyDeviceToHost, stream) !=
            cudaSuccess ||
        cudaStreamSynchronize(stream) != cudaSuccess) {
      return fail("copy out");
    }
    for (int i = 0; i < n; ++i) {
      int want = i + t;
      for (int k = 0; k < kIterations; ++k) want = want * 2 + t * 10 + k;
      if (host[i] != want) {
        return fail("element " + std::to_string(i) + " = " + std::to_string(host[i]) +
                    ", expected " + std::to_string(want));
      }
    }
    cudaFree(device);
    cudaStreamDestroy(stream);
  };
  // Initialize the runtime first so that the threads race on launches, not on initialization.
  CHECK_CUDA(cudaFree(nullptr));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(work, t);
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) {
    CHECK(errors[t].empty(), "host thread %d: %s", t, errors[t].c_str());
  }
  CHECK(failures == 0, "%d threads failed", failures.load());
  std::printf("%d host threads x %d launches ok\n", kThreads, kIterations);
  return pass();
}
