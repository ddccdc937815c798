// Device addresses are never host addresses of this process (unified addressing): a device
// allocation's range cannot be mapped as host memory while it lives, and where host memory already
// lies at the address a server would hand out next, the allocation gets another one, so unified
// copies and pointer queries never take that host memory for device memory. For cuMemAlloc,
// cuMemAllocAsync and cuMemAddressReserve.
//
// The next address is predicted from two allocations in a row (servers place them one after the
// other); where that address is already reserved in this process (the emu's window, a GPU
// driver's own reservation) no host memory can be put there and the second part has nothing to
// check. On the chained cuda backend (the real driver's addresses are gpupoold's, not this
// process's) it can: ChainedAddressTest checks that the client asked again.
#include <cuda.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "driver_check.h"

namespace {

constexpr size_t kBytes = 2 << 20;  // the VMM granularity, and whole pages everywhere

// Whether host memory can be mapped at [address, address + bytes) of this process: it maps it
// there (and keeps it) when it can.
void* mapHostAt(CUdeviceptr address, size_t bytes) {
  void* want = reinterpret_cast<void*>(address);
  void* got = mmap(want, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  if (got == want) return got;
  if (got != MAP_FAILED) munmap(got, bytes);  // a kernel that takes the flag as a hint
  return nullptr;
}

bool overlaps(CUdeviceptr a, size_t aBytes, CUdeviceptr b, size_t bBytes) {
  return a < b + bBytes && b < a + aBytes;
}

// Host memory at `host` (kBytes, filled with `fill`) is untouched, and is not device memory to
// pointer queries.
void checkHostMemoryStaysHost(const char* what, void* host, unsigned char fill) {
  const auto* bytes = static_cast<const unsigned char*>(host);
  for (size_t i = 0; i < kBytes; i += 4093) {
    CHECK(bytes[i] == fill, "%s: host memory at %p changed at byte %zu", what, host, i);
  }
  unsigned type = 0;
  CUresult status = cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                          reinterpret_cast<CUdeviceptr>(host));
  CHECK(
      status == CUDA_ERROR_INVALID_VALUE || (status == CUDA_SUCCESS && type == CU_MEMORYTYPE_HOST),
      "%s: host memory at %p is taken for memory of type %u (%s)", what, host, type,
      cuErrorName(status));
}

// A round trip through device memory at `device`, by unified copies from and to host memory.
void checkRoundTrip(const char* what, CUdeviceptr device) {
  std::vector<unsigned char> out(kBytes), back(kBytes);
  for (size_t i = 0; i < kBytes; ++i) out[i] = static_cast<unsigned char>(i * 7 + 3);
  CHECK_CU(cuMemcpy(device, reinterpret_cast<CUdeviceptr>(out.data()), kBytes));
  CHECK_CU(cuMemcpy(reinterpret_cast<CUdeviceptr>(back.data()), device, kBytes));
  CHECK(std::memcmp(out.data(), back.data(), kBytes) == 0, "%s: round trip differs", what);
}

// Allocates three times through `allocate`; host memory is put where the third would land when it
// can be. Frees through `release`.
template <typename Allocate, typename Release>
void checkAllocations(const char* what, Allocate allocate, Release release, bool roundTrip) {
  CUdeviceptr first = allocate(), second = allocate();
  CHECK(first != 0 && second != 0 && !overlaps(first, kBytes, second, kBytes),
        "%s: two allocations overlap", what);
  for (CUdeviceptr live : {first, second}) {
    void* host = mapHostAt(live, kBytes);
    CHECK(host == nullptr, "%s: host memory could be mapped at live device address %#llx", what,
          static_cast<unsigned long long>(live));
  }
  const CUdeviceptr next = second + (second - first);
  unsigned char fill = 0x5c;
  void* host = second > first ? mapHostAt(next, kBytes) : nullptr;
  if (host) std::memset(host, fill, kBytes);
  CUdeviceptr third = allocate();
  if (host) {
    CHECK(!overlaps(third, kBytes, next, kBytes),
          "%s: the allocation got %#llx, where host memory of this process lies", what,
          static_cast<unsigned long long>(third));
    checkHostMemoryStaysHost(what, host, fill);
    std::printf("%s: host memory put at the next address %#llx; the allocation got %#llx\n", what,
                static_cast<unsigned long long>(next), static_cast<unsigned long long>(third));
  } else {
    std::printf("%s: the next address is reserved in this process; no host memory can lie there\n",
                what);
  }
  if (roundTrip) checkRoundTrip(what, third);
  for (CUdeviceptr p : {first, second, third}) release(p);
  if (host) {
    checkHostMemoryStaysHost(what, host, fill);
    munmap(host, kBytes);
  }
}

}  // namespace

int main() {
  CHECK_CU(cuInit(0));
  CUdevice device = 0;
  CHECK_CU(cuDeviceGet(&device, 0));
  CUcontext context = nullptr;
  CHECK_CU(cuCtxCreate(&context, nullptr, 0, device));

  checkAllocations(
      "cuMemAlloc",
      [] {
        CUdeviceptr p = 0;
        CHECK_CU(cuMemAlloc(&p, kBytes));
        return p;
      },
      [](CUdeviceptr p) { CHECK_CU(cuMemFree(p)); }, true);

  int pools = 0;
  CHECK_CU(cuDeviceGetAttribute(&pools, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, device));
  if (pools) {
    CUstream stream = nullptr;
    CHECK_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    checkAllocations(
        "cuMemAllocAsync",
        [stream] {
          CUdeviceptr p = 0;
          CHECK_CU(cuMemAllocAsync(&p, kBytes, stream));
          CHECK_CU(cuStreamSynchronize(stream));
          return p;
        },
        [stream](CUdeviceptr p) { CHECK_CU(cuMemFreeAsync(p, stream)); }, true);
    CHECK_CU(cuStreamSynchronize(stream));
    CHECK_CU(cuStreamDestroy(stream));
  }

  int vmm = 0;
  CHECK_CU(
      cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, device));
  if (vmm) {
    checkAllocations(
        "cuMemAddressReserve",
        [] {
          CUdeviceptr p = 0;
          CHECK_CU(cuMemAddressReserve(&p, kBytes, 0, 0, 0));
          return p;
        },
        [](CUdeviceptr p) { CHECK_CU(cuMemAddressFree(p, kBytes)); }, false);
  }

  CHECK_CU(cuCtxDestroy(context));
  return pass();
}
