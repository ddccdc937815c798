// Host<->device copies of sizes around the server's staging chunk (argv[1] bytes): 1 B, chunk-1,
// chunk, chunk+1, 3.5 chunks and 64 MiB, at odd host and device offsets, synchronous and on
// streams with kernels in between. Every byte must round-trip, and each kernel must see the copy
// queued before it on its stream and be seen by the copy queued after it. Prints PASS, or the
// first mismatch and exits 1.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

// Adds 1 to each byte of [begin, end): the window around a chunk boundary of the copy.
__global__ void increment(unsigned char* bytes, size_t begin, size_t end) {
  size_t i = begin + blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < end) bytes[i] = static_cast<unsigned char>(bytes[i] + 1);
}

bool ok(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return true;
  std::fprintf(stderr, "staged_copies: %s failed: %s\n", what, cudaGetErrorName(status));
  return false;
}

// Mixed, so that no two chunks (or chunk-sized shifts) of the pattern are alike.
unsigned char patternByte(size_t index, size_t seed) {
  unsigned long long x = (index + seed * 0x100000001ull) * 0x9E3779B97F4A7C15ull;
  return static_cast<unsigned char>((x ^ (x >> 29)) >> 32);
}

void fill(unsigned char* host, size_t bytes, size_t seed) {
  for (size_t i = 0; i < bytes; ++i) host[i] = patternByte(i, seed);
}

// The first byte where `got` differs from the pattern (plus 1 inside [begin, end)), or -1.
long long firstMismatch(const unsigned char* got, size_t bytes, size_t seed, size_t begin,
                        size_t end) {
  for (size_t i = 0; i < bytes; ++i) {
    unsigned char want = patternByte(i, seed) + (i >= begin && i < end ? 1 : 0);
    if (got[i] != want) return static_cast<long long>(i);
  }
  return -1;
}

constexpr size_t kHostOffset = 5;    // host pointers off any alignment
constexpr size_t kDeviceOffset = 3;  // device pointers off any alignment
constexpr size_t kWindow = 8192;     // bytes the kernel touches on each side of a chunk boundary

}  // namespace

int main(int argc, char** argv) {
  size_t chunk = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : (4u << 20);
  const std::vector<size_t> sizes = {1, chunk - 1, chunk, chunk + 1, chunk * 7 / 2, 64u << 20};
  size_t largest = 64u << 20;
  for (size_t s : sizes) largest = s > largest ? s : largest;

  unsigned char* device = nullptr;
  unsigned char* pinned = nullptr;
  if (!ok(cudaMalloc(&device, largest + kDeviceOffset), "cudaMalloc")) return 1;
  if (!ok(cudaMallocHost(&pinned, largest + kHostOffset), "cudaMallocHost")) return 1;
  std::vector<unsigned char> source(largest + kHostOffset), back(largest + kHostOffset);
  cudaStream_t streams[2];
  for (auto& s : streams) {
    if (!ok(cudaStreamCreate(&s), "cudaStreamCreate")) return 1;
  }

  for (size_t round = 0; round < sizes.size(); ++round) {
    size_t bytes = sizes[round];
    unsigned char* dev = device + kDeviceOffset;

    // Synchronous, from and to pageable memory.
    fill(source.data() + kHostOffset, bytes, round);
    if (!ok(cudaMemcpy(dev, source.data() + kHostOffset, bytes, cudaMemcpyHostToDevice),
            "cudaMemcpy H2D")) {
      return 1;
    }
    if (!ok(cudaMemcpy(back.data() + kHostOffset, dev, bytes, cudaMemcpyDeviceToHost),
            "cudaMemcpy D2H")) {
      return 1;
    }
    if (long long at = firstMismatch(back.data() + kHostOffset, bytes, round, 0, 0); at >= 0) {
      std::fprintf(stderr, "staged_copies: sync copy of %zu bytes differs at byte %lld\n", bytes,
                   at);
      return 1;
    }

    // On a stream: copy in, a kernel across the last chunk boundary, copy out into pinned memory.
    // The other stream meanwhile copies its own pattern into the first bytes of a second round.
    cudaStream_t stream = streams[round % 2];
    size_t seed = round + 100;
    fill(source.data() + kHostOffset, bytes, seed);
    size_t boundary = bytes > chunk ? bytes / chunk * chunk : bytes / 2;
    size_t begin = boundary > kWindow ? boundary - kWindow : 0;
    size_t end = boundary + kWindow < bytes ? boundary + kWindow : bytes;
    if (!ok(cudaMemcpyAsync(dev, source.data() + kHostOffset, bytes, cudaMemcpyHostToDevice,
                            stream),
            "cudaMemcpyAsync H2D")) {
      return 1;
    }
    // The source may change once the call returned: the copy took its bytes already.
    fill(source.data() + kHostOffset, bytes, seed + 1);
    unsigned threads = 256;
    unsigned blocks = static_cast<unsigned>((end - begin + threads - 1) / threads);
    if (blocks) increment<<<blocks, threads, 0, stream>>>(dev, begin, end);
    if (!ok(cudaGetLastError(), "increment launch")) return 1;
    if (!ok(cudaMemcpyAsync(pinned + kHostOffset, dev, bytes, cudaMemcpyDeviceToHost, stream),
            "cudaMemcpyAsync D2H")) {
      return 1;
    }
    if (!ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize")) return 1;
    if (long long at = firstMismatch(pinned + kHostOffset, bytes, seed, begin, end); at >= 0) {
      std::fprintf(stderr,
                   "staged_copies: stream copy of %zu bytes (kernel on [%zu, %zu)) differs at "
                   "byte %lld\n",
                   bytes, begin, end, at);
      return 1;
    }
  }

  for (auto& s : streams) cudaStreamDestroy(s);
  if (!ok(cudaFreeHost(pinned), "cudaFreeHost") || !ok(cudaFree(device), "cudaFree")) return 1;
  std::printf("PASS\n");
  return 0;
}
