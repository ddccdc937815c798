// One client of the load test: `mixed_load ITERATIONS SEED` runs ITERATIONS rounds of mixed calls
// (allocations, copies both ways, memsets, kernel launches on two streams, events, frees) and
// checks every result on the host. Prints PASS and exits 0 when everything held; otherwise prints
// FAIL with the first difference and exits 1.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

__global__ void scaleAdd(const unsigned* in, unsigned* out, unsigned factor, unsigned add, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * factor + add;
}

#define CHECK_CUDA(call)                                                                   \
  do {                                                                                     \
    cudaError_t e = (call);                                                                \
    if (e != cudaSuccess) {                                                                \
      std::printf("FAIL: %s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(e)); \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

void fail(const char* what, int round, int index, unsigned got, unsigned want) {
  std::printf("FAIL: round %d: %s[%d] = %u, expected %u\n", round, what, index, got, want);
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = argc > 1 ? std::atoi(argv[1]) : 100;
  unsigned seed = argc > 2 ? static_cast<unsigned>(std::atoi(argv[2])) : 1;
  cudaStream_t streams[2];
  for (auto& s : streams) CHECK_CUDA(cudaStreamCreate(&s));
  cudaEvent_t done;
  CHECK_CUDA(cudaEventCreate(&done));
  long calls = 0;
  for (int round = 0; round < rounds; ++round) {
    int n = 64 + static_cast<int>((seed * 2654435761u + round * 40503u) % 4096);
    size_t bytes = n * sizeof(unsigned);
    std::vector<unsigned> host(n), back(n);
    for (int i = 0; i < n; ++i) host[i] = seed * 1000003u + round * 7919u + i;
    unsigned *in = nullptr, *out = nullptr;
    CHECK_CUDA(cudaMalloc(&in, bytes));
    CHECK_CUDA(cudaMalloc(&out, bytes));
    cudaStream_t s = streams[round % 2];
    CHECK_CUDA(cudaMemsetAsync(out, 0xab, bytes, s));
    CHECK_CUDA(cudaMemcpyAsync(in, host.data(), bytes, cudaMemcpyHostToDevice, s));
    unsigned factor = 3 + round % 5, add = seed + round;
    scaleAdd<<<(n + 127) / 128, 128, 0, s>>>(in, out, factor, add, n);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaEventRecord(done, s));
    CHECK_CUDA(cudaEventSynchronize(done));
    CHECK_CUDA(cudaMemcpy(back.data(), out, bytes, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; ++i) {
      if (back[i] != host[i] * factor + add) fail("out", round, i, back[i], host[i] * factor + add);
    }
    // A device-to-device copy and a partial read back.
    CHECK_CUDA(cudaMemcpy(in, out, bytes / 2, cudaMemcpyDeviceToDevice));
    CHECK_CUDA(cudaMemcpy(back.data(), in, bytes, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n / 2; ++i) {
      if (back[i] != host[i] * factor + add) fail("in", round, i, back[i], host[i] * factor + add);
    }
    CHECK_CUDA(cudaFree(in));
    CHECK_CUDA(cudaFree(out));
    calls += 12;
  }
  for (auto& s : streams) CHECK_CUDA(cudaStreamDestroy(s));
  CHECK_CUDA(cudaEventDestroy(done));
  std::printf("PASS rounds=%d calls=%ld\n", rounds, calls);
  return 0;
}
