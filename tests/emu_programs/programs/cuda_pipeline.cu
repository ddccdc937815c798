// libcu++'s asynchronous copies, checked against the host: a block-scoped cuda::pipeline with
// several stages (producer/consumer acquire, commit, wait, release) streaming tiles of a vector
// through shared memory; a thread-scoped pipeline (cuda::make_pipeline) with
// cuda::pipeline_consumer_wait_prior; cuda::memcpy_async completing on a cuda::barrier (on sm_90
// and later nvcc emits the bulk-copy forms for aligned sizes); and cooperative_groups::memcpy_async
// with cooperative_groups::wait.
#include <cooperative_groups.h>
#include <cooperative_groups/memcpy_async.h>

#include <cstdio>
#include <cuda/barrier>
#include <cuda/pipeline>
#include <vector>

#include "self_check.h"

namespace cg = cooperative_groups;

// The shared pipeline state and barrier are initialized by the code, as libcu++ documents.
#pragma nv_diag_suppress static_var_with_dynamic_init

namespace {

constexpr int kTile = 256;  // floats per tile, one per thread
constexpr int kStages = 3;

// out[i] = 2 * in[i] + 1, the tiles streamed through a kStages-deep block pipeline.
__global__ void pipelinedScale(const float* in, float* out, int tiles) {
  __shared__ alignas(16) float stage[kStages][kTile];
  __shared__ cuda::pipeline_shared_state<cuda::thread_scope_block, kStages> state;
  auto block = cg::this_thread_block();
  auto pipe = cuda::make_pipeline(block, &state);
  int fetched = 0;
  for (int done = 0; done < tiles; ++done) {
    for (; fetched < tiles && fetched < done + kStages; ++fetched) {
      pipe.producer_acquire();
      cuda::memcpy_async(block, stage[fetched % kStages], in + fetched * kTile,
                         sizeof(float) * kTile, pipe);
      pipe.producer_commit();
    }
    pipe.consumer_wait();
    float v = stage[done % kStages][threadIdx.x];
    out[done * kTile + threadIdx.x] = 2.0f * v + 1.0f;
    pipe.consumer_release();
  }
}

// Each thread copies its own 4 floats, two batches deep, with a thread-scoped pipeline.
__global__ void threadPipeline(const float4* in, float4* out, int n) {
  __shared__ float4 slots[2][128];
  auto pipe = cuda::make_pipeline();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  for (int batch = 0; batch < 2; ++batch) {
    pipe.producer_acquire();
    int from = i + batch * n / 2;
    if (from < n) cuda::memcpy_async(&slots[batch][threadIdx.x], &in[from], sizeof(float4), pipe);
    pipe.producer_commit();
  }
  cuda::pipeline_consumer_wait_prior<1>(pipe);  // the first batch, while the second may fly
  if (i < n) {
    float4 v = slots[0][threadIdx.x];
    out[i] = make_float4(v.w, v.z, v.y, v.x);
  }
  pipe.consumer_release();
  pipe.consumer_wait();
  if (i + n / 2 < n) {
    float4 v = slots[1][threadIdx.x];
    out[i + n / 2] = make_float4(v.w, v.z, v.y, v.x);
  }
  pipe.consumer_release();
}

// A whole tile copied into shared memory, completing on a block barrier, then reversed.
__global__ void barrierCopyReverse(const int* in, int* out) {
  __shared__ alignas(16) int tile[kTile];
  __shared__ cuda::barrier<cuda::thread_scope_block> ready;
  auto block = cg::this_thread_block();
  if (block.thread_rank() == 0) init(&ready, block.size());
  block.sync();
  cuda::memcpy_async(block, tile, in + blockIdx.x * kTile, cuda::aligned_size_t<16>(sizeof(tile)),
                     ready);
  ready.arrive_and_wait();
  out[blockIdx.x * kTile + threadIdx.x] = tile[kTile - 1 - threadIdx.x];
}

// cooperative_groups::memcpy_async of an odd-sized span, then cg::wait, then a block sum.
__global__ void groupCopySum(const int* in, int n, int* sum) {
  extern __shared__ int data[];
  auto block = cg::this_thread_block();
  cg::memcpy_async(block, data, in, sizeof(int) * n);
  cg::wait(block);
  int partial = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) partial += data[i];
  atomicAdd(sum, partial);
}

