// CUDA math library functions against the host's libm. Correctly rounded operations (sqrt, div,
// fma, rounding functions, fmod, float<->int conversions) must match exactly, except sqrt and
// div under -use_fast_math; approximations are checked against a double-precision reference with
// tolerances (looser for -use_fast_math and the __ intrinsics, as the PTX ISA allows).
#include <cmath>
#include <cstring>
#include <vector>

#include "self_check.h"

#ifdef __USE_FAST_MATH__
constexpr bool kFastMath = true;
#else
constexpr bool kFastMath = false;
#endif

constexpr int kFloatFunctions = 17;
constexpr int kDoubleFunctions = 8;
constexpr int kExactFunctions = 10;

__global__ void floatFunctions(const float* x, const float* y, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float a = x[i], b = y[i];
  float* o = out + i * kFloatFunctions;
  o[0] = expf(a * 0.125f);
  o[1] = logf(fabsf(a) + 0.5f);
  o[2] = sinf(a);
  o[3] = cosf(a);
  o[4] = tanhf(a * 0.25f);
  o[5] = powf(fabsf(a) + 0.5f, b * 0.25f);
  o[6] = atan2f(a, b);
  o[7] = erff(a * 0.1f);
  o[8] = log2f(fabsf(b) + 1.0f);
  o[9] = exp2f(b * 0.2f);
  o[10] = cbrtf(a);
  o[11] = hypotf(a, b);
  o[12] = rsqrtf(fabsf(b) + 0.25f);
  o[13] = __expf(a * 0.125f);
  o[14] = __fdividef(a, fabsf(b) + 1.0f);
  o[15] = __sinf(a * 0.1f);
  o[16] = log10f(fabsf(a) + 2.0f);
}

__global__ void doubleFunctions(const double* x, double* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const double a = x[i];
  double* o = out + i * kDoubleFunctions;
  o[0] = exp(a * 0.125);
  o[1] = log(fabs(a) + 0.5);
  o[2] = sin(a);
  o[3] = cos(a);
  o[4] = pow(fabs(a) + 0.5, 1.7);
  o[5] = atan(a);
  o[6] = sqrt(fabs(a));
  o[7] = tanh(a * 0.25);
}

__global__ void exactFunctions(const float* x, const float* y, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float a = x[i], b = y[i];
  float* o = out + i * kExactFunctions;
  o[0] = sqrtf(fabsf(a));
  o[1] = a / b;
  o[2] = fmaf(a, b, -a);
  o[3] = floorf(a * 0.3f);
  o[4] = ceilf(a * 0.3f);
  o[5] = truncf(a * 0.3f);
  o[6] = roundf(a * 0.5f);
  o[7] = fmodf(a, b);
  o[8] = static_cast<float>(static_cast<int>(a * 1000.0f));
  o[9] = fminf(a, b) + fmaxf(a, copysignf(1.5f, b));
}

__global__ void bigArguments(const float* x, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    out[2 * i] = sinf(x[i]);
    out[2 * i + 1] = cosf(x[i]);
  }
}

namespace {

bool close(double got, double want, double relative, double absolute) {
  if (std::isnan(want)) return std::isnan(got);
  return std::fabs(got - want) <= absolute + relative * std::fabs(want);
}

}  // namespace

