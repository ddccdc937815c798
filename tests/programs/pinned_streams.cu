// Page-locked host memory (cudaMallocHost, cudaHostAlloc, cudaHostRegister) and several streams
// copying distinct chunks asynchronously: host -> device on one stream, device -> device and
// device -> host on others, ordered with events. Checks stream queries, pointer attributes and
// the data.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "self_check.h"

namespace {

constexpr int kStreams = 4;
constexpr size_t kChunks = 16;
constexpr size_t kChunkBytes = (1u << 20) + 257;  // odd, so chunks start at odd offsets
constexpr size_t kTotal = kChunks * kChunkBytes;

unsigned char patternByte(size_t i) {
  return static_cast<unsigned char>((i * 7919u) ^ (i >> 9) ^ 0x5C);
}

void expectHostPointer(const void* p, const char* what) {
  cudaPointerAttributes attributes;
  CHECK_CUDA(cudaPointerGetAttributes(&attributes, p));
  CHECK(attributes.type == cudaMemoryTypeHost, "%s: pointer type %d, expected host", what,
        static_cast<int>(attributes.type));
}

// A status from cudaStreamQuery while work may still be queued.
void expectQueryStatus(cudaStream_t stream) {
  const cudaError_t status = cudaStreamQuery(stream);
  CHECK(status == cudaSuccess || status == cudaErrorNotReady,
        "cudaStreamQuery on a busy stream returned %s", cudaGetErrorName(status));
  if (status == cudaErrorNotReady) {
    // cudaErrorNotReady is not an error the runtime records.
    CHECK(cudaGetLastError() == cudaSuccess, "cudaErrorNotReady was recorded as last error");
  }
}

}  // namespace

int main() {
  unsigned char* source = nullptr;  // cudaMallocHost
  unsigned char* middle = nullptr;  // cudaHostAlloc (portable)
  CHECK_CUDA(cudaMallocHost(&source, kTotal));
  CHECK_CUDA(cudaHostAlloc(&middle, kTotal, cudaHostAllocPortable));
  // Ordinary memory registered afterwards.
  const size_t registeredBytes = (kTotal + 4095) / 4096 * 4096;
  auto* registered = static_cast<unsigned char*>(std::aligned_alloc(4096, registeredBytes));
  CHECK(registered != nullptr, "aligned_alloc failed");
  CHECK_CUDA(cudaHostRegister(registered, registeredBytes, cudaHostRegisterDefault));
  expectHostPointer(source, "cudaMallocHost");
  expectHostPointer(middle, "cudaHostAlloc");
  expectHostPointer(registered, "cudaHostRegister");
  unsigned int flags = 0;
  CHECK_CUDA(cudaHostGetFlags(&flags, middle));
  CHECK((flags & cudaHostAllocPortable) != 0, "cudaHostGetFlags gave 0x%x without Portable", flags);

  for (size_t i = 0; i < kTotal; ++i) source[i] = patternByte(i);
  std::memset(middle, 0, kTotal);
  std::memset(registered, 0, registeredBytes);

  unsigned char* deviceA = nullptr;
  unsigned char* deviceB = nullptr;
  CHECK_CUDA(cudaMalloc(&deviceA, kTotal));
  CHECK_CUDA(cudaMalloc(&deviceB, kTotal));
  cudaPointerAttributes attributes;
  CHECK_CUDA(cudaPointerGetAttributes(&attributes, deviceA + 1));
  CHECK(attributes.type == cudaMemoryTypeDevice, "device pointer type %d",
        static_cast<int>(attributes.type));

  cudaStream_t streams[kStreams];
  for (int s = 0; s < kStreams; ++s) {
    CHECK_CUDA(s % 2 == 0 ? cudaStreamCreate(&streams[s])
                          : cudaStreamCreateWithFlags(&streams[s], cudaStreamNonBlocking));
  }

  // Chunk c: H2D on stream c, then D2D and D2H on stream c+1, ordered by an event.
  std::vector<cudaEvent_t> uploaded(kChunks);
  for (size_t c = 0; c < kChunks; ++c) {
    const size_t offset = c * kChunkBytes;
    cudaStream_t upload = streams[c % kStreams];
    cudaStream_t download = streams[(c + 1) % kStreams];
    CHECK_CUDA(cudaEventCreateWithFlags(&uploaded[c], cudaEventDisableTiming));
    CHECK_CUDA(cudaMemcpyAsync(deviceA + offset, source + offset, kChunkBytes,
                               cudaMemcpyHostToDevice, upload));
    CHECK_CUDA(cudaEventRecord(uploaded[c], upload));
    CHECK_CUDA(cudaStreamWaitEvent(download, uploaded[c], 0));
    CHECK_CUDA(cudaMemcpyAsync(deviceB + offset, deviceA + offset, kChunkBytes,
                               cudaMemcpyDeviceToDevice, download));
    // Even chunks come back into cudaHostAlloc memory, odd ones into registered memory.
    unsigned char* destination = (c % 2 == 0 ? middle : registered) + offset;
    CHECK_CUDA(cudaMemcpyAsync(destination, deviceB + offset, kChunkBytes, cudaMemcpyDeviceToHost,
                               download));
    expectQueryStatus(download);
  }
  for (int s = 0; s < kStreams; ++s) {
    CHECK_CUDA(cudaStreamSynchronize(streams[s]));
    CHECK_CUDA(cudaStreamQuery(streams[s]));  // idle after synchronize
  }
  CHECK_CUDA(cudaDeviceSynchronize());

  for (size_t c = 0; c < kChunks; ++c) {
    const unsigned char* destination = c % 2 == 0 ? middle : registered;
    for (size_t i = c * kChunkBytes; i < (c + 1) * kChunkBytes; ++i) {
      CHECK(destination[i] == patternByte(i), "chunk %zu byte %zu is 0x%02x, expected 0x%02x", c, i,
            destination[i], patternByte(i));
    }
    // The other buffer never received this chunk.
    const unsigned char* other = c % 2 == 0 ? registered : middle;
    CHECK(other[c * kChunkBytes] == 0 && other[(c + 1) * kChunkBytes - 1] == 0,
          "chunk %zu landed in the wrong host buffer", c);
  }
  std::printf("%zu chunks of %zu bytes over %d streams ok\n", kChunks, kChunkBytes, kStreams);

  // Synchronous copies from and into pinned memory, and the default stream.
  CHECK_CUDA(cudaMemcpy(deviceA, middle, kChunkBytes, cudaMemcpyHostToDevice));
  std::memset(source, 0, kChunkBytes);
  CHECK_CUDA(cudaMemcpyAsync(source, deviceA, kChunkBytes, cudaMemcpyDeviceToHost, 0));
  CHECK_CUDA(cudaStreamSynchronize(0));
  CHECK(std::memcmp(source, middle, kChunkBytes) == 0, "default-stream copy mismatch");
  std::printf("default stream copies ok\n");

  for (auto event : uploaded) CHECK_CUDA(cudaEventDestroy(event));
  for (auto stream : streams) CHECK_CUDA(cudaStreamDestroy(stream));
  CHECK_CUDA(cudaFree(deviceA));
  CHECK_CUDA(cudaFree(deviceB));
  CHECK_CUDA(cudaHostUnregister(registered));
  std::free(registered);
  CHECK_CUDA(cudaFreeHost(middle));
  CHECK_CUDA(cudaFreeHost(source));
  return pass();
}
