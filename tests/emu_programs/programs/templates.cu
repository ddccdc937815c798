// Function templates instantiated over several types (float, double, int, short, unsigned char,
// long long) plus a functor template parameter and a non-type template parameter (unroll factor).
#include <cstdint>
#include <vector>

#include "self_check.h"

template <typename T>
struct Square {
  __host__ __device__ T operator()(T x) const { return x * x; }
};

template <typename T>
struct AddThree {
  __host__ __device__ T operator()(T x) const { return static_cast<T>(x + 3); }
};

template <typename T, typename Op, int kPerThread>
__global__ void transform(const T* in, T* out, int n, Op op) {
  const int base = (blockIdx.x * blockDim.x + threadIdx.x) * kPerThread;
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    if (base + k < n) out[base + k] = op(in[base + k]);
  }
}

template <typename T>
__global__ void dot(const T* a, const T* b, int n, T* result) {
  T sum = 0;
  for (int i = 0; i < n; ++i) sum += a[i] * b[i];
  *result = sum;
}

template <typename T, typename Op, int kPerThread>
void check(const char* name, int n, Op op) {
  std::vector<T> in(n), out(n);
  for (int i = 0; i < n; ++i) in[i] = static_cast<T>(i % 11);
  T *din, *dout;
  CHECK_CUDA(cudaMalloc(&din, n * sizeof(T)));
  CHECK_CUDA(cudaMalloc(&dout, n * sizeof(T)));
  CHECK_CUDA(cudaMemcpy(din, in.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  const int threads = 64;
  const int blocks = (n + threads * kPerThread - 1) / (threads * kPerThread);
  transform<T, Op, kPerThread><<<blocks, threads>>>(din, dout, n, op);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaMemcpy(out.data(), dout, n * sizeof(T), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) {
    CHECK(out[i] == op(in[i]), "%s: element %d = %g, expected %g", name, i,
          static_cast<double>(out[i]), static_cast<double>(op(in[i])));
  }
  T* dresult;
  CHECK_CUDA(cudaMalloc(&dresult, sizeof(T)));
  dot<T><<<1, 1>>>(din, din, n < 50 ? n : 50, dresult);
  CHECK_CUDA(cudaGetLastError());
  T result;
  CHECK_CUDA(cudaMemcpy(&result, dresult, sizeof(T), cudaMemcpyDeviceToHost));
  T expected = 0;
  for (int i = 0; i < (n < 50 ? n : 50); ++i) expected += in[i] * in[i];
  CHECK(result == expected, "%s: dot = %g, expected %g", name, static_cast<double>(result),
        static_cast<double>(expected));
  CHECK_CUDA(cudaFree(din));
  CHECK_CUDA(cudaFree(dout));
  CHECK_CUDA(cudaFree(dresult));
  std::printf("%s ok\n", name);
}

int main() {
  check<float, Square<float>, 4>("float square x4", 1000, Square<float>());
  check<double, Square<double>, 2>("double square x2", 999, Square<double>());
  check<int, AddThree<int>, 1>("int add3", 500, AddThree<int>());
  check<short, Square<short>, 3>("short square x3", 301, Square<short>());
  check<unsigned char, AddThree<unsigned char>, 8>("uchar add3 x8", 777, AddThree<unsigned char>());
  check<long long, Square<long long>, 1>("int64 square", 260, Square<long long>());
  return pass();
}
