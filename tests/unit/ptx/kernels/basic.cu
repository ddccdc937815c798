// Basic indexing and arithmetic kernels, as users write them.
#include <cstddef>

extern "C" __global__ void vectorAdd(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

extern "C" __global__ void saxpy(int n, float alpha, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = alpha * x[i] + y[i];
}

extern "C" __global__ void daxpy(int n, double alpha, const double* x, double* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = alpha * x[i] + y[i];
}

// Grid-stride loop with 64-bit indices and integer mixing.
extern "C" __global__ void gridStride(size_t n, const unsigned* in, unsigned long long* out) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    unsigned long long v = in[i];
    out[i] = (v * 2654435761ull) ^ (v >> 3) ^ (i % 7) ^ (i / 3);
  }
}

// 2-D/3-D indices: every thread writes its coordinates.
extern "C" __global__ void coordinates(int* out) {
  int bx = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  int tx = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  int t = bx * blockDim.x * blockDim.y * blockDim.z + tx;
  out[4 * t + 0] = threadIdx.x | (threadIdx.y << 8) | (threadIdx.z << 16);
  out[4 * t + 1] = blockIdx.x | (blockIdx.y << 8) | (blockIdx.z << 16);
  out[4 * t + 2] = blockDim.x | (blockDim.y << 8) | (blockDim.z << 16);
  out[4 * t + 3] = gridDim.x | (gridDim.y << 8) | (gridDim.z << 16);
}

// Signed/unsigned integer corner cases that compilers keep as real instructions.
extern "C" __global__ void integerOps(const int* a, const int* b, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int x = a[i], y = b[i];
  unsigned ux = x, uy = y;
  out[8 * i + 0] = y ? x / y : 0;
  out[8 * i + 1] = y ? x % y : 0;
  out[8 * i + 2] = uy ? (int)(ux / uy) : 0;
  out[8 * i + 3] = min(x, y) ^ max(x, y);
  out[8 * i + 4] = __mulhi(x, y) + __umulhi(ux, uy);
  out[8 * i + 5] = (x << (y & 31)) ^ (x >> (y & 31)) ^ (int)(ux >> (uy & 31));
  out[8 * i + 6] = __popc(ux) + __clz(x) * 64 + __ffs(x) * 4096;
  out[8 * i + 7] = (int)__brev(ux) ^ abs(x);
}
