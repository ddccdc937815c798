// The kernels `gpupool bench --emu` runs on the emu device's interpreter (issue #16, item 4): a
// compute-bound tiled matrix multiply, a memory-bound vector add and a warp-divergent reduction.
// nvcc compiles this file to PTX at build time; the PTX is embedded in the gpupool binary.

constexpr int kTile = 16;

extern "C" __global__ void matmulTiled(const float* a, const float* b, float* c, int n) {
  __shared__ float tileA[kTile][kTile];
  __shared__ float tileB[kTile][kTile];
  int row = blockIdx.y * kTile + threadIdx.y;
  int col = blockIdx.x * kTile + threadIdx.x;
  float sum = 0.0f;
  for (int t = 0; t < n / kTile; ++t) {
    tileA[threadIdx.y][threadIdx.x] = a[row * n + t * kTile + threadIdx.x];
    tileB[threadIdx.y][threadIdx.x] = b[(t * kTile + threadIdx.y) * n + col];
    __syncthreads();
    for (int k = 0; k < kTile; ++k) sum += tileA[threadIdx.y][k] * tileB[k][threadIdx.x];
    __syncthreads();
  }
  c[row * n + col] = sum;
}

extern "C" __global__ void vectorAdd(const float* a, const float* b, float* c, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

// The interleaved reduction whose `tid % (2 * stride)` test leaves most lanes of each warp idle
// (the classic divergent form): a block of 256 sums its 256 inputs into out[blockIdx.x].
extern "C" __global__ void divergentReduce(const int* in, int* out) {
  __shared__ int partial[256];
  unsigned tid = threadIdx.x;
  partial[tid] = in[blockIdx.x * blockDim.x + tid];
  __syncthreads();
  for (unsigned stride = 1; stride < blockDim.x; stride *= 2) {
    if (tid % (2 * stride) == 0) partial[tid] += partial[tid + stride];
    __syncthreads();
  }
  if (tid == 0) out[blockIdx.x] = partial[0];
}
