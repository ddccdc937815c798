// cuFFT: a batched complex-to-complex forward transform against a direct DFT on the CPU, then the
// inverse transform back to the input (times the length).
#include <cufft.h>

#include <complex>

#include "toolkit_check.h"

int main() {
  const int length = 1024, batch = 4;
  const auto random = randomFloats(size_t(2) * length * batch, 10);
  std::vector<cufftComplex> input(size_t(length) * batch);
  for (size_t i = 0; i < input.size(); ++i) input[i] = {random[2 * i], random[2 * i + 1]};

  cufftHandle plan;
  CHECK_STATUS(cufftPlan1d(&plan, length, CUFFT_C2C, batch), CUFFT_SUCCESS);
  DeviceArray<cufftComplex> data(input);
  CHECK_STATUS(cufftExecC2C(plan, data.get(), data.get(), CUFFT_FORWARD), CUFFT_SUCCESS);
  CHECK_CUDA(cudaDeviceSynchronize());
  const std::vector<cufftComplex> spectrum = data.download();

  const double pi = std::acos(-1.0);
  double worst = 0;
  for (int b = 0; b < batch; ++b) {
    for (int f = 0; f < length; ++f) {
      std::complex<double> sum = 0;
      for (int t = 0; t < length; ++t) {
        const auto& x = input[size_t(b) * length + t];
        sum += std::complex<double>(x.x, x.y) *
               std::polar(1.0, -2.0 * pi * double((size_t(f) * t) % length) / length);
      }
      const auto& got = spectrum[size_t(b) * length + f];
      worst = std::max(worst, std::abs(std::complex<double>(got.x, got.y) - sum));
    }
  }
  // Inputs in [-1, 1]: each output has magnitude ~ sqrt(length); fp32 FFT error ~ 1e-6 * that *
  // log.
  CHECK(worst < 1e-3, "forward FFT differs from the DFT by %.3g", worst);
  std::printf("cufftExecC2C forward %d x %d: worst difference from the DFT %.3g\n", batch, length,
              worst);

  CHECK_STATUS(cufftExecC2C(plan, data.get(), data.get(), CUFFT_INVERSE), CUFFT_SUCCESS);
  CHECK_CUDA(cudaDeviceSynchronize());
  const std::vector<cufftComplex> back = data.download();
  double roundTrip = 0;
  for (size_t i = 0; i < back.size(); ++i) {
    roundTrip = std::max(roundTrip, double(std::fabs(back[i].x / length - input[i].x)));
    roundTrip = std::max(roundTrip, double(std::fabs(back[i].y / length - input[i].y)));
  }
  CHECK(roundTrip < 1e-5, "inverse FFT round trip differs by %.3g", roundTrip);
  std::printf("cufftExecC2C inverse: round trip within %.3g\n", roundTrip);
  CHECK_STATUS(cufftDestroy(plan), CUFFT_SUCCESS);
  return pass();
}
