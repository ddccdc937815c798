// Device memsets through the runtime (cudaMemset, cudaMemsetAsync) and the driver API
// (cuMemsetD8/D16/D32 and their Async forms) on the runtime's current context. Each fill is read
// back and checked element by element, together with the bytes around it. Pinned host memory is
// memset like device memory, in stream order.
#include <cuda.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "driver_check.h"

namespace {

constexpr unsigned char kBackground = 0x3C;

// A device buffer pre-filled with kBackground, read back whole after each fill.
struct Buffer {
  unsigned char* device = nullptr;
  size_t size = 0;

  explicit Buffer(size_t bytes) : size(bytes) {
    CHECK_CUDA(cudaMalloc(&device, size));
    CHECK_CUDA(cudaMemset(device, kBackground, size));
  }
  ~Buffer() { cudaFree(device); }

  std::vector<unsigned char> read() const {
    std::vector<unsigned char> host(size);
    CHECK_CUDA(cudaMemcpy(host.data(), device, size, cudaMemcpyDeviceToHost));
    return host;
  }
};

// Checks that [offset, offset + count * elementSize) holds `element` repeated (little-endian)
// and every other byte is still kBackground.
void expectFill(const Buffer& buffer, size_t offset, size_t count, size_t elementSize,
                uint32_t element, const char* what) {
  const std::vector<unsigned char> host = buffer.read();
  const size_t end = offset + count * elementSize;
  for (size_t i = 0; i < host.size(); ++i) {
    unsigned char expected = kBackground;
    if (i >= offset && i < end) {
      expected = static_cast<unsigned char>(element >> (8 * ((i - offset) % elementSize)));
    }
    CHECK(host[i] == expected, "%s (offset %zu, %zu elements): byte %zu is 0x%02x, expected 0x%02x",
          what, offset, count, i, host[i], expected);
  }
  std::printf("%s offset=%zu count=%zu ok\n", what, offset, count);
}

CUdeviceptr asDriverPointer(const unsigned char* p) { return reinterpret_cast<CUdeviceptr>(p); }

}  // namespace

int main() {
  CHECK_CUDA(cudaSetDevice(0));
  CHECK_CUDA(cudaFree(nullptr));  // creates the primary context the driver calls below use
  CUcontext context = nullptr;
  CHECK_CU(cuCtxGetCurrent(&context));
  CHECK(context != nullptr, "no current context after cudaFree(0)");

  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));

  const size_t sizes[] = {1, 7, 4096, 65537, (3u << 20) + 1};
  for (size_t size : sizes) {
    Buffer buffer(size + 64);

    CHECK_CUDA(cudaMemset(buffer.device + 3, 0xA5, size));
    expectFill(buffer, 3, size, 1, 0xA5, "cudaMemset");

    // Only the low byte of the value is used (a fresh buffer: the fill above must not show).
    Buffer lowByte(size + 64);
    CHECK_CUDA(cudaMemset(lowByte.device + 1, 0x15A, size));
    expectFill(lowByte, 1, size, 1, 0x5A, "cudaMemset(0x15A)");

    Buffer async(size + 64);
    CHECK_CUDA(cudaMemsetAsync(async.device + 5, 0x81, size, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    expectFill(async, 5, size, 1, 0x81, "cudaMemsetAsync");

    Buffer d8(size + 64);
    CHECK_CU(cuMemsetD8(asDriverPointer(d8.device) + 7, 0xC3, size));
    expectFill(d8, 7, size, 1, 0xC3, "cuMemsetD8");

    // D16 and D32 need 2- and 4-byte aligned destinations; counts are in elements.
    Buffer d16(2 * size + 64);
    CHECK_CU(cuMemsetD16(asDriverPointer(d16.device) + 2, 0xBEEF, size));
    expectFill(d16, 2, size, 2, 0xBEEF, "cuMemsetD16");

    Buffer d32(4 * size + 64);
    CHECK_CU(cuMemsetD32(asDriverPointer(d32.device) + 12, 0xDEADBEEF, size));
    expectFill(d32, 12, size, 4, 0xDEADBEEF, "cuMemsetD32");

    Buffer d8Async(size + 64);
    Buffer d16Async(2 * size + 64);
    Buffer d32Async(4 * size + 64);
    const CUstream driverStream = stream;
    CHECK_CU(cuMemsetD8Async(asDriverPointer(d8Async.device) + 9, 0x17, size, driverStream));
    CHECK_CU(cuMemsetD16Async(asDriverPointer(d16Async.device) + 6, 0x1234, size, driverStream));
    CHECK_CU(
        cuMemsetD32Async(asDriverPointer(d32Async.device) + 4, 0x89ABCDEF, size, driverStream));
    CHECK_CU(cuStreamSynchronize(driverStream));
    expectFill(d8Async, 9, size, 1, 0x17, "cuMemsetD8Async");
    expectFill(d16Async, 6, size, 2, 0x1234, "cuMemsetD16Async");
    expectFill(d32Async, 4, size, 4, 0x89ABCDEF, "cuMemsetD32Async");
  }

  // A zero-length memset is a valid no-op.
  Buffer untouched(32);
  CHECK_CUDA(cudaMemset(untouched.device + 1, 0, 0));
  expectFill(untouched, 0, 0, 1, 0, "zero-length cudaMemset");

  // Pinned host memory is addressable like device memory under unified addressing: a memset of
  // it lands in stream order, after the copy queued before it (XLA's autotuner memsets so).
  {
    const size_t n = 4096;
    uint32_t* pinned = nullptr;
    CHECK_CUDA(cudaMallocHost(&pinned, n * sizeof(uint32_t)));
    Buffer source(n * sizeof(uint32_t));
    CHECK_CUDA(cudaMemset(source.device, 0x11, n * sizeof(uint32_t)));
    CHECK_CUDA(cudaMemcpyAsync(pinned, source.device, n * sizeof(uint32_t), cudaMemcpyDeviceToHost,
                               stream));
    CHECK_CU(cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(pinned + 16), 0x5EED5EED, 8,
                              static_cast<CUstream>(stream)));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    for (size_t i = 0; i < n; ++i) {
      const uint32_t want = i >= 16 && i < 24 ? 0x5EED5EEDu : 0x11111111u;
      CHECK(pinned[i] == want, "pinned[%zu] = %#x after the memset, expected %#x", i, pinned[i],
            want);
    }
    CHECK_CUDA(cudaFreeHost(pinned));
    std::printf("memset of pinned host memory ok\n");
  }

  CHECK_CUDA(cudaStreamDestroy(stream));
  return pass();
}
