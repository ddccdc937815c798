// Shared by the toolkit-library programs of the GPU check (cuBLAS, cuBLASLt, cuFFT, cuRAND,
// cuSPARSE, cuSOLVER): each computes something with the library, checks it against a reference
// computed on the CPU, prints what it checked and ends with PASS (exit 0) or FAIL: ... (exit 1).
// They link the machine's shared toolkit libraries (the static ones are hundreds of MiB).
#pragma once

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "self_check.h"

// Fails unless a library call returns its success status (CUBLAS_STATUS_SUCCESS, ...).
#define CHECK_STATUS(call, success)                                          \
  do {                                                                       \
    const auto check_status_ = (call);                                       \
    if (check_status_ != (success)) {                                        \
      FAIL("%s returned status %d", #call, static_cast<int>(check_status_)); \
    }                                                                        \
  } while (0)

inline std::vector<float> randomFloats(size_t count, unsigned seed) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(count);
  for (auto& v : values) v = uniform(generator);
  return values;
}

// Device memory for `count` values of T, freed when it goes out of scope.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t count) : count_(count) {
    CHECK_CUDA(cudaMalloc(&data_, count * sizeof(T)));
  }
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) { upload(host); }
  ~DeviceArray() { cudaFree(data_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* get() const { return data_; }
  void upload(const std::vector<T>& host) {
    CHECK_CUDA(cudaMemcpy(data_, host.data(), count_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> host(count_);
    CHECK_CUDA(cudaMemcpy(host.data(), data_, count_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  T* data_ = nullptr;
  size_t count_;
};

// Column-major C = alpha * A(m x k) * B(k x n) + beta * C in double, and for every entry the sum
// of |terms|, the scale a rounding error bound grows with.
struct GemmReference {
  std::vector<double> value, magnitude;
};

template <typename TA, typename TB, typename TC>
GemmReference referenceGemm(int m, int n, int k, double alpha, const std::vector<TA>& a,
                            const std::vector<TB>& b, double beta, const std::vector<TC>& c) {
  GemmReference ref{std::vector<double>(size_t(m) * n), std::vector<double>(size_t(m) * n)};
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < m; ++i) {
      double sum = 0, magnitude = 0;
      for (int p = 0; p < k; ++p) {
        const double term =
            double(float(a[size_t(p) * m + i])) * double(float(b[size_t(j) * k + p]));
        sum += term;
        magnitude += std::fabs(term);
      }
      const double old = double(float(c[size_t(j) * m + i]));
      ref.value[size_t(j) * m + i] = alpha * sum + beta * old;
      ref.magnitude[size_t(j) * m + i] = std::fabs(alpha) * magnitude + std::fabs(beta * old);
    }
  }
  return ref;
}

// Every entry within relativeBound * magnitude (+ a tiny absolute floor) of the reference.
inline void checkAgainstReference(const char* what, const std::vector<float>& got,
                                  const GemmReference& ref, double relativeBound) {
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double error = std::fabs(double(got[i]) - ref.value[i]) / (ref.magnitude[i] + 1e-6);
    if (!(error <= relativeBound)) {
      FAIL("%s: entry %zu is %.7g, the reference %.7g (error %.3g of the magnitude, bound %.3g)",
           what, i, double(got[i]), ref.value[i], error, relativeBound);
    }
    if (error > worst) worst = error;
  }
  std::printf("%s: %zu entries within %.3g of the CPU reference (worst %.3g)\n", what, got.size(),
              relativeBound, worst);
}
