// Copies a buffer to the device and back in a loop for up to `argv[1]` seconds (default 60),
// checking every round trip. Prints RUNNING after the first round trip so a test knows calls are
// flowing; exits 1 with the CUDA error name on the first failed call, 0 when time is up.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

bool ok(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return true;
  std::fprintf(stderr, "copy_loop: %s failed: %s\n", what, cudaGetErrorName(status));
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = argc > 1 ? std::atof(argv[1]) : 60.0;
  constexpr size_t kBytes = 1u << 20;
  std::vector<unsigned char> host(kBytes), back(kBytes);
  void* device = nullptr;
  if (!ok(cudaMalloc(&device, kBytes), "cudaMalloc")) return 1;
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (unsigned round = 0; std::chrono::steady_clock::now() < end; ++round) {
    std::memset(host.data(), static_cast<int>(round & 0xff), kBytes);
    if (!ok(cudaMemcpy(device, host.data(), kBytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D")) {
      return 1;
    }
    if (!ok(cudaMemcpy(back.data(), device, kBytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H")) {
      return 1;
    }
    if (back != host) {
      std::fprintf(stderr, "copy_loop: round %u came back different\n", round);
      return 1;
    }
    if (round == 0) {
      std::printf("RUNNING\n");
      std::fflush(stdout);
    }
  }
  if (!ok(cudaFree(device), "cudaFree")) return 1;
  std::printf("PASS\n");
  return 0;
}
