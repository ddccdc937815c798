// libcu++ and the toolkit's number headers as users write them: a block-scope cuda::barrier
// (mbarrier on sm_90) over two phases, cuda::memcpy_async completing on a barrier and
// cooperative groups' memcpy_async / wait (cp.async on sm_80+), cuda::atomic_ref at device scope
// (fetch_add, fetch_max, compare_exchange, float add), and fp8 conversions (cuda_fp8.h: e4m3 and
// e5m2 pairs to and from float) checked bit for bit against the same header's host conversion.
#include <cooperative_groups.h>
#include <cooperative_groups/memcpy_async.h>
#include <cuda_fp8.h>

#include <cmath>
#include <cuda/atomic>
#include <cuda/barrier>
#include <vector>

#include "self_check.h"

constexpr int kThreads = 128;

__global__ void barrierPhases(int* out) {
  using Barrier = cuda::barrier<cuda::thread_scope_block>;
  __shared__ Barrier barrier;
  __shared__ int slots[kThreads];
  if (threadIdx.x == 0) init(&barrier, blockDim.x);
  __syncthreads();
  const int t = threadIdx.x;
  slots[t] = t * 3 + blockIdx.x;
  barrier.arrive_and_wait();
  const int first = slots[(t + 1) % kThreads];
  barrier.arrive_and_wait();  // everyone has read before anyone writes again
  slots[t] = t * 7;
  Barrier::arrival_token token = barrier.arrive();
  barrier.wait(cuda::std::move(token));
  out[blockIdx.x * kThreads + t] = first + slots[(t + 5) % kThreads];
}

// Each block copies its slice of `in` into shared memory twice (libcu++ on a barrier, then
// cooperative groups), and writes it back reversed.
__global__ void asyncCopies(const int* in, int* out) {
  __shared__ int first[kThreads], second[kThreads];
  __shared__ cuda::barrier<cuda::thread_scope_block> barrier;
  auto block = cooperative_groups::this_thread_block();
  if (threadIdx.x == 0) init(&barrier, blockDim.x);
  __syncthreads();
  const int* slice = in + blockIdx.x * kThreads;
  cuda::memcpy_async(block, first, slice, sizeof(int) * kThreads, barrier);
  barrier.arrive_and_wait();
  cooperative_groups::memcpy_async(block, second, slice, sizeof(int) * kThreads);
  cooperative_groups::wait(block);
  const int t = threadIdx.x;
  out[blockIdx.x * kThreads + t] = first[kThreads - 1 - t] * 1000 + second[t];
}

__global__ void atomics(int* counter, int* maximum, int* claimed, float* sum) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  cuda::atomic_ref<int, cuda::thread_scope_device> c(*counter), m(*maximum), owner(*claimed);
  c.fetch_add(2, cuda::std::memory_order_relaxed);
  m.fetch_max((i * 37) % 1001);
  int expected = -1;
  owner.compare_exchange_strong(expected, i);  // exactly one thread wins
  cuda::atomic_ref<float, cuda::thread_scope_device> s(*sum);
  s.fetch_add(0.5f);
}

__global__ void toFp8(const float* in, unsigned short* e4m3, unsigned short* e5m2, float* back,
                      int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float2 pair = make_float2(in[i], in[(i + 1) % n]);
  e4m3[i] = __nv_cvt_float2_to_fp8x2(pair, __NV_SATFINITE, __NV_E4M3);
  e5m2[i] = __nv_cvt_float2_to_fp8x2(pair, __NV_SATFINITE, __NV_E5M2);
  const __half2_raw halves = __nv_cvt_fp8x2_to_halfraw2(e4m3[i], __NV_E4M3);
  back[i] = __half2float(__half(__half_raw{halves.x}));
}

