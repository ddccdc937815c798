// Device printf. The program checks nothing itself: the test runner checks that the lines printed
// by the kernels reach this program's stdout, in order, before the lines the host prints after
// each synchronization. Formats: ints of several widths, unsigned, hex, char, strings, floats and
// doubles (floats are promoted), pointers' presence, and width/precision flags.
#include <cstdio>

#include "self_check.h"

__global__ void hello(int launch) {
  printf("launch %d block %d thread %d\n", launch, blockIdx.x, threadIdx.x);
}

__global__ void formats(const char* label) {
  const long long big = -1234567890123ll;
  const unsigned long long ubig = 18446744073709551615ull;
  printf("ints: %d %i %u %x %X %o %lld %llu\n", -42, 7, 4000000000u, 0xbeefu, 0xcafeu, 8, big,
         ubig);
  printf("chars: %c%c%c and string '%s' and %%\n", 'o', 'k', '!', label);
  printf("floats: %f %.3f %e %g %8.2f|%-8.1f|\n", 1.5f, 3.14159, 12345.678, 0.0001, -2.25, 7.0);
  printf("padding: [%5d] [%-5d] [%05d] [%+d]\n", 42, 42, 42, 42);
}

__global__ void serial(int count) {
  // One thread prints a numbered sequence: the order within a thread must be kept.
  for (int i = 0; i < count; ++i) printf("serial %d of %d\n", i, count);
}

int main() {
  hello<<<2, 2>>>(0);
  CHECK_CUDA(cudaDeviceSynchronize());
  std::printf("host: after launch 0\n");
  std::fflush(stdout);

  char* label;
  CHECK_CUDA(cudaMalloc(&label, 16));
  CHECK_CUDA(cudaMemcpy(label, "device text", 12, cudaMemcpyHostToDevice));
  formats<<<1, 1>>>(label);
  CHECK_CUDA(cudaDeviceSynchronize());
  std::printf("host: after formats\n");
  std::fflush(stdout);

  serial<<<1, 1>>>(20);
  CHECK_CUDA(cudaDeviceSynchronize());
  std::printf("host: after serial\n");
  CHECK_CUDA(cudaFree(label));
  return pass();
}
