// __managed__ variables through the runtime API: one address for host code and kernels. Host code
// reads an initialized variable before any launch, writes an array a kernel then changes, and reads
// the kernel's writes after cudaDeviceSynchronize, in a loop; the address is the same from
// cudaGetSymbolAddress and cudaPointerGetAttributes (managed); cudaMemcpyFromSymbol reads the same
// bytes. A variable of a second translation unit (managed_variables_second_unit.cu, a module of its
// own) works alongside.
#include <cstdint>

#include "self_check.h"

// The second translation unit's variable and kernel.
int* secondUnitTally();
void bumpSecondUnitTally(int by);
constexpr int kTallyCount = 64;

namespace {

constexpr int kCount = 3 * 1024 + 17;  // three pages and a bit of ints

}  // namespace

__managed__ int values[kCount];
__managed__ double factor = 1.5;
__managed__ unsigned launches;
__device__ int deviceOnly;

__global__ void scaleValues(int add) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < kCount) values[i] = static_cast<int>(values[i] * factor) + add;
  if (i == 0) {
    ++launches;
    deviceOnly = add;
  }
}

int main() {
  CHECK_CUDA(cudaSetDevice(0));
  // The initializer is there before any launch, and so is the zero of an uninitialized variable.
  CHECK(factor == 1.5, "factor reads %f before any launch", factor);
  CHECK(launches == 0, "launches reads %u before any launch", launches);

  for (int i = 0; i < kCount; ++i) values[i] = 2 * i;
  factor = 3.0;
  const unsigned blocks = (kCount + 255) / 256;
  scaleValues<<<blocks, 256>>>(1);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  for (int i = 0; i < kCount; ++i) {
    CHECK(values[i] == 6 * i + 1, "values[%d] is %d after the first kernel", i, values[i]);
  }
  CHECK(launches == 1, "launches is %u", launches);
  std::printf("host writes reach the kernel, the kernel's writes reach the host\n");

  // Again and again: each round the host changes a few elements and the factor.
  for (int round = 0; round < 6; ++round) {
    values[round * 600] = -round;
    factor = round % 2 ? 2.0 : 1.0;
    scaleValues<<<blocks, 256>>>(round);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaDeviceSynchronize());
    int expected = static_cast<int>(-round * factor) + round;
    CHECK(values[round * 600] == expected, "round %d: values[%d] is %d, expected %d", round,
          round * 600, values[round * 600], expected);
    CHECK(launches == 2u + round, "round %d: launches is %u", round, launches);
  }
  std::printf("six rounds of host writes, kernels and synchronization\n");

  // One address: the symbol's device address is the variable's host address.
  void* symbolAddress = nullptr;
  CHECK_CUDA(cudaGetSymbolAddress(&symbolAddress, values));
  CHECK(symbolAddress == static_cast<void*>(values), "cudaGetSymbolAddress %p, host address %p",
        symbolAddress, static_cast<void*>(values));
  size_t symbolSize = 0;
  CHECK_CUDA(cudaGetSymbolSize(&symbolSize, values));
  CHECK(symbolSize == sizeof(values), "cudaGetSymbolSize %zu", symbolSize);
  cudaPointerAttributes attributes{};
  CHECK_CUDA(cudaPointerGetAttributes(&attributes, values + 5));
  CHECK(attributes.type == cudaMemoryTypeManaged, "pointer type %d", attributes.type);
  CHECK(attributes.devicePointer == values + 5 && attributes.hostPointer == values + 5,
        "device and host pointers of a managed variable");
  int copied[4] = {};
  CHECK_CUDA(cudaMemcpyFromSymbol(copied, values, sizeof(copied), 700 * sizeof(int)));
  CHECK(copied[0] == values[700] && copied[3] == values[703], "cudaMemcpyFromSymbol");
  int fromDevice = 0;
  CHECK_CUDA(cudaMemcpyFromSymbol(&fromDevice, deviceOnly, sizeof(int)));
  CHECK(fromDevice == 5, "the __device__ variable is %d", fromDevice);
  // A copy into the variable is seen by host code as soon as it returns.
  const int replacement[2] = {-7, -8};
  CHECK_CUDA(cudaMemcpyToSymbol(values, replacement, sizeof(replacement), 10 * sizeof(int)));
  CHECK(values[10] == -7 && values[11] == -8, "cudaMemcpyToSymbol: %d %d", values[10], values[11]);
  std::printf("one address for host code, kernels and the symbol calls\n");

  // The second translation unit's variable.
  int* tally = secondUnitTally();
  for (int i = 0; i < kTallyCount; ++i) tally[i] = i;
  bumpSecondUnitTally(10);
  bumpSecondUnitTally(5);
  CHECK_CUDA(cudaDeviceSynchronize());
  for (int i = 0; i < kTallyCount; ++i) {
    CHECK(tally[i] == i + 15, "tally[%d] is %d", i, tally[i]);
  }
  CHECK(values[10] == -7, "the first unit's variable is untouched: %d", values[10]);
  std::printf("a __managed__ variable of a second translation unit\n");
  return pass();
}
