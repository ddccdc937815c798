// Managed memory through the runtime API: cudaMallocManaged memory written by host code, read and
// written by kernels, read back by host code after synchronization; several allocations, a write
// to one element of a page, several kernels between synchronizations, the synchronizing calls
// (device, stream, event), managed pointers in cudaMemcpy as either side, pointer attributes,
// prefetch, advice and range attributes as the device's CONCURRENT_MANAGED_ACCESS allows.
#include <cstdint>
#include <cstring>
#include <vector>

#include "self_check.h"

namespace {

constexpr size_t kCount = 1 << 18;  // 1 MiB of ints: 256 pages

__global__ void scale(int* data, size_t n, int factor) {
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n) data[i] *= factor;
}

__global__ void addInto(int* out, const int* a, const int* b, size_t n) {
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}

__global__ void increment(int* data, size_t n) {
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n) data[i] += 1;
}

unsigned blocks(size_t n) { return static_cast<unsigned>((n + 255) / 256); }

void checkAll(const int* data, size_t n, int (*expected)(size_t), const char* what) {
  for (size_t i = 0; i < n; ++i) {
    CHECK(data[i] == expected(i), "%s: element %zu is %d, expected %d", what, i, data[i],
          expected(i));
  }
}

}  // namespace

int main() {
  int device = 0;
  CHECK_CUDA(cudaSetDevice(device));
  int managed = 0, concurrent = -1;
  CHECK_CUDA(cudaDeviceGetAttribute(&managed, cudaDevAttrManagedMemory, device));
  CHECK_CUDA(cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, device));
  CHECK(managed == 1, "cudaDevAttrManagedMemory is %d", managed);
  CHECK(concurrent == 0 || concurrent == 1, "cudaDevAttrConcurrentManagedAccess is %d", concurrent);

  // Host init, kernel, synchronize, host read.
  int* a = nullptr;
  CHECK_CUDA(cudaMallocManaged(&a, kCount * sizeof(int)));
  for (size_t i = 0; i < kCount; ++i) a[i] = static_cast<int>(i);
  scale<<<blocks(kCount), 256>>>(a, kCount, 3);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  checkAll(
      a, kCount, [](size_t i) { return static_cast<int>(3 * i); }, "after scale");
  std::printf("host writes reach the kernel, its writes reach the host\n");

  // Several allocations at once, one of them of an odd size.
  int *b = nullptr, *c = nullptr;
  CHECK_CUDA(cudaMallocManaged(&b, kCount * sizeof(int)));
  CHECK_CUDA(cudaMallocManaged(&c, kCount * sizeof(int) + 12));
  for (size_t i = 0; i < kCount; ++i) b[i] = 1000;
  addInto<<<blocks(kCount), 256>>>(c, a, b, kCount);
  CHECK_CUDA(cudaDeviceSynchronize());
  checkAll(
      c, kCount, [](size_t i) { return static_cast<int>(3 * i + 1000); }, "c = a + b");
  std::printf("three allocations\n");

  // One element of one page written by the host; the rest of the page keeps the device's data.
  a[4097] = -5;
  scale<<<blocks(kCount), 256>>>(a, kCount, 2);
  CHECK_CUDA(cudaDeviceSynchronize());
  CHECK(a[4097] == -10, "partial page write: %d", a[4097]);
  CHECK(a[4096] == 6 * 4096 && a[4098] == 6 * 4098, "neighbours of a partial page write");
  CHECK(a[0] == 0 && a[kCount - 1] == static_cast<int>(6 * (kCount - 1)), "other pages");
  std::printf("a partial page write\n");

  // Several kernels between synchronizations, on a created stream, finished by an event.
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  for (size_t i = 0; i < kCount; ++i) b[i] = static_cast<int>(i % 1000);
  for (int k = 0; k < 3; ++k) increment<<<blocks(kCount), 256, 0, stream>>>(b, kCount);
  cudaEvent_t done;
  CHECK_CUDA(cudaEventCreate(&done));
  CHECK_CUDA(cudaEventRecord(done, stream));
  CHECK_CUDA(cudaEventSynchronize(done));
  checkAll(
      b, kCount, [](size_t i) { return static_cast<int>(i % 1000 + 3); }, "three kernels");
  increment<<<blocks(kCount), 256, 0, stream>>>(b, kCount);
  CHECK_CUDA(cudaStreamSynchronize(stream));
  CHECK(b[7] == 11, "after a stream synchronize: %d", b[7]);
  std::printf("several kernels between synchronizations\n");

  // Managed pointers in cudaMemcpy, as the host side and as the device side.
  std::vector<int> host(kCount);
  CHECK_CUDA(cudaMemcpy(host.data(), b, kCount * sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(host[7] == 11 && host[kCount - 1] == static_cast<int>((kCount - 1) % 1000 + 4),
        "managed source of a device-to-host copy");
  for (size_t i = 0; i < kCount; ++i) host[i] = static_cast<int>(7 * i);
  CHECK_CUDA(cudaMemcpy(a, host.data(), kCount * sizeof(int), cudaMemcpyHostToDevice));
  CHECK(a[100] == 700 && a[kCount - 1] == static_cast<int>(7 * (kCount - 1)),
        "managed destination of a host-to-device copy, read by the host at once");
  CHECK_CUDA(cudaMemcpy(c, a, kCount * sizeof(int), cudaMemcpyDefault));
  CHECK(c[5] == 35, "managed to managed copy: %d", c[5]);
  c[9] = 1234;  // the host's write must travel with the copy that reads it
  int* plainDevice = nullptr;
  CHECK_CUDA(cudaMalloc(&plainDevice, kCount * sizeof(int)));
  CHECK_CUDA(cudaMemcpy(plainDevice, c, kCount * sizeof(int), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(b, plainDevice, kCount * sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(b[9] == 1234 && b[10] == 70, "managed memory as the host side of copies: %d %d", b[9],
        b[10]);
  CHECK_CUDA(cudaFree(plainDevice));
  std::printf("managed pointers in cudaMemcpy\n");

  // Pointer attributes.
  cudaPointerAttributes attributes{};
  CHECK_CUDA(cudaPointerGetAttributes(&attributes, a + 10));
  CHECK(attributes.type == cudaMemoryTypeManaged, "pointer type %d", attributes.type);
  CHECK(attributes.devicePointer == a + 10 && attributes.hostPointer == a + 10,
        "managed pointer is both the host and the device pointer");

  // Prefetch, advice and range attributes.
  cudaMemLocation cpu{cudaMemLocationTypeHost, 0};
  cudaMemLocation gpu{cudaMemLocationTypeDevice, device};
  CHECK_CUDA(cudaMemPrefetchAsync(a, kCount * sizeof(int), cpu, 0, stream));
  int location = 0;
  CHECK_CUDA(cudaMemRangeGetAttribute(&location, sizeof(location),
                                      cudaMemRangeAttributeLastPrefetchLocation, a,
                                      kCount * sizeof(int)));
  CHECK(location == cudaCpuDeviceId, "last prefetch location %d", location);
  if (concurrent) {
    CHECK_CUDA(cudaMemPrefetchAsync(a, kCount * sizeof(int), gpu, 0, stream));
  } else {
    EXPECT_CUDA_ERROR(cudaMemPrefetchAsync(a, kCount * sizeof(int), gpu, 0, stream),
                      cudaErrorInvalidDevice);
    (void)cudaGetLastError();
  }
  CHECK_CUDA(cudaStreamSynchronize(stream));
  int readMostly = -1;
  CHECK_CUDA(cudaMemRangeGetAttribute(&readMostly, sizeof(readMostly),
                                      cudaMemRangeAttributeReadMostly, b, 4096));
  CHECK(readMostly == 0, "read mostly before advice: %d", readMostly);
  CHECK_CUDA(cudaMemAdvise(b, kCount * sizeof(int), cudaMemAdviseSetReadMostly, cpu));
  CHECK_CUDA(cudaMemRangeGetAttribute(&readMostly, sizeof(readMostly),
                                      cudaMemRangeAttributeReadMostly, b, 4096));
  CHECK(readMostly == 1, "read mostly after advice: %d", readMostly);
  CHECK_CUDA(cudaMemAdvise(b, kCount * sizeof(int), cudaMemAdviseSetPreferredLocation, cpu));
  int preferred = 0;
  CHECK_CUDA(cudaMemRangeGetAttribute(&preferred, sizeof(preferred),
                                      cudaMemRangeAttributePreferredLocation, b,
                                      kCount * sizeof(int)));
  CHECK(preferred == cudaCpuDeviceId, "preferred location %d", preferred);
  CHECK_CUDA(cudaMemAdvise(b, kCount * sizeof(int), cudaMemAdviseUnsetPreferredLocation, cpu));
  CHECK_CUDA(cudaMemRangeGetAttribute(&preferred, sizeof(preferred),
                                      cudaMemRangeAttributePreferredLocation, b, 4096));
  CHECK(preferred == cudaInvalidDeviceId, "preferred location after unset %d", preferred);
  CHECK_CUDA(cudaMemAdvise(b, 8192, cudaMemAdviseSetAccessedBy, cpu));
  int accessedBy[3] = {0, 0, 0};
  CHECK_CUDA(cudaMemRangeGetAttribute(accessedBy, sizeof(accessedBy),
                                      cudaMemRangeAttributeAccessedBy, b, 8192));
  CHECK(accessedBy[0] == cudaCpuDeviceId && accessedBy[1] == cudaInvalidDeviceId &&
            accessedBy[2] == cudaInvalidDeviceId,
        "accessed by %d %d %d", accessedBy[0], accessedBy[1], accessedBy[2]);
  // Data is unchanged by all of that.
  increment<<<blocks(kCount), 256, 0, stream>>>(b, kCount);
  CHECK_CUDA(cudaStreamSynchronize(stream));
  CHECK(b[9] == 1235, "after advice: %d", b[9]);
  // Plain device memory is not managed memory.
  int* notManaged = nullptr;
  CHECK_CUDA(cudaMalloc(&notManaged, 4096));
  EXPECT_CUDA_ERROR(cudaMemAdvise(notManaged, 4096, cudaMemAdviseSetReadMostly, cpu),
                    cudaErrorInvalidValue);
  (void)cudaGetLastError();
  CHECK_CUDA(cudaFree(notManaged));
  std::printf("prefetch, advice and range attributes\n");

  // Attaching to a stream.
  CHECK_CUDA(cudaStreamAttachMemAsync(stream, c, 0, cudaMemAttachSingle));
  scale<<<blocks(kCount), 256, 0, stream>>>(c, kCount, 2);
  CHECK_CUDA(cudaStreamSynchronize(stream));
  CHECK(c[5] == 70, "attached to a stream: %d", c[5]);
  CHECK_CUDA(cudaStreamAttachMemAsync(stream, c, 0, cudaMemAttachGlobal));

  CHECK_CUDA(cudaEventDestroy(done));
  CHECK_CUDA(cudaStreamDestroy(stream));
  CHECK_CUDA(cudaFree(a));
  CHECK_CUDA(cudaFree(b));
  CHECK_CUDA(cudaFree(c));
  // A new allocation after frees starts out usable again.
  int* d = nullptr;
  CHECK_CUDA(cudaMallocManaged(&d, 4096));
  d[0] = 41;
  increment<<<1, 1>>>(d, 1);
  CHECK_CUDA(cudaDeviceSynchronize());
  CHECK(d[0] == 42, "allocation after frees: %d", d[0]);
  CHECK_CUDA(cudaFree(d));
  return pass();
}
