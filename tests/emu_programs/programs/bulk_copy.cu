// Hopper bulk copies as libcu++ users write them. cuda::memcpy_async of a 16-byte aligned size on
// a block-scope cuda::barrier (cp.async.bulk completing an mbarrier transaction count on sm_90, an
// ordinary copy before it); on sm_90 also cuda::device::memcpy_async_tx with barrier_arrive_tx,
// the bulk store back to global memory through a bulk group and a bulk add-reduction
// (cuda::ptx::cp_async_bulk, cp_reduce_async_bulk). Other architectures copy with plain loads.
#include <cuda/barrier>
#include <cuda/ptx>
#include <vector>

#include "self_check.h"

constexpr int kThreads = 128;
constexpr int kInts = 1024;  // one block's tile: 4 KiB

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define HOPPER_BULK 1
#endif

__global__ void bulkRoundTrip(const int* in, int* out, int* sums) {
  using Barrier = cuda::barrier<cuda::thread_scope_block>;
  __shared__ alignas(16) int tile[kInts];
  __shared__ alignas(16) int second[kInts];
  __shared__ Barrier barrier;
  const int* src = in + blockIdx.x * kInts;
  if (threadIdx.x == 0) init(&barrier, blockDim.x);
  __syncthreads();
  if (threadIdx.x == 0)
    cuda::memcpy_async(tile, src, cuda::aligned_size_t<16>(sizeof(tile)), barrier);
  barrier.arrive_and_wait();
#ifdef HOPPER_BULK
  Barrier::arrival_token token;
  if (threadIdx.x == 0) {
    cuda::device::memcpy_async_tx(second, src, cuda::aligned_size_t<16>(sizeof(second)), barrier);
    token = cuda::device::barrier_arrive_tx(barrier, 1, sizeof(second));
  } else {
    token = barrier.arrive();
  }
  barrier.wait(cuda::std::move(token));
#else
  for (int i = threadIdx.x; i < kInts; i += blockDim.x) second[i] = src[i];
  __syncthreads();
#endif
  for (int i = threadIdx.x; i < kInts; i += blockDim.x)
    tile[i] = tile[i] * 2 + second[kInts - 1 - i];
  int* dst = out + blockIdx.x * kInts;
#ifdef HOPPER_BULK
  cuda::ptx::fence_proxy_async(cuda::ptx::space_shared);
  __syncthreads();
  if (threadIdx.x == 0) {
    cuda::ptx::cp_async_bulk(cuda::ptx::space_global, cuda::ptx::space_shared, dst, tile,
                             sizeof(tile));
    cuda::ptx::cp_reduce_async_bulk(cuda::ptx::space_global, cuda::ptx::space_shared,
                                    cuda::ptx::op_add, sums, tile, sizeof(tile));
    cuda::ptx::cp_async_bulk_commit_group();
    cuda::ptx::cp_async_bulk_wait_group_read(cuda::ptx::n32_t<0>());
  }
#else
  __syncthreads();
  for (int i = threadIdx.x; i < kInts; i += blockDim.x) {
    dst[i] = tile[i];
    atomicAdd(&sums[i], tile[i]);
  }
#endif
}

int main() {
  const int blocks = 3;
  std::vector<int> source(blocks * kInts);
  for (int i = 0; i < blocks * kInts; ++i) source[i] = (i * 29) % 1013 - 500;
  int *din, *dout, *dsums;
  CHECK_CUDA(cudaMalloc(&din, source.size() * sizeof(int)));
  CHECK_CUDA(cudaMalloc(&dout, source.size() * sizeof(int)));
  CHECK_CUDA(cudaMalloc(&dsums, kInts * sizeof(int)));
  CHECK_CUDA(cudaMemcpy(din, source.data(), source.size() * sizeof(int), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(dsums, 0, kInts * sizeof(int)));
  bulkRoundTrip<<<blocks, kThreads>>>(din, dout, dsums);
  CHECK_CUDA(cudaGetLastError());
  std::vector<int> out(source.size()), sums(kInts);
  CHECK_CUDA(cudaMemcpy(out.data(), dout, out.size() * sizeof(int), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(sums.data(), dsums, sums.size() * sizeof(int), cudaMemcpyDeviceToHost));
  for (int i = 0; i < kInts; ++i) {
    int sum = 0;
    for (int b = 0; b < blocks; ++b) {
      const int expected = source[b * kInts + i] * 2 + source[b * kInts + kInts - 1 - i];
      CHECK(out[b * kInts + i] == expected, "block %d element %d: %d, expected %d", b, i,
            out[b * kInts + i], expected);
      sum += expected;
    }
    CHECK(sums[i] == sum, "sum of element %d: %d, expected %d", i, sums[i], sum);
  }
  CHECK_CUDA(cudaFree(din));
  CHECK_CUDA(cudaFree(dout));
  CHECK_CUDA(cudaFree(dsums));
  std::printf("bulk copies ok\n");
  return pass();
}
