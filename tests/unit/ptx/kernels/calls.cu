// Device functions, recursion, function pointers, structs by value, templates, printf, malloc,
// assert.
#include <cassert>
#include <cstdio>

__device__ __noinline__ int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

extern "C" __global__ void fibonacci(int* out) { out[threadIdx.x] = fib(threadIdx.x); }

typedef int (*BinaryOp)(int, int);
__device__ __noinline__ int addOp(int a, int b) { return a + b; }
__device__ __noinline__ int mulOp(int a, int b) { return a * b; }
__device__ __noinline__ int subOp(int a, int b) { return a - b; }
__device__ BinaryOp ops[3] = {addOp, mulOp, subOp};

extern "C" __global__ void functionPointers(const int* a, const int* b, int* out) {
  int i = threadIdx.x;
  out[i] = ops[i % 3](a[i], b[i]);
}

struct Params {
  float scale;
  int offset;
  double bias;
  short tag;
  char name[6];
  float* out;
};

__device__ __noinline__ float applyParams(Params p, float x) {
  return x * p.scale + p.offset + (float)p.bias + p.tag;
}

extern "C" __global__ void structByValue(Params p, const float* in) {
  int i = threadIdx.x;
  p.out[i] = applyParams(p, in[i]) + p.name[i % 6];
}

template <typename T>
__global__ void scaleTemplate(T* data, T factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] = data[i] * factor + (T)1;
}
template __global__ void scaleTemplate<float>(float*, float, int);
template __global__ void scaleTemplate<double>(double*, double, int);
template __global__ void scaleTemplate<int>(int*, int, int);
template __global__ void scaleTemplate<short>(short*, short, int);

extern "C" __global__ void printer(int base) {
  int t = threadIdx.x;
  printf(
      "thread %d: int=%d neg=%i hex=%x HEX=%X oct=%o char=%c str=%s dbl=%.3f exp=%e g=%g ll=%lld "
      "ull=%llu "
      "w=[%5d] l=[%-4d] z=%05.1f\n",
      t, base + t, -t, 255 + t, 255 + t, 8 + t, 'A' + t, "hi", 1.5 * t, 12345.678, 0.0001,
      -9000000000ll, 18000000000000000000ull, t, t, 3.14159);
}

extern "C" __global__ void heap(int* out) {
  int* p = (int*)malloc(4 * sizeof(int));
  for (int k = 0; k < 4; ++k) p[k] = threadIdx.x * 10 + k;
  int s = 0;
  for (int k = 0; k < 4; ++k) s += p[k];
  free(p);
  out[threadIdx.x] = s;
}

extern "C" __global__ void asserting(const int* in) {
  int v = in[threadIdx.x];
  assert(v < 5);
}

// Local arrays indexed dynamically force a .local depot.
extern "C" __global__ void localArray(const int* idx, int* out) {
  int a[16];
  for (int k = 0; k < 16; ++k) a[k] = k * k + threadIdx.x;
  out[threadIdx.x] = a[idx[threadIdx.x] & 15];
}

__constant__ float coefficients[4] = {1.0f, -2.0f, 0.5f, 4.0f};
__device__ int counter = 42;

extern "C" __global__ void constants(float* out) {
  int t = threadIdx.x;
  out[t] = coefficients[t & 3] * t + counter;
}

extern "C" __global__ void trapping() { __trap(); }
