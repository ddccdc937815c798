// Module-scope variables: __constant__ arrays written with cudaMemcpyToSymbol (also at an
// offset), a __device__ variable with an initializer read back with cudaMemcpyFromSymbol before
// and after a kernel changes it, cudaGetSymbolAddress / cudaGetSymbolSize, and a __device__
// table of function pointers (a global initialized with function addresses).
#include <vector>

#include "self_check.h"

__constant__ float coefficients[8];
__constant__ int lookup[4] = {10, 20, 30, 40};
__device__ int counter = 1234;
__device__ double accumulators[3] = {0.5, 1.5, 2.5};

__device__ int twice(int x) { return 2 * x; }
__device__ int square(int x) { return x * x; }
__device__ int negate(int x) { return -x; }
typedef int (*UnaryOp)(int);
__device__ UnaryOp operations[3] = {twice, square, negate};

__global__ void polynomial(const float* x, float* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float result = 0.0f;
  for (int k = 7; k >= 0; --k) result = result * x[i] + coefficients[k];
  y[i] = result + static_cast<float>(lookup[i % 4]);
}

__global__ void touchGlobals(int* outputs) {
  const int t = threadIdx.x;
  atomicAdd(&counter, 1);
  if (t < 3) accumulators[t] *= 2.0;
  outputs[t] = operations[t % 3](t + 1);
}

int main() {
  const float coeffs[8] = {1.0f, -0.5f, 0.25f, 2.0f, -1.0f, 0.125f, 0.0f, 0.5f};
  CHECK_CUDA(cudaMemcpyToSymbol(coefficients, coeffs, sizeof(coeffs)));
  const int replacement[2] = {-7, -8};  // lookup[2..3]
  CHECK_CUDA(cudaMemcpyToSymbol(lookup, replacement, sizeof(replacement), 2 * sizeof(int)));
  const int n = 100;
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) x[i] = static_cast<float>(i % 10) * 0.5f - 2.0f;
  float *dx, *dy;
  CHECK_CUDA(cudaMalloc(&dx, n * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&dy, n * sizeof(float)));
  CHECK_CUDA(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  polynomial<<<1, 128>>>(dx, dy, n);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaMemcpy(y.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost));
  const int table[4] = {10, 20, -7, -8};
  for (int i = 0; i < n; ++i) {
    // Multiples of 1/2 and 1/8 with few bits: every step is exact, with or without fma.
    float want = 0.0f;
    for (int k = 7; k >= 0; --k) want = want * x[i] + coeffs[k];
    want += static_cast<float>(table[i % 4]);
    CHECK(y[i] == want, "y[%d] = %f, expected %f", i, y[i], want);
  }
  std::printf("__constant__ coefficients ok\n");

  int counterValue = 0;
  CHECK_CUDA(cudaMemcpyFromSymbol(&counterValue, counter, sizeof(int)));
  CHECK(counterValue == 1234, "initial counter %d, expected 1234", counterValue);
  int* outputs;
  CHECK_CUDA(cudaMalloc(&outputs, 64 * sizeof(int)));
  touchGlobals<<<1, 64>>>(outputs);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaMemcpyFromSymbol(&counterValue, counter, sizeof(int)));
  CHECK(counterValue == 1234 + 64, "counter %d, expected %d", counterValue, 1234 + 64);
  double acc[3];
  CHECK_CUDA(cudaMemcpyFromSymbol(acc, accumulators, sizeof(acc)));
  CHECK(acc[0] == 1.0 && acc[1] == 3.0 && acc[2] == 5.0, "accumulators %f %f %f", acc[0], acc[1],
        acc[2]);
  std::vector<int> out(64);
  CHECK_CUDA(cudaMemcpy(out.data(), outputs, 64 * sizeof(int), cudaMemcpyDeviceToHost));
  for (int t = 0; t < 64; ++t) {
    const int v = t + 1;
    const int want = t % 3 == 0 ? 2 * v : t % 3 == 1 ? v * v : -v;
    CHECK(out[t] == want, "function table result %d = %d, expected %d", t, out[t], want);
  }
  std::printf("__device__ variables and function table ok\n");

  void* address = nullptr;
  size_t size = 0;
  CHECK_CUDA(cudaGetSymbolAddress(&address, accumulators));
  CHECK_CUDA(cudaGetSymbolSize(&size, accumulators));
  CHECK(address != nullptr && size == 3 * sizeof(double), "symbol address %p size %zu", address,
        size);
  const double fresh[3] = {-1.0, -2.0, -3.0};
  CHECK_CUDA(cudaMemcpy(address, fresh, sizeof(fresh), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpyFromSymbol(acc, accumulators, sizeof(acc)));
  CHECK(acc[0] == -1.0 && acc[1] == -2.0 && acc[2] == -3.0,
        "a write through the symbol address is not visible through the symbol");
  std::printf("symbol address and size ok\n");
  CHECK_CUDA(cudaFree(dx));
  CHECK_CUDA(cudaFree(dy));
  CHECK_CUDA(cudaFree(outputs));
  return pass();
}
