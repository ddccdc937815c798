// Virtual memory management through the driver API, as PyTorch's expandable segments and vLLM's
// sleep mode use it: a reserved range grown by mapping physical chunks into it, access set before
// use, a kernel and copies across the chunk boundary, one allocation mapped at two addresses (the
// mappings alias), unmap and remap, retained handles and allocation properties, and the errors
// the driver gives for bad alignment, a double map, a busy range and a freed mapping.
#include <cuda.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "driver_check.h"

namespace {

__global__ void fill(uint32_t* p, size_t n, uint32_t salt) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    p[i] = static_cast<uint32_t>(i) * 2654435761u + salt;
  }
}

uint32_t expected(size_t i, uint32_t salt) { return static_cast<uint32_t>(i) * 2654435761u + salt; }

void launchFill(CUdeviceptr p, size_t bytes, uint32_t salt) {
  fill<<<64, 256>>>(reinterpret_cast<uint32_t*>(p), bytes / sizeof(uint32_t), salt);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
}

// Reads [p, p+bytes) back and checks it holds fill(salt) from element `first` on.
void expectFilled(CUdeviceptr p, size_t bytes, uint32_t salt, size_t first, const char* what) {
  std::vector<uint32_t> host(bytes / sizeof(uint32_t));
  CHECK_CU(cuMemcpyDtoH(host.data(), p, bytes));
  for (size_t i = 0; i < host.size(); ++i) {
    CHECK(host[i] == expected(first + i, salt), "%s: element %zu is 0x%x, expected 0x%x", what, i,
          host[i], expected(first + i, salt));
  }
}

void setReadWrite(CUdeviceptr p, size_t bytes, CUdevice device) {
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CHECK_CU(cuMemSetAccess(p, bytes, &access, 1));
}

unsigned long long accessOf(CUdeviceptr p, CUdevice device) {
  CUmemLocation location{};
  location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  location.id = device;
  unsigned long long flags = ~0ull;
  CHECK_CU(cuMemGetAccess(&flags, &location, p));
  return flags;
}

}  // namespace

