// __syncthreads_count / __syncthreads_and / __syncthreads_or (bar.red.popc / .and / .or): a
// block-wide barrier that also reduces a predicate, with all-true, all-false and mixed
// predicates, in a block of three warps.
#include <vector>

#include "self_check.h"

constexpr int kThreads = 96;  // three warps

struct Results {
  int count, all, any, allTrue, anyFalse, noneCount;
};

__global__ void reduceKernel(const int* in, Results* out) {
  const int value = in[blockIdx.x * kThreads + threadIdx.x];
  const int count = __syncthreads_count(value > 0);
  const int all = __syncthreads_and(value > 0);
  const int any = __syncthreads_or(value > 0);
  const int allTrue = __syncthreads_and(1);
  const int anyFalse = __syncthreads_or(0);
  const int noneCount = __syncthreads_count(value > 1000000);
  if (threadIdx.x == 5) out[blockIdx.x] = {count, all, any, allTrue, anyFalse, noneCount};
}

int main() {
  const int blocks = 3;
  std::vector<int> in(blocks * kThreads);
  for (int i = 0; i < kThreads; ++i) {
    in[i] = i % 3 == 0 ? 1 : -1;  // block 0: a third positive
    in[kThreads + i] = 1 + i;     // block 1: all positive
    in[2 * kThreads + i] = -i;    // block 2: none positive
  }
  int* din;
  Results* dout;
  CHECK_CUDA(cudaMalloc(&din, in.size() * sizeof(int)));
  CHECK_CUDA(cudaMalloc(&dout, blocks * sizeof(Results)));
  CHECK_CUDA(cudaMemcpy(din, in.data(), in.size() * sizeof(int), cudaMemcpyHostToDevice));
  reduceKernel<<<blocks, kThreads>>>(din, dout);
  CHECK_CUDA(cudaGetLastError());
  std::vector<Results> out(blocks);
  CHECK_CUDA(cudaMemcpy(out.data(), dout, blocks * sizeof(Results), cudaMemcpyDeviceToHost));
  const Results expected[blocks] = {
      {kThreads / 3, 0, 1, 1, 0, 0}, {kThreads, 1, 1, 1, 0, 0}, {0, 0, 0, 1, 0, 0}};
  for (int b = 0; b < blocks; ++b) {
    const Results& r = out[b];
    const Results& e = expected[b];
    CHECK(r.count == e.count && (r.all != 0) == (e.all != 0) && (r.any != 0) == (e.any != 0) &&
              (r.allTrue != 0) && r.anyFalse == 0 && r.noneCount == 0,
          "block %d: count %d and %d or %d and(1) %d or(0) %d count(0) %d; expected count %d "
          "and %d or %d",
          b, r.count, r.all, r.any, r.allTrue, r.anyFalse, r.noneCount, e.count, e.all, e.any);
  }
  CHECK_CUDA(cudaFree(din));
  CHECK_CUDA(cudaFree(dout));
  return pass();
}
