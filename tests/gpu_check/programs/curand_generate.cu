// cuRAND: the device generator's uniform and normal numbers match the host generator's (the same
// algorithm, seed and order run on the CPU), and their statistics are right.
#include <curand.h>

#include "toolkit_check.h"

std::vector<float> generate(bool onDevice, bool normal, size_t count) {
  curandGenerator_t generator;
  if (onDevice) {
    CHECK_STATUS(curandCreateGenerator(&generator, CURAND_RNG_PSEUDO_PHILOX4_32_10),
                 CURAND_STATUS_SUCCESS);
  } else {
    CHECK_STATUS(curandCreateGeneratorHost(&generator, CURAND_RNG_PSEUDO_PHILOX4_32_10),
                 CURAND_STATUS_SUCCESS);
  }
  CHECK_STATUS(curandSetPseudoRandomGeneratorSeed(generator, 1234ull), CURAND_STATUS_SUCCESS);
  std::vector<float> values(count);
  if (onDevice) {
    DeviceArray<float> buffer(count);
    if (normal) {
      CHECK_STATUS(curandGenerateNormal(generator, buffer.get(), count, 0.0f, 1.0f),
                   CURAND_STATUS_SUCCESS);
    } else {
      CHECK_STATUS(curandGenerateUniform(generator, buffer.get(), count), CURAND_STATUS_SUCCESS);
    }
    CHECK_CUDA(cudaDeviceSynchronize());
    values = buffer.download();
  } else if (normal) {
    CHECK_STATUS(curandGenerateNormal(generator, values.data(), count, 0.0f, 1.0f),
                 CURAND_STATUS_SUCCESS);
  } else {
    CHECK_STATUS(curandGenerateUniform(generator, values.data(), count), CURAND_STATUS_SUCCESS);
  }
  CHECK_STATUS(curandDestroyGenerator(generator), CURAND_STATUS_SUCCESS);
  return values;
}

void checkDistribution(const char* what, const std::vector<float>& v, double mean,
                       double variance) {
  double sum = 0, squares = 0;
  for (float x : v) sum += x;
  const double m = sum / v.size();
  for (float x : v) squares += (x - m) * (x - m);
  const double var = squares / v.size();
  CHECK(std::fabs(m - mean) < 0.01 && std::fabs(var - variance) < 0.01 * (variance + 0.1),
        "%s: mean %.5f, variance %.5f (expected %.5f, %.5f)", what, m, var, mean, variance);
  std::printf("%s: %zu values, mean %.5f, variance %.5f\n", what, v.size(), m, var);
}

int main() {
  const size_t count = 1 << 20;
  const auto uniform = generate(true, false, count);
  for (float x : uniform) CHECK(x > 0.0f && x <= 1.0f, "uniform value %g outside (0, 1]", x);
  checkDistribution("curandGenerateUniform", uniform, 0.5, 1.0 / 12.0);
  const auto normal = generate(true, true, count);
  checkDistribution("curandGenerateNormal", normal, 0.0, 1.0);

  const auto hostUniform = generate(false, false, count);
  const auto hostNormal = generate(false, true, count);
  size_t differ = 0;
  for (size_t i = 0; i < count; ++i) {
    if (std::fabs(uniform[i] - hostUniform[i]) > 1e-6f) ++differ;
    if (std::fabs(normal[i] - hostNormal[i]) > 1e-4f * (1.0f + std::fabs(hostNormal[i]))) ++differ;
  }
  CHECK(differ == 0, "%zu of %zu device values differ from the host generator's", differ,
        2 * count);
  std::printf("device and host generators agree on %zu values\n", 2 * count);
  return pass();
}
