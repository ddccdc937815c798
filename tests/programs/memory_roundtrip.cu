// Copies patterns of many sizes (1 B ... 256 MiB) at odd offsets into device allocations:
// host -> device -> device -> host, and again with cudaMemcpyDefault (unified addressing). Checks
// every byte, and that the bytes around each copied range were not touched.
//
// GPUPOOL_TEST_MAX_COPY_BYTES, when set, leaves out the sizes above it and says so: the sanitizer
// builds (scripts/sanitizers.sh) set it to 32 MiB, since copying 256 MiB through instrumented
// code took over a minute per run there and a 16 MiB copy already goes through the same chunked
// paths.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "self_check.h"

namespace {

constexpr unsigned char kGuard = 0xE7;
constexpr size_t kGuardBytes = 64;  // checked on each side of a copied range

// Byte i of the pattern for a given seed; varies with both so that shifted or stale data shows.
unsigned char patternByte(size_t i, unsigned seed) {
  return static_cast<unsigned char>((i * 2654435761u + seed * 40503u + (i >> 11)) >> 7);
}

void fillPattern(std::vector<unsigned char>& bytes, unsigned seed) {
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = patternByte(i, seed);
}

void expectPattern(const std::vector<unsigned char>& bytes, unsigned seed, const char* what,
                   size_t size) {
  for (size_t i = 0; i < bytes.size(); ++i) {
    CHECK(bytes[i] == patternByte(i, seed), "%s of %zu bytes: byte %zu is 0x%02x, expected 0x%02x",
          what, size, i, bytes[i], patternByte(i, seed));
  }
}

// Checks the guard bytes just before `offset` and just after `offset + size` in `base`.
void expectGuards(const unsigned char* base, size_t offset, size_t size, size_t allocation,
                  const char* what) {
  const size_t before = offset < kGuardBytes ? offset : kGuardBytes;
  const size_t afterStart = offset + size;
  const size_t after =
      allocation - afterStart < kGuardBytes ? allocation - afterStart : kGuardBytes;
  unsigned char guard[2 * kGuardBytes];
  CHECK_CUDA(cudaMemcpy(guard, base + offset - before, before, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(guard + before, base + afterStart, after, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < before + after; ++i) {
    CHECK(guard[i] == kGuard, "%s of %zu bytes at offset %zu wrote outside its range", what, size,
          offset);
  }
}

void roundTrip(size_t size, size_t offsetA, size_t offsetB, unsigned seed) {
  const size_t allocation = size + offsetA + offsetB + 2 * kGuardBytes;
  unsigned char* a = nullptr;
  unsigned char* b = nullptr;
  CHECK_CUDA(cudaMalloc(&a, allocation));
  CHECK_CUDA(cudaMalloc(&b, allocation));
  CHECK_CUDA(cudaMemset(a, kGuard, allocation));
  CHECK_CUDA(cudaMemset(b, kGuard, allocation));

  std::vector<unsigned char> source(size);
  fillPattern(source, seed);
  std::vector<unsigned char> result(size, 0);

  // Explicit directions.
  CHECK_CUDA(cudaMemcpy(a + offsetA, source.data(), size, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(b + offsetB, a + offsetA, size, cudaMemcpyDeviceToDevice));
  CHECK_CUDA(cudaMemcpy(result.data(), b + offsetB, size, cudaMemcpyDeviceToHost));
  expectPattern(result, seed, "H2D/D2D/D2H", size);
  expectGuards(a, offsetA, size, allocation, "H2D");
  expectGuards(b, offsetB, size, allocation, "D2D");

  // cudaMemcpyDefault infers each direction from the pointers.
  const unsigned seed2 = seed + 1;
  fillPattern(source, seed2);
  CHECK_CUDA(cudaMemcpy(b + offsetB, source.data(), size, cudaMemcpyDefault));
  CHECK_CUDA(cudaMemcpy(a + offsetA, b + offsetB, size, cudaMemcpyDefault));
  std::fill(result.begin(), result.end(), 0);
  CHECK_CUDA(cudaMemcpy(result.data(), a + offsetA, size, cudaMemcpyDefault));
  expectPattern(result, seed2, "cudaMemcpyDefault round trip", size);
  expectGuards(a, offsetA, size, allocation, "cudaMemcpyDefault D2D");
  expectGuards(b, offsetB, size, allocation, "cudaMemcpyDefault H2D");

  CHECK_CUDA(cudaFree(a));
  CHECK_CUDA(cudaFree(b));
  std::printf("roundtrip size=%zu offsets=%zu,%zu ok\n", size, offsetA, offsetB);
}

}  // namespace

int main() {
  const size_t sizes[] = {1, 3, 4095, 65537, (1u << 20) + 13, (16u << 20) + 5, 256u << 20};
  const size_t offsets[][2] = {{1, 3}, {3, 1}, {7, 5}, {5, 11}, {13, 1}, {1, 7}, {3, 3}};
  size_t largest = SIZE_MAX;
  if (const char* cap = std::getenv("GPUPOOL_TEST_MAX_COPY_BYTES")) {
    char* end = nullptr;
    largest = std::strtoull(cap, &end, 10);
    CHECK(end != cap && *end == '\0', "GPUPOOL_TEST_MAX_COPY_BYTES=%s is not a byte count", cap);
  }
  unsigned seed = 1;
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
    if (sizes[i] > largest) {
      std::printf("left out: %zu bytes (GPUPOOL_TEST_MAX_COPY_BYTES=%zu)\n", sizes[i], largest);
      continue;
    }
    roundTrip(sizes[i], kGuardBytes + offsets[i][0], kGuardBytes + offsets[i][1], seed);
    seed += 2;
  }
  // Offsets below the guard width too (the guard then starts at the allocation).
  roundTrip(4095, 1, 0, seed);
  return pass();
}
