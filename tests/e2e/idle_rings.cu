// Fills both shm rings (8 MiB of pageable memory to the device and back, checked), prints COPIED,
// waits for a line on stdin while its session sits idle, then copies and checks again and prints
// PASS: a test looks at the server's rings meanwhile. Any CUDA error or wrong byte prints FAIL and
// exits 1.
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

namespace {

bool ok(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return true;
  std::printf("FAIL: %s: %s\n", what, cudaGetErrorName(status));
  return false;
}

// One round trip of `bytes` of pattern `seed` through device memory at `device`.
bool roundTrip(void* device, size_t bytes, unsigned seed) {
  std::vector<unsigned char> out(bytes), back(bytes);
  for (size_t i = 0; i < bytes; ++i) out[i] = static_cast<unsigned char>(i * 131 + seed);
  if (!ok(cudaMemcpy(device, out.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D"))
    return false;
  if (!ok(cudaMemcpy(back.data(), device, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H"))
    return false;
  for (size_t i = 0; i < bytes; ++i) {
    if (back[i] != out[i]) {
      std::printf("FAIL: byte %zu came back as %u, not %u\n", i, back[i], out[i]);
      return false;
    }
  }
  return true;
}

}  // namespace

int main() {
  constexpr size_t kBytes = 8u << 20;  // four times a default ring
  void* device = nullptr;
  if (!ok(cudaMalloc(&device, kBytes), "cudaMalloc")) return 1;
  if (!roundTrip(device, kBytes, 1)) return 1;
  std::printf("COPIED\n");
  std::fflush(stdout);
  char line[64];
  if (!std::fgets(line, sizeof line, stdin)) std::printf("stdin closed\n");
  if (!roundTrip(device, kBytes, 2)) return 1;
  if (!ok(cudaFree(device), "cudaFree")) return 1;
  std::printf("PASS\n");
  return 0;
}