int main() {
  const CUdevice device = usePrimaryContext();
  int supported = 0;
  CHECK_CU(cuDeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                                device));
  CHECK(supported == 1, "virtual memory management not supported");

  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  size_t minimum = 0, recommended = 0;
  CHECK_CU(cuMemGetAllocationGranularity(&minimum, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  CHECK_CU(
      cuMemGetAllocationGranularity(&recommended, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  CHECK(minimum == (2u << 20), "minimum granularity %zu, expected 2 MiB", minimum);
  CHECK(recommended >= minimum && recommended % minimum == 0, "recommended granularity %zu",
        recommended);
  const size_t chunk = minimum;

  // A range of four chunks, two of them mapped one after the other.
  CUdeviceptr base = 0;
  CHECK_CU(cuMemAddressReserve(&base, 4 * chunk, 0, 0, 0));
  CHECK(base != 0 && base % chunk == 0, "reservation 0x%llx is not aligned",
        static_cast<unsigned long long>(base));
  CUmemGenericAllocationHandle first = 0, second = 0;
  CHECK_CU(cuMemCreate(&first, chunk, &prop, 0));
  CHECK_CU(cuMemCreate(&second, chunk, &prop, 0));
  CHECK_CU(cuMemMap(base, chunk, 0, first, 0));
  CHECK_CU(cuMemMap(base + chunk, chunk, 0, second, 0));

  // Mapped is not yet accessible.
  CHECK(accessOf(base, device) == CU_MEM_ACCESS_FLAGS_PROT_NONE, "access before cuMemSetAccess");
  std::vector<uint32_t> probe(16, 7);
  CHECK(cuMemcpyHtoD(base, probe.data(), 64) != CUDA_SUCCESS,
        "a copy into a mapping without access succeeded");

  setReadWrite(base, 2 * chunk, device);
  CHECK(accessOf(base + chunk + 4096, device) == CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        "access after cuMemSetAccess");

  // One kernel writes both chunks; copies read them back whole and across the boundary.
  launchFill(base, 2 * chunk, 1);
  expectFilled(base, 2 * chunk, 1, 0, "two chunks");
  expectFilled(base + chunk - 4096, 8192, 1, (chunk - 4096) / 4, "across the boundary");
  CHECK_CU(cuMemsetD32(base + chunk - 8, 0xabcdef01u, 4));
  std::vector<uint32_t> across(4);
  CHECK_CU(cuMemcpyDtoH(across.data(), base + chunk - 8, 16));
  for (uint32_t v : across) CHECK(v == 0xabcdef01u, "memset across the boundary: 0x%x", v);
  launchFill(base, 2 * chunk, 1);

  // The first allocation again, at a second address: both mappings are the same bytes.
  CUdeviceptr alias = 0;
  CHECK_CU(cuMemAddressReserve(&alias, chunk, 0, 0, 0));
  CHECK_CU(cuMemMap(alias, chunk, 0, first, 0));
  setReadWrite(alias, chunk, device);
  expectFilled(alias, chunk, 1, 0, "the alias");
  launchFill(alias, chunk, 99);
  expectFilled(base, chunk, 99, 0, "the first chunk after writing its alias");
  expectFilled(base + chunk, chunk, 1, chunk / 4, "the second chunk, untouched");

  // What the driver answers about a mapping.
  CUmemGenericAllocationHandle retained = 0;
  CHECK_CU(cuMemRetainAllocationHandle(&retained, reinterpret_cast<void*>(alias + 100)));
  CHECK(retained == first, "retained handle differs from the mapped one");
  CHECK_CU(cuMemRelease(retained));
  CUmemAllocationProp got{};
  CHECK_CU(cuMemGetAllocationPropertiesFromHandle(&got, second));
  CHECK(got.type == CU_MEM_ALLOCATION_TYPE_PINNED &&
            got.location.type == CU_MEM_LOCATION_TYPE_DEVICE && got.location.id == device,
        "allocation properties");

  // POSIX file-descriptor handles are served (vmm_shareable_driver tests them); fabric handles
  // are not, and an allocation asking for them is refused as on a device without them.
  int posixHandles = -1, fabricHandles = -1;
  CHECK_CU(cuDeviceGetAttribute(
      &posixHandles, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, device));
  CHECK(posixHandles == 1, "POSIX file-descriptor handles not reported");
  CHECK_CU(cuDeviceGetAttribute(&fabricHandles, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED,
                                device));
  CUmemAllocationProp exportable = prop;
  exportable.requestedHandleTypes = CU_MEM_HANDLE_TYPE_FABRIC;
  CUmemGenericAllocationHandle refused = 0;
  if (fabricHandles == 0) {
    expectError(cuMemCreate(&refused, chunk, &exportable, 0), CUDA_ERROR_NOT_SUPPORTED,
                "cuMemCreate asking for a fabric handle");
  }

  // Errors.
  CUmemGenericAllocationHandle third = 0;
  expectError(cuMemCreate(&third, chunk + 4096, &prop, 0), CUDA_ERROR_INVALID_VALUE,
              "cuMemCreate of a size off the granularity");
  CUdeviceptr unused = 0;
  expectError(cuMemAddressReserve(&unused, chunk + 4096, 0, 0, 0), CUDA_ERROR_INVALID_VALUE,
              "cuMemAddressReserve of a size off the granularity");
  expectError(cuMemMap(base + 2 * chunk + 4096, chunk, 0, second, 0), CUDA_ERROR_INVALID_VALUE,
              "cuMemMap at an unaligned address");
  expectError(cuMemMap(base + chunk, chunk, 0, first, 0), CUDA_ERROR_INVALID_VALUE,
              "cuMemMap over a mapping");
  expectError(cuMemFree(base), CUDA_ERROR_INVALID_VALUE, "cuMemFree of a mapping");
  expectError(cuMemAddressFree(alias, chunk), CUDA_ERROR_INVALID_VALUE,
              "cuMemAddressFree of a range still mapped");

  // Unmap the second chunk and release it: the boundary is gone, the first chunk stays.
  CHECK_CU(cuMemUnmap(base + chunk, chunk));
  CHECK_CU(cuMemRelease(second));
  std::vector<uint32_t> host(4096);
  CHECK(cuMemcpyDtoH(host.data(), base + chunk - 4096, 8192) != CUDA_SUCCESS,
        "a copy into an unmapped chunk succeeded");
  expectFilled(base, chunk, 99, 0, "the first chunk after unmapping the second");

  // Remap a new allocation there (the sleep-and-wake of a serving engine).
  CHECK_CU(cuMemCreate(&third, chunk, &prop, 0));
  CHECK_CU(cuMemMap(base + chunk, chunk, 0, third, 0));
  setReadWrite(base + chunk, chunk, device);
  launchFill(base + chunk, chunk, 5);
  expectFilled(base + chunk, chunk, 5, 0, "the remapped chunk");

  // The first allocation, released while mapped twice, lives until both mappings go.
  CHECK_CU(cuMemRelease(first));
  expectFilled(alias, chunk, 99, 0, "the alias after its handle's release");
  CHECK_CU(cuMemUnmap(alias, chunk));
  expectFilled(base, chunk, 99, 0, "the first chunk after its alias went");
  expectError(cuMemRelease(first), CUDA_ERROR_INVALID_VALUE, "a second cuMemRelease");

  // One unmap for both chunks of the range, then everything goes.
  CHECK_CU(cuMemUnmap(base, 2 * chunk));
  CHECK_CU(cuMemRelease(third));
  CHECK_CU(cuMemAddressFree(alias, chunk));
  CHECK_CU(cuMemAddressFree(base, 4 * chunk));
  std::printf("virtual memory: reserve, create, map, access, alias, unmap, remap, errors: ok\n");
  return pass();
}