int main() {
  const int blocks = 3;
  int* dout;
  CHECK_CUDA(cudaMalloc(&dout, blocks * kThreads * sizeof(int)));
  barrierPhases<<<blocks, kThreads>>>(dout);
  CHECK_CUDA(cudaGetLastError());
  std::vector<int> out(blocks * kThreads);
  CHECK_CUDA(cudaMemcpy(out.data(), dout, out.size() * sizeof(int), cudaMemcpyDeviceToHost));
  for (int b = 0; b < blocks; ++b)
    for (int t = 0; t < kThreads; ++t) {
      const int expected = ((t + 1) % kThreads) * 3 + b + ((t + 5) % kThreads) * 7;
      CHECK(out[b * kThreads + t] == expected, "barrier: block %d thread %d got %d, expected %d", b,
            t, out[b * kThreads + t], expected);
    }
  std::printf("cuda::barrier ok\n");

  int* din0;
  CHECK_CUDA(cudaMalloc(&din0, blocks * kThreads * sizeof(int)));
  std::vector<int> source(blocks * kThreads);
  for (int i = 0; i < blocks * kThreads; ++i) source[i] = (i * 13) % 997;
  CHECK_CUDA(cudaMemcpy(din0, source.data(), source.size() * sizeof(int), cudaMemcpyHostToDevice));
  asyncCopies<<<blocks, kThreads>>>(din0, dout);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaMemcpy(out.data(), dout, out.size() * sizeof(int), cudaMemcpyDeviceToHost));
  for (int b = 0; b < blocks; ++b)
    for (int t = 0; t < kThreads; ++t) {
      const int expected =
          source[b * kThreads + kThreads - 1 - t] * 1000 + source[b * kThreads + t];
      CHECK(out[b * kThreads + t] == expected,
            "memcpy_async: block %d thread %d got %d, expected %d", b, t, out[b * kThreads + t],
            expected);
    }
  CHECK_CUDA(cudaFree(din0));
  std::printf("memcpy_async ok\n");

  int* dints;
  float* dsum;
  CHECK_CUDA(cudaMalloc(&dints, 3 * sizeof(int)));
  CHECK_CUDA(cudaMalloc(&dsum, sizeof(float)));
  const int initial[3] = {0, -1, -1};
  CHECK_CUDA(cudaMemcpy(dints, initial, sizeof(initial), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(dsum, 0, sizeof(float)));
  const int threads = 4 * kThreads;
  atomics<<<4, kThreads>>>(dints, dints + 1, dints + 2, dsum);
  CHECK_CUDA(cudaGetLastError());
  int ints[3];
  float sum = 0;
  CHECK_CUDA(cudaMemcpy(ints, dints, sizeof(ints), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(&sum, dsum, sizeof(float), cudaMemcpyDeviceToHost));
  int maximum = -1;
  for (int i = 0; i < threads; ++i) maximum = std::max(maximum, (i * 37) % 1001);
  CHECK(ints[0] == 2 * threads, "fetch_add: %d, expected %d", ints[0], 2 * threads);
  CHECK(ints[1] == maximum, "fetch_max: %d, expected %d", ints[1], maximum);
  CHECK(ints[2] >= 0 && ints[2] < threads, "compare_exchange winner %d", ints[2]);
  CHECK(sum == 0.5f * threads, "float fetch_add: %g, expected %g", sum, 0.5f * threads);
  std::printf("cuda::atomic_ref ok\n");

  std::vector<float> values = {0.0f,     -0.0f,     1.0f,     -2.5f,    1.0625f,  1.1875f,
                               448.0f,   464.0f,    500.0f,   57344.0f, 1e6f,     -1e6f,
                               INFINITY, -INFINITY, NAN,      0x1p-9f,  0x1p-10f, 0x3p-10f,
                               0x1p-16f, 0x1p-17f,  3.14159f, -0.1f,    1e-3f,    240.0f};
  const int n = static_cast<int>(values.size());
  float *din, *dback;
  unsigned short *de4m3, *de5m2;
  CHECK_CUDA(cudaMalloc(&din, n * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&dback, n * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&de4m3, n * sizeof(unsigned short)));
  CHECK_CUDA(cudaMalloc(&de5m2, n * sizeof(unsigned short)));
  CHECK_CUDA(cudaMemcpy(din, values.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  toFp8<<<1, 32>>>(din, de4m3, de5m2, dback, n);
  CHECK_CUDA(cudaGetLastError());
  std::vector<unsigned short> e4m3(n), e5m2(n);
  std::vector<float> back(n);
  CHECK_CUDA(cudaMemcpy(e4m3.data(), de4m3, n * sizeof(unsigned short), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(e5m2.data(), de5m2, n * sizeof(unsigned short), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(back.data(), dback, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) {
    const float2 pair = make_float2(values[i], values[(i + 1) % n]);
    const unsigned short hostE4m3 = __nv_cvt_float2_to_fp8x2(pair, __NV_SATFINITE, __NV_E4M3);
    const unsigned short hostE5m2 = __nv_cvt_float2_to_fp8x2(pair, __NV_SATFINITE, __NV_E5M2);
    CHECK(e4m3[i] == hostE4m3, "e4m3x2 of (%g, %g): 0x%04x, host 0x%04x", pair.x, pair.y, e4m3[i],
          hostE4m3);
    CHECK(e5m2[i] == hostE5m2, "e5m2x2 of (%g, %g): 0x%04x, host 0x%04x", pair.x, pair.y, e5m2[i],
          hostE5m2);
    const __half2_raw halves = __nv_cvt_fp8x2_to_halfraw2(hostE4m3, __NV_E4M3);
    const float hostBack = __half2float(__half(__half_raw{halves.x}));
    CHECK((std::isnan(back[i]) && std::isnan(hostBack)) || back[i] == hostBack,
          "e4m3 %g back to float: %g, host %g", values[(i + 1) % n], back[i], hostBack);
  }
  std::printf("fp8 conversions ok\n");
  for (void* p : {static_cast<void*>(dout), static_cast<void*>(dints), static_cast<void*>(dsum),
                  static_cast<void*>(din), static_cast<void*>(dback), static_cast<void*>(de4m3),
                  static_cast<void*>(de5m2)})
    CHECK_CUDA(cudaFree(p));
  return pass();
}
