// Shared memory, barriers and atomics.
template <int BLOCK>
__device__ void blockReduceImpl(const int* in, int* out, int n) {
  __shared__ int partial[BLOCK];
  int t = threadIdx.x;
  int sum = 0;
  for (int i = blockIdx.x * BLOCK + t; i < n; i += BLOCK * gridDim.x) sum += in[i];
  partial[t] = sum;
  __syncthreads();
  for (int s = BLOCK / 2; s > 0; s >>= 1) {
    if (t < s) partial[t] += partial[t + s];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = partial[0];
}

extern "C" __global__ void blockReduce(const int* in, int* out, int n) {
  blockReduceImpl<256>(in, out, n);
}

// Dynamic shared memory: reverse each block's chunk.
extern "C" __global__ void reverseDynamic(const float* in, float* out) {
  extern __shared__ float tile[];
  int t = threadIdx.x, base = blockIdx.x * blockDim.x;
  tile[t] = in[base + t];
  __syncthreads();
  out[base + t] = tile[blockDim.x - 1 - t];
}

#define TILE 16
extern "C" __global__ void matmul(const float* A, const float* B, float* C, int n) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];
  int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
  float acc = 0.0f;
  for (int k0 = 0; k0 < n; k0 += TILE) {
    As[threadIdx.y][threadIdx.x] =
        (row < n && k0 + threadIdx.x < n) ? A[row * n + k0 + threadIdx.x] : 0.0f;
    Bs[threadIdx.y][threadIdx.x] =
        (col < n && k0 + threadIdx.y < n) ? B[(k0 + threadIdx.y) * n + col] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
    __syncthreads();
  }
  if (row < n && col < n) C[row * n + col] = acc;
}

extern "C" __global__ void histogram(const unsigned char* data, int n, unsigned* bins) {
  __shared__ unsigned local[256];
  for (int i = threadIdx.x; i < 256; i += blockDim.x) local[i] = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    atomicAdd(&local[data[i]], 1u);
  __syncthreads();
  for (int i = threadIdx.x; i < 256; i += blockDim.x) atomicAdd(&bins[i], local[i]);
}

// Global atomics of several kinds; results are order-independent.
extern "C" __global__ void atomics(int* ints, unsigned* uints, unsigned long long* u64, float* f,
                                   double* d) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  atomicAdd(&ints[0], 1);
  atomicSub(&ints[1], 2);
  atomicMin(&ints[2], -i);
  atomicMax(&ints[3], i);
  atomicAnd(&uints[0], ~(1u << (i % 32)));
  atomicOr(&uints[1], 1u << (i % 32));
  atomicXor(&uints[2], 1u << (i % 32));
  atomicInc(&uints[3], 9u);
  atomicAdd(&u64[0], (unsigned long long)i);
  atomicAdd(&f[0], 1.0f);
  atomicAdd(&d[0], 0.5);
  int old = atomicCAS(&ints[4], i, i + 1);  // a chain: succeeds only for old == i
  (void)old;
  atomicExch(&uints[4], 7u);
}

// Warp-level reduction with shuffles and votes.
extern "C" __global__ void warpReduce(const float* in, float* total, unsigned* ballots, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? in[i] : 0.0f;
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  unsigned b = __ballot_sync(0xffffffffu, i < n && in[i] > 0.5f);
  int all = __all_sync(0xffffffffu, i < n);
  int any = __any_sync(0xffffffffu, i >= n);
  if ((threadIdx.x & 31) == 0) {
    atomicAdd(total, v);
    int w = i / 32;
    ballots[3 * w] = b;
    ballots[3 * w + 1] = all;
    ballots[3 * w + 2] = any;
  }
}

// Early-exited lanes must not block warp collectives.
extern "C" __global__ void ballotAfterExit(const int* in, unsigned* out, int n) {
  int i = threadIdx.x;
  if (i >= n) return;
  unsigned b = __ballot_sync(__activemask(), in[i] != 0);
  out[i] = b;
}

// Shuffle variants: up, xor, idx with width 8.
extern "C" __global__ void shuffles(int* out) {
  int lane = threadIdx.x & 31;
  int v = lane * 10;
  out[4 * threadIdx.x + 0] = __shfl_up_sync(0xffffffffu, v, 3);
  out[4 * threadIdx.x + 1] = __shfl_xor_sync(0xffffffffu, v, 5);
  out[4 * threadIdx.x + 2] = __shfl_sync(0xffffffffu, v, 2, 8);
  out[4 * threadIdx.x + 3] = __shfl_down_sync(0xffffffffu, v, 3, 16);
}

extern "C" __global__ void matchAny(const int* keys, unsigned* out) {
  out[threadIdx.x] = __match_any_sync(0xffffffffu, keys[threadIdx.x]);
}

// Divergent barrier / warp-sync: deadlocks on a GPU (or is undefined); must be reported, not hang.
extern "C" __global__ void barrierDeadlock(int* out) {
  if (threadIdx.x < 16) {
    __syncthreads();
  } else {
    out[threadIdx.x] = __shfl_sync(0xffffffffu, (int)threadIdx.x, 0);
  }
}

extern "C" __global__ void outOfBounds(int* out, int n) { out[n + 1000000 * (int)threadIdx.x] = 1; }
