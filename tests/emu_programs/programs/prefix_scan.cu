// Inclusive prefix sums over several blocks: a Hillis-Steele scan per block in double-buffered
// shared memory, a scan of the block totals, and a pass that adds each block's offset. Also an
// exclusive Blelloch (up-sweep/down-sweep) scan of one block.
#include <vector>

#include "self_check.h"

constexpr int kBlock = 128;

__global__ void scanBlocks(const int* in, int* out, int* blockTotals, int n) {
  __shared__ int buffer[2][kBlock];
  const int i = blockIdx.x * kBlock + threadIdx.x;
  int current = 0;
  buffer[current][threadIdx.x] = i < n ? in[i] : 0;
  __syncthreads();
  for (int offset = 1; offset < kBlock; offset *= 2) {
    const int next = 1 - current;
    int value = buffer[current][threadIdx.x];
    if (threadIdx.x >= offset) value += buffer[current][threadIdx.x - offset];
    buffer[next][threadIdx.x] = value;
    current = next;
    __syncthreads();
  }
  if (i < n) out[i] = buffer[current][threadIdx.x];
  if (threadIdx.x == kBlock - 1) blockTotals[blockIdx.x] = buffer[current][threadIdx.x];
}

// Exclusive scan of `count` (a power of two, <= 2 * blockDim.x) values in place.
__global__ void blellochScan(int* data, int count) {
  extern __shared__ int temp[];
  const int t = threadIdx.x;
  temp[2 * t] = data[2 * t];
  temp[2 * t + 1] = data[2 * t + 1];
  int offset = 1;
  for (int d = count / 2; d > 0; d /= 2) {
    __syncthreads();
    if (t < d) {
      const int ai = offset * (2 * t + 1) - 1;
      const int bi = offset * (2 * t + 2) - 1;
      temp[bi] += temp[ai];
    }
    offset *= 2;
  }
  if (t == 0) temp[count - 1] = 0;
  for (int d = 1; d < count; d *= 2) {
    offset /= 2;
    __syncthreads();
    if (t < d) {
      const int ai = offset * (2 * t + 1) - 1;
      const int bi = offset * (2 * t + 2) - 1;
      const int saved = temp[ai];
      temp[ai] = temp[bi];
      temp[bi] += saved;
    }
  }
  __syncthreads();
  data[2 * t] = temp[2 * t];
  data[2 * t + 1] = temp[2 * t + 1];
}

__global__ void addOffsets(int* out, const int* scannedTotals, int n) {
  const int i = blockIdx.x * kBlock + threadIdx.x;
  if (blockIdx.x > 0 && i < n) out[i] += scannedTotals[blockIdx.x - 1];
}

int main() {
  const int n = 3000;
  const int blocks = (n + kBlock - 1) / kBlock;  // 24
  std::vector<int> in(n);
  for (int i = 0; i < n; ++i) in[i] = (i * 13) % 21 - 10;
  int *din, *dout, *dtotals;
  CHECK_CUDA(cudaMalloc(&din, n * sizeof(int)));
  CHECK_CUDA(cudaMalloc(&dout, n * sizeof(int)));
  CHECK_CUDA(cudaMalloc(&dtotals, 32 * sizeof(int)));
  CHECK_CUDA(cudaMemset(dtotals, 0, 32 * sizeof(int)));
  CHECK_CUDA(cudaMemcpy(din, in.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  scanBlocks<<<blocks, kBlock>>>(din, dout, dtotals, n);
  CHECK_CUDA(cudaGetLastError());
  // The 24 block totals, padded with zeros to 32, get an exclusive scan on the device.
  std::vector<int> totals(32);
  CHECK_CUDA(cudaMemcpy(totals.data(), dtotals, 32 * sizeof(int), cudaMemcpyDeviceToHost));
  blellochScan<<<1, 16, 32 * sizeof(int)>>>(dtotals, 32);
  CHECK_CUDA(cudaGetLastError());
  std::vector<int> exclusive(32);
  CHECK_CUDA(cudaMemcpy(exclusive.data(), dtotals, 32 * sizeof(int), cudaMemcpyDeviceToHost));
  int running = 0;
  for (int b = 0; b < 32; ++b) {
    CHECK(exclusive[b] == running, "exclusive scan [%d] = %d, expected %d", b, exclusive[b],
          running);
    running += totals[b];
  }
  // Shift by one so that element b - 1 holds the sum of blocks 0..b-1.
  CHECK_CUDA(cudaMemcpy(dtotals, exclusive.data() + 1, 31 * sizeof(int), cudaMemcpyHostToDevice));
  addOffsets<<<blocks, kBlock>>>(dout, dtotals, n);
  CHECK_CUDA(cudaGetLastError());
  std::vector<int> out(n);
  CHECK_CUDA(cudaMemcpy(out.data(), dout, n * sizeof(int), cudaMemcpyDeviceToHost));
  int sum = 0;
  for (int i = 0; i < n; ++i) {
    sum += in[i];
    CHECK(out[i] == sum, "scan[%d] = %d, expected %d", i, out[i], sum);
  }
  std::printf("scan of %d ok\n", n);
  CHECK_CUDA(cudaFree(din));
  CHECK_CUDA(cudaFree(dout));
  CHECK_CUDA(cudaFree(dtotals));
  return pass();
}