void checkPipelinedScale() {
  const int tiles = 10, n = tiles * kTile;
  std::vector<float> in(n);
  for (int i = 0; i < n; ++i) in[i] = static_cast<float>(i % 97) - 40.0f;
  float *dIn, *dOut;
  CHECK_CUDA(cudaMalloc(&dIn, n * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&dOut, n * sizeof(float)));
  CHECK_CUDA(cudaMemcpy(dIn, in.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  pipelinedScale<<<1, kTile>>>(dIn, dOut, tiles);
  CHECK_CUDA(cudaGetLastError());
  std::vector<float> out(n);
  CHECK_CUDA(cudaMemcpy(out.data(), dOut, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i)
    CHECK(out[i] == 2.0f * in[i] + 1.0f, "pipeline: element %d is %g, expected %g", i, out[i],
          2.0f * in[i] + 1.0f);
  std::printf("block pipeline, %d stages: %d tiles ok\n", kStages, tiles);
  CHECK_CUDA(cudaFree(dIn));
  CHECK_CUDA(cudaFree(dOut));
}

void checkThreadPipeline() {
  const int n = 512;  // float4s; two batches of 256, two blocks of 128 threads
  std::vector<float4> in(n);
  for (int i = 0; i < n; ++i) in[i] = make_float4(i, i + 0.25f, i + 0.5f, i + 0.75f);
  float4 *dIn, *dOut;
  CHECK_CUDA(cudaMalloc(&dIn, n * sizeof(float4)));
  CHECK_CUDA(cudaMalloc(&dOut, n * sizeof(float4)));
  CHECK_CUDA(cudaMemcpy(dIn, in.data(), n * sizeof(float4), cudaMemcpyHostToDevice));
  threadPipeline<<<2, 128>>>(dIn, dOut, n);
  CHECK_CUDA(cudaGetLastError());
  std::vector<float4> out(n);
  CHECK_CUDA(cudaMemcpy(out.data(), dOut, n * sizeof(float4), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) {
    CHECK(out[i].x == in[i].w && out[i].y == in[i].z && out[i].z == in[i].y && out[i].w == in[i].x,
          "thread pipeline: element %d is (%g %g %g %g)", i, out[i].x, out[i].y, out[i].z,
          out[i].w);
  }
  std::printf("thread pipeline, wait_prior<1>: %d float4 ok\n", n);
  CHECK_CUDA(cudaFree(dIn));
  CHECK_CUDA(cudaFree(dOut));
}

void checkBarrierCopy() {
  const int blocks = 4, n = blocks * kTile;
  std::vector<int> in(n);
  for (int i = 0; i < n; ++i) in[i] = i * 7 - 300;
  int *dIn, *dOut;
  CHECK_CUDA(cudaMalloc(&dIn, n * sizeof(int)));
  CHECK_CUDA(cudaMalloc(&dOut, n * sizeof(int)));
  CHECK_CUDA(cudaMemcpy(dIn, in.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  barrierCopyReverse<<<blocks, kTile>>>(dIn, dOut);
  CHECK_CUDA(cudaGetLastError());
  std::vector<int> out(n);
  CHECK_CUDA(cudaMemcpy(out.data(), dOut, n * sizeof(int), cudaMemcpyDeviceToHost));
  for (int b = 0; b < blocks; ++b)
    for (int t = 0; t < kTile; ++t)
      CHECK(out[b * kTile + t] == in[b * kTile + kTile - 1 - t],
            "barrier copy: block %d thread %d read %d", b, t, out[b * kTile + t]);
  std::printf("memcpy_async on a cuda::barrier: %d blocks ok\n", blocks);
  CHECK_CUDA(cudaFree(dIn));
  CHECK_CUDA(cudaFree(dOut));
}

void checkGroupCopy() {
  const int n = 1001;
  std::vector<int> in(n);
  long long expected = 0;
  for (int i = 0; i < n; ++i) expected += (in[i] = (i * 13) % 101 - 50);
  int *dIn, *dSum;
  CHECK_CUDA(cudaMalloc(&dIn, n * sizeof(int)));
  CHECK_CUDA(cudaMalloc(&dSum, sizeof(int)));
  CHECK_CUDA(cudaMemcpy(dIn, in.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(dSum, 0, sizeof(int)));
  groupCopySum<<<1, 96, n * sizeof(int)>>>(dIn, n, dSum);
  CHECK_CUDA(cudaGetLastError());
  int sum = 0;
  CHECK_CUDA(cudaMemcpy(&sum, dSum, sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(sum == expected, "cooperative_groups::memcpy_async: sum %d, expected %lld", sum, expected);
  std::printf("cooperative_groups::memcpy_async of %d ints ok\n", n);
  CHECK_CUDA(cudaFree(dIn));
  CHECK_CUDA(cudaFree(dSum));
}

}  // namespace

int main() {
  checkPipelinedScale();
  checkThreadPipeline();
  checkBarrierCopy();
  checkGroupCopy();
  return pass();
}