int main() {
  const int n = 256;
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) {
    x[i] = -10.0f + 20.0f * static_cast<float>(i) / n;
    y[i] = 7.5f - static_cast<float>((i * 37) % 64) * 0.23f;
    if (y[i] == 0.0f) y[i] = 0.125f;
  }
  float *dx, *dy, *dout;
  CHECK_CUDA(cudaMalloc(&dx, n * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&dy, n * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&dout, n * kFloatFunctions * sizeof(float)));
  CHECK_CUDA(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  floatFunctions<<<n / 64, 64>>>(dx, dy, dout, n);
  CHECK_CUDA(cudaGetLastError());
  std::vector<float> out(n * kFloatFunctions);
  CHECK_CUDA(cudaMemcpy(out.data(), dout, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
  const char* names[kFloatFunctions] = {
      "expf",  "logf",  "sinf",   "cosf",   "tanhf",  "powf",       "atan2f", "erff",  "log2f",
      "exp2f", "cbrtf", "hypotf", "rsqrtf", "__expf", "__fdividef", "__sinf", "log10f"};
  for (int i = 0; i < n; ++i) {
    const double a = x[i], b = y[i];
    const double want[kFloatFunctions] = {std::exp(a * 0.125),
                                          std::log(std::fabs(a) + 0.5),
                                          std::sin(a),
                                          std::cos(a),
                                          std::tanh(a * 0.25),
                                          std::pow(std::fabs(a) + 0.5, b * 0.25),
                                          std::atan2(a, b),
                                          std::erf(a * 0.1),
                                          std::log2(std::fabs(b) + 1.0),
                                          std::exp2(b * 0.2),
                                          std::cbrt(a),
                                          std::hypot(a, b),
                                          1.0 / std::sqrt(std::fabs(b) + 0.25),
                                          std::exp(a * 0.125),
                                          a / (std::fabs(b) + 1.0),
                                          std::sin(a * 0.1),
                                          std::log10(std::fabs(a) + 2.0)};
    for (int f = 0; f < kFloatFunctions; ++f) {
      // Full-precision functions are within a few ulp (2^-23 ~ 1.2e-7); the intrinsics and
      // fast-math versions are within ~2^-21 absolute or a few ulp scaled by the exponent.
      const bool intrinsic = f >= 13 && f <= 15;
      const bool loose = kFastMath || intrinsic;
      // tanh.approx.f32 (fast-math tanhf) has a relative error bound of 2^-10.987.
      const double relative = kFastMath && f == 4 ? 1e-3 : loose ? 2e-5 : 1e-6;
      const double absolute = loose ? 1e-5 : 1e-6;
      const float got = out[i * kFloatFunctions + f];
      CHECK(close(got, want[f], relative, absolute), "%s(%g, %g) = %.9g, expected %.9g", names[f],
            x[i], y[i], got, want[f]);
    }
  }
  std::printf("%d float functions x %d arguments ok\n", kFloatFunctions, n);

  std::vector<double> xd(n);
  for (int i = 0; i < n; ++i) xd[i] = -20.0 + 40.0 * i / n + 1e-3;
  double *dxd, *doutd;
  CHECK_CUDA(cudaMalloc(&dxd, n * sizeof(double)));
  CHECK_CUDA(cudaMalloc(&doutd, n * kDoubleFunctions * sizeof(double)));
  CHECK_CUDA(cudaMemcpy(dxd, xd.data(), n * sizeof(double), cudaMemcpyHostToDevice));
  doubleFunctions<<<n / 32, 32>>>(dxd, doutd, n);
  CHECK_CUDA(cudaGetLastError());
  std::vector<double> outd(n * kDoubleFunctions);
  CHECK_CUDA(cudaMemcpy(outd.data(), doutd, outd.size() * sizeof(double), cudaMemcpyDeviceToHost));
  const char* dnames[kDoubleFunctions] = {"exp", "log",  "sin",  "cos",
                                          "pow", "atan", "sqrt", "tanh"};
  for (int i = 0; i < n; ++i) {
    const double a = xd[i];
    const double want[kDoubleFunctions] = {std::exp(a * 0.125),
                                           std::log(std::fabs(a) + 0.5),
                                           std::sin(a),
                                           std::cos(a),
                                           std::pow(std::fabs(a) + 0.5, 1.7),
                                           std::atan(a),
                                           std::sqrt(std::fabs(a)),
                                           std::tanh(a * 0.25)};
    for (int f = 0; f < kDoubleFunctions; ++f) {
      // libdevice's double functions are within 2 ulp (2^-52 ~ 2.2e-16); fast-math does not
      // touch double precision.
      const double got = outd[i * kDoubleFunctions + f];
      const bool exactSqrt = f == 6;
      CHECK(exactSqrt ? got == want[f] : close(got, want[f], 2e-15, 1e-300),
            "%s(%.17g) = %.17g, expected %.17g", dnames[f], a, got, want[f]);
    }
  }
  std::printf("%d double functions x %d arguments ok\n", kDoubleFunctions, n);

  float* dexact;
  CHECK_CUDA(cudaMalloc(&dexact, n * kExactFunctions * sizeof(float)));
  exactFunctions<<<n / 128, 128>>>(dx, dy, dexact, n);
  CHECK_CUDA(cudaGetLastError());
  std::vector<float> exact(n * kExactFunctions);
  CHECK_CUDA(
      cudaMemcpy(exact.data(), dexact, exact.size() * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) {
    const float a = x[i], b = y[i];
    // The host computes in float with no contraction (x86-64 without -mfma), so each value is the
    // correctly rounded IEEE result.
    volatile float product = a * 0.3f;
    const float want[kExactFunctions] = {std::sqrt(std::fabs(a)),
                                         a / b,
                                         std::fma(a, b, -a),
                                         std::floor(product),
                                         std::ceil(product),
                                         std::trunc(product),
                                         std::round(a * 0.5f),
                                         std::fmod(a, b),
                                         static_cast<float>(static_cast<int>(a * 1000.0f)),
                                         std::fmin(a, b) + std::fmax(a, std::copysign(1.5f, b))};
    for (int f = 0; f < kExactFunctions; ++f) {
      const float got = exact[i * kExactFunctions + f];
      const bool approximate = kFastMath && (f == 0 || f == 1);
      CHECK(approximate ? close(got, want[f], 1e-6, 1e-30) : got == want[f],
            "exact function %d of (%g, %g) = %.9g, expected %.9g", f, a, b, got, want[f]);
    }
  }
  std::printf("%d correctly rounded functions ok\n", kExactFunctions);

  // Huge arguments take libdevice's Payne-Hanek reduction (carry chains, local arrays).
  const std::vector<float> big = {1.0e6f, -3.0e7f, 123456.7f, 1.0e20f, 3.0e38f, -2.5e35f};
  const int m = static_cast<int>(big.size());
  float *dbig, *dbigOut;
  CHECK_CUDA(cudaMalloc(&dbig, m * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&dbigOut, 2 * m * sizeof(float)));
  CHECK_CUDA(cudaMemcpy(dbig, big.data(), m * sizeof(float), cudaMemcpyHostToDevice));
  bigArguments<<<1, 32>>>(dbig, dbigOut, m);
  CHECK_CUDA(cudaGetLastError());
  std::vector<float> bigOut(2 * m);
  CHECK_CUDA(
      cudaMemcpy(bigOut.data(), dbigOut, bigOut.size() * sizeof(float), cudaMemcpyDeviceToHost));
  if (!kFastMath) {  // __sinf of a huge argument is not meaningful
    for (int i = 0; i < m; ++i) {
      CHECK(close(bigOut[2 * i], std::sin(static_cast<double>(big[i])), 1e-6, 1e-7) &&
                close(bigOut[2 * i + 1], std::cos(static_cast<double>(big[i])), 1e-6, 1e-7),
            "sinf/cosf(%g) = %.9g/%.9g, expected %.9g/%.9g", big[i], bigOut[2 * i],
            bigOut[2 * i + 1], std::sin(static_cast<double>(big[i])),
            std::cos(static_cast<double>(big[i])));
    }
    std::printf("sinf/cosf with huge arguments ok\n");
  }
  CHECK_CUDA(cudaFree(dx));
  CHECK_CUDA(cudaFree(dy));
  CHECK_CUDA(cudaFree(dout));
  CHECK_CUDA(cudaFree(dxd));
  CHECK_CUDA(cudaFree(doutd));
  CHECK_CUDA(cudaFree(dexact));
  CHECK_CUDA(cudaFree(dbig));
  CHECK_CUDA(cudaFree(dbigOut));
  return pass();
}
