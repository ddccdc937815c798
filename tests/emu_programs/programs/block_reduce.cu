// Tree reductions in shared memory with __syncthreads in a loop: per-block integer sums, then a
// second launch that reduces the partial sums; and a per-block float maximum with its index.
#include <cfloat>
#include <vector>

#include "self_check.h"

constexpr int kBlock = 256;

__global__ void blockSum(const int* in, long long* partial, int n) {
  __shared__ long long sums[kBlock];
  const int tid = threadIdx.x;
  long long value = 0;
  for (int i = blockIdx.x * blockDim.x + tid; i < n; i += gridDim.x * blockDim.x) value += in[i];
  sums[tid] = value;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (tid < stride) sums[tid] += sums[tid + stride];
    __syncthreads();
  }
  if (tid == 0) partial[blockIdx.x] = sums[0];
}

__global__ void finalSum(const long long* partial, int count, long long* total) {
  __shared__ long long sums[kBlock];
  long long value = 0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) value += partial[i];
  sums[threadIdx.x] = value;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) sums[threadIdx.x] += sums[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) *total = sums[0];
}

// Maximum and its first index per block of 128 elements.
__global__ void blockArgMax(const float* in, float* maxima, int* indices) {
  __shared__ float values[128];
  __shared__ int where[128];
  const int i = blockIdx.x * 128 + threadIdx.x;
  values[threadIdx.x] = in[i];
  where[threadIdx.x] = i;
  __syncthreads();
  for (int stride = 64; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      const float other = values[threadIdx.x + stride];
      const int otherIndex = where[threadIdx.x + stride];
      if (other > values[threadIdx.x] ||
          (other == values[threadIdx.x] && otherIndex < where[threadIdx.x])) {
        values[threadIdx.x] = other;
        where[threadIdx.x] = otherIndex;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    maxima[blockIdx.x] = values[0];
    indices[blockIdx.x] = where[0];
  }
}

int main() {
  const int n = 100003;
  std::vector<int> in(n);
  long long expected = 0;
  for (int i = 0; i < n; ++i) {
    in[i] = (i * 7919) % 2001 - 1000;
    expected += in[i];
  }
  const int blocks = 24;
  int* din;
  long long *dpartial, *dtotal;
  CHECK_CUDA(cudaMalloc(&din, n * sizeof(int)));
  CHECK_CUDA(cudaMalloc(&dpartial, blocks * sizeof(long long)));
  CHECK_CUDA(cudaMalloc(&dtotal, sizeof(long long)));
  CHECK_CUDA(cudaMemcpy(din, in.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  blockSum<<<blocks, kBlock>>>(din, dpartial, n);
  CHECK_CUDA(cudaGetLastError());
  finalSum<<<1, kBlock>>>(dpartial, blocks, dtotal);
  CHECK_CUDA(cudaGetLastError());
  long long total = 0;
  CHECK_CUDA(cudaMemcpy(&total, dtotal, sizeof(total), cudaMemcpyDeviceToHost));
  CHECK(total == expected, "sum = %lld, expected %lld", total, expected);
  std::printf("sum of %d ints = %lld ok\n", n, total);

  const int groups = 40;
  std::vector<float> values(groups * 128);
  for (int i = 0; i < groups * 128; ++i) {
    values[i] = static_cast<float>((i * 2654435761u) % 10007) * 0.125f - 300.0f;
  }
  values[5 * 128 + 77] = FLT_MAX;  // a block whose maximum is the largest finite float
  values[9 * 128 + 3] = values[9 * 128 + 100] = 5000.0f;  // a tie: the lower index wins
  float* dvalues;
  float* dmaxima;
  int* dindices;
  CHECK_CUDA(cudaMalloc(&dvalues, values.size() * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&dmaxima, groups * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&dindices, groups * sizeof(int)));
  CHECK_CUDA(
      cudaMemcpy(dvalues, values.data(), values.size() * sizeof(float), cudaMemcpyHostToDevice));
  blockArgMax<<<groups, 128>>>(dvalues, dmaxima, dindices);
  CHECK_CUDA(cudaGetLastError());
  std::vector<float> maxima(groups);
  std::vector<int> indices(groups);
  CHECK_CUDA(cudaMemcpy(maxima.data(), dmaxima, groups * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(indices.data(), dindices, groups * sizeof(int), cudaMemcpyDeviceToHost));
  for (int g = 0; g < groups; ++g) {
    int best = g * 128;
    for (int i = g * 128; i < (g + 1) * 128; ++i) {
      if (values[i] > values[best]) best = i;
    }
    CHECK(maxima[g] == values[best] && indices[g] == best,
          "block %d: max %f at %d, expected %f at %d", g, maxima[g], indices[g], values[best],
          best);
  }
  std::printf("argmax of %d blocks ok\n", groups);
  CHECK_CUDA(cudaFree(din));
  CHECK_CUDA(cudaFree(dpartial));
  CHECK_CUDA(cudaFree(dtotal));
  CHECK_CUDA(cudaFree(dvalues));
  CHECK_CUDA(cudaFree(dmaxima));
  CHECK_CUDA(cudaFree(dindices));
  return pass();
}
