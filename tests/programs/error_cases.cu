// Errors the runtime must report, each followed by proof that the process still works: bogus
// device pointers, impossible allocations, invalid launch configurations and devices, and the
// error-name/string functions. None of these errors is sticky.
#include <cstdint>
#include <cstring>
#include <vector>

#include "self_check.h"

namespace {

__global__ void fill(int* out, int value) { out[threadIdx.x] = value; }

// A normal allocation, copy round trip and free must still succeed.
void expectStillWorking(const char* after) {
  CHECK(cudaGetLastError() == cudaSuccess, "after %s: an error was still pending", after);
  const size_t bytes = 4099;
  std::vector<unsigned char> in(bytes), out(bytes, 0);
  for (size_t i = 0; i < bytes; ++i) in[i] = static_cast<unsigned char>(i * 3 + 1);
  void* device = nullptr;
  CHECK_CUDA(cudaMalloc(&device, bytes));
  CHECK_CUDA(cudaMemcpy(device, in.data(), bytes, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(out.data(), device, bytes, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaFree(device));
  CHECK(in == out, "after %s: copy round trip corrupted data", after);
  CHECK_CUDA(cudaDeviceSynchronize());
  std::printf("still working after %s\n", after);
}

// Fails unless `status` is `expected`, and cudaGetLastError reports it exactly once.
void expectReported(cudaError_t status, cudaError_t expected, const char* what) {
  CHECK(status == expected, "%s returned %s, expected %s", what, cudaGetErrorName(status),
        cudaGetErrorName(expected));
  const cudaError_t peeked = cudaPeekAtLastError();
  CHECK(peeked == expected, "%s: cudaPeekAtLastError gave %s", what, cudaGetErrorName(peeked));
  const cudaError_t last = cudaGetLastError();
  CHECK(last == expected, "%s: cudaGetLastError gave %s", what, cudaGetErrorName(last));
  CHECK(cudaGetLastError() == cudaSuccess, "%s: cudaGetLastError did not reset", what);
  std::printf("%s -> %s ok\n", what, cudaGetErrorName(status));
}

}  // namespace

int main() {
  CHECK_CUDA(cudaFree(nullptr));  // cudaFree(NULL) is a no-op that initialises the runtime
  expectStillWorking("start");

  unsigned char host[16];
  const void* bogus = reinterpret_cast<const void*>(uintptr_t{0x10});
  expectReported(cudaMemcpy(host, bogus, sizeof(host), cudaMemcpyDeviceToHost),
                 cudaErrorInvalidValue, "cudaMemcpy D2H from 0x10");
  expectStillWorking("bogus cudaMemcpy");

  void* huge = nullptr;
  expectReported(cudaMalloc(&huge, size_t{1} << 50), cudaErrorMemoryAllocation,
                 "cudaMalloc(1 PiB)");
  expectStillWorking("1 PiB cudaMalloc");

  const cudaError_t freeStatus = cudaFree(const_cast<void*>(bogus));
  CHECK(freeStatus != cudaSuccess, "cudaFree(0x10) succeeded");
  CHECK(cudaGetLastError() == freeStatus, "cudaFree(0x10) error not recorded");
  std::printf("cudaFree(0x10) -> %s ok\n", cudaGetErrorName(freeStatus));
  expectStillWorking("bogus cudaFree");

  int* out = nullptr;
  CHECK_CUDA(cudaMalloc(&out, 2048 * sizeof(int)));
  fill<<<1, 2048>>>(out, 7);  // more threads per block than any device allows
  // Observed on driver 580.159.04, H200: more threads than a block may have is an invalid value.
  expectReported(cudaPeekAtLastError(), cudaErrorInvalidValue, "launch with 2048 threads");
  CHECK_CUDA(cudaFree(out));
  expectStillWorking("invalid launch configuration");

  int count = 0;
  CHECK_CUDA(cudaGetDeviceCount(&count));
  expectReported(cudaSetDevice(count), cudaErrorInvalidDevice, "cudaSetDevice(count)");
  expectStillWorking("invalid device");

  CHECK(std::strcmp(cudaGetErrorName(cudaErrorMemoryAllocation), "cudaErrorMemoryAllocation") == 0,
        "cudaGetErrorName(cudaErrorMemoryAllocation) = %s",
        cudaGetErrorName(cudaErrorMemoryAllocation));
  CHECK(std::strcmp(cudaGetErrorName(cudaErrorInvalidConfiguration),
                    "cudaErrorInvalidConfiguration") == 0,
        "cudaGetErrorName(cudaErrorInvalidConfiguration) wrong");
  CHECK(std::strcmp(cudaGetErrorName(cudaSuccess), "cudaSuccess") == 0, "cudaSuccess name");
  for (cudaError_t status : {cudaErrorInvalidValue, cudaErrorMemoryAllocation,
                             cudaErrorInvalidConfiguration, cudaErrorInvalidDevice}) {
    const char* text = cudaGetErrorString(status);
    CHECK(text != nullptr && std::strlen(text) > 0, "empty cudaGetErrorString(%d)",
          static_cast<int>(status));
    std::printf("%s: %s\n", cudaGetErrorName(status), text);
  }
  return pass();
}
