// Streams and events: kernels and async copies on several streams at once, each stream's work
// ordered; an event recorded on one stream that another stream waits on (cross-stream
// dependency); cudaEventSynchronize / cudaEventQuery / cudaStreamQuery; elapsed time between
// events; and the legacy default stream ordering a dependent kernel.
#include <vector>

#include "self_check.h"

// Slow on purpose (a dependent chain per element) so that later work really has to wait.
__global__ void iterate(int* data, int n, int rounds, int add) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int v = data[i];
  for (int r = 0; r < rounds; ++r) v = (v * 3 + add) % 1000003;
  data[i] = v;
}

__global__ void combine(const int* a, const int* b, int* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] - b[i];
}

namespace {

int iterateHost(int v, int rounds, int add) {
  for (int r = 0; r < rounds; ++r)
    v = static_cast<int>((static_cast<long long>(v) * 3 + add) % 1000003);
  return v;
}

}  // namespace

int main() {
  const int kStreams = 4;
  const int n = 1024;
  const int rounds = 40;
  cudaStream_t streams[kStreams];
  int* host[kStreams];
  int* device[kStreams];
  for (int s = 0; s < kStreams; ++s) {
    CHECK_CUDA(cudaStreamCreateWithFlags(&streams[s], cudaStreamNonBlocking));
    CHECK_CUDA(cudaMallocHost(&host[s], n * sizeof(int)));
    CHECK_CUDA(cudaMalloc(&device[s], n * sizeof(int)));
    for (int i = 0; i < n; ++i) host[s][i] = i + s * 1000;
  }
  // Each stream: copy in, two dependent kernels, copy out. Stream order makes the result
  // iterate(iterate(x)) regardless of how the streams interleave.
  for (int s = 0; s < kStreams; ++s) {
    CHECK_CUDA(
        cudaMemcpyAsync(device[s], host[s], n * sizeof(int), cudaMemcpyHostToDevice, streams[s]));
    iterate<<<n / 128, 128, 0, streams[s]>>>(device[s], n, rounds, s + 1);
    iterate<<<n / 128, 128, 0, streams[s]>>>(device[s], n, rounds, 100 + s);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(
        cudaMemcpyAsync(host[s], device[s], n * sizeof(int), cudaMemcpyDeviceToHost, streams[s]));
  }
  for (int s = 0; s < kStreams; ++s) {
    CHECK_CUDA(cudaStreamSynchronize(streams[s]));
    CHECK_CUDA(cudaStreamQuery(streams[s]));
    for (int i = 0; i < n; ++i) {
      const int want = iterateHost(iterateHost(i + s * 1000, rounds, s + 1), rounds, 100 + s);
      CHECK(host[s][i] == want, "stream %d element %d = %d, expected %d", s, i, host[s][i], want);
    }
  }
  std::printf("%d concurrent streams ok\n", kStreams);

  // Cross-stream dependency: stream 1's combine must see stream 0's finished iterate.
  cudaEvent_t produced, start, stop;
  CHECK_CUDA(cudaEventCreate(&produced));
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  for (int i = 0; i < n; ++i) host[0][i] = i;
  CHECK_CUDA(cudaMemcpy(device[0], host[0], n * sizeof(int), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(device[1], host[0], n * sizeof(int), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaEventRecord(start, streams[0]));
  iterate<<<n / 128, 128, 0, streams[0]>>>(device[0], n, 400, 7);
  CHECK_CUDA(cudaEventRecord(produced, streams[0]));
  CHECK_CUDA(cudaStreamWaitEvent(streams[1], produced, 0));
  combine<<<n / 128, 128, 0, streams[1]>>>(device[0], device[1], device[2], n);
  CHECK_CUDA(cudaEventRecord(stop, streams[1]));
  CHECK_CUDA(cudaEventSynchronize(stop));
  CHECK_CUDA(cudaEventQuery(produced));  // stop came after produced, so produced is complete
  float ms = -1.0f;
  CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
  CHECK(ms >= 0.0f && ms < 60000.0f, "elapsed time %f ms is not plausible", ms);
  CHECK_CUDA(cudaMemcpy(host[2], device[2], n * sizeof(int), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) {
    const int want = iterateHost(i, 400, 7) - i;
    CHECK(host[2][i] == want, "cross-stream element %d = %d, expected %d", i, host[2][i], want);
  }
  std::printf("event dependency between streams ok (%.3f ms)\n", ms);

  // The legacy default stream waits for work in (blocking) streams created without flags.
  cudaStream_t blocking;
  CHECK_CUDA(cudaStreamCreate(&blocking));
  for (int i = 0; i < n; ++i) host[3][i] = 2 * i;
  CHECK_CUDA(cudaMemcpy(device[3], host[3], n * sizeof(int), cudaMemcpyHostToDevice));
  iterate<<<n / 128, 128, 0, blocking>>>(device[3], n, 300, 11);
  combine<<<n / 128, 128>>>(device[3], device[1], device[2], n);  // default stream
  CHECK_CUDA(cudaMemcpy(host[2], device[2], n * sizeof(int), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) {
    const int want = iterateHost(2 * i, 300, 11) - i;
    CHECK(host[2][i] == want, "default-stream element %d = %d, expected %d", i, host[2][i], want);
  }
  std::printf("legacy default stream ordering ok\n");

  CHECK_CUDA(cudaStreamDestroy(blocking));
  CHECK_CUDA(cudaEventDestroy(produced));
  CHECK_CUDA(cudaEventDestroy(start));
  CHECK_CUDA(cudaEventDestroy(stop));
  for (int s = 0; s < kStreams; ++s) {
    CHECK_CUDA(cudaStreamDestroy(streams[s]));
    CHECK_CUDA(cudaFreeHost(host[s]));
    CHECK_CUDA(cudaFree(device[s]));
  }
  return pass();
}
