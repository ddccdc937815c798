// Device addresses are never host addresses of this process (unified addressing): a device
// allocation's range cannot be mapped as host memory while it lives, and where host memory already
// lies at the address a server would hand out next, the allocation gets another one, so unified
// copies and pointer queries never take that host memory for device memory.
//
// For cuMemAlloc, cuMemAllocAsync, cuMemAddressReserve and graph allocation nodes.
//
// A module variable's address is the server's, fixed at load: where host memory of this process
// lies there, the variable is still device memory to explicit copies and kernels, and the calls
// that tell host from device memory by the address alone (cuMemcpy, unified 2D copy ends,
// pointer queries) refuse it rather than guess.
//
// The next address is predicted from two allocations in a row (servers place them one after the
// other); where that address is already reserved in this process (the emu's window, a GPU
// driver's own reservation) no host memory can be put there and the second part has nothing to
// check. On the chained cuda backend (the real driver's addresses are gpupoold's, not this
// process's) it can: ChainedAddressTest checks that the client asked again, and that the module
// variable was refused to those calls.
#include <cuda.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
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

// A module with one variable of kBytes and a kernel that writes word i of it as i * 7 + 3.
constexpr char kVariablePtx[] = R"(
.version 7.0
.target sm_52
.address_size 64
.visible .global .align 4 .b8 variable[2097152];
.visible .entry fill(.param .u32 words)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mad.lo.s32 %r4, %r1, %r2, %r3;
    ld.param.u32 %r5, [words];
    setp.ge.u32 %p1, %r4, %r5;
    @%p1 bra DONE;
    mov.u64 %rd1, variable;
    mul.wide.u32 %rd2, %r4, 4;
    add.s64 %rd3, %rd1, %rd2;
    mad.lo.s32 %r6, %r4, 7, 3;
    st.global.u32 [%rd3], %r6;
DONE:
    ret;
}
)";

// Puts host memory where the module's variable would land, when it can, and checks what each kind
// of call makes of the variable's address.
void checkModuleVariable() {
  CUdeviceptr first = 0, second = 0;
  CHECK_CU(cuMemAlloc(&first, kBytes));
  CHECK_CU(cuMemAlloc(&second, kBytes));
  const CUdeviceptr next = second + (second - first);
  const unsigned char fill = 0xa7;
  void* host = second > first ? mapHostAt(next, kBytes) : nullptr;
  if (host) std::memset(host, fill, kBytes);

  CUmodule module = nullptr;
  CHECK_CU(cuModuleLoadData(&module, kVariablePtx));
  CUdeviceptr variable = 0;
  size_t bytes = 0;
  CHECK_CU(cuModuleGetGlobal(&variable, &bytes, module, "variable"));
  CHECK(bytes == kBytes, "cuModuleGetGlobal: %zu bytes, not %zu", bytes, kBytes);

  // Kernels and explicit copies: device memory, whatever else lies at the address.
  CUfunction kernel = nullptr;
  CHECK_CU(cuModuleGetFunction(&kernel, module, "fill"));
  unsigned words = 16384;
  void* params[] = {&words};
  CHECK_CU(cuLaunchKernel(kernel, words / 256, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr));
  CHECK_CU(cuCtxSynchronize());
  std::vector<unsigned> back(words);
  CHECK_CU(cuMemcpyDtoH(back.data(), variable, words * sizeof(unsigned)));
  for (unsigned i = 0; i < words; ++i) {
    CHECK(back[i] == i * 7 + 3, "word %u of the variable is %u after the kernel", i, back[i]);
  }
  std::vector<unsigned> out(words, 0x600dcafe);
  const CUdeviceptr upper = variable + words * sizeof(unsigned);
  CHECK_CU(cuMemcpyHtoD(upper, out.data(), words * sizeof(unsigned)));
  CHECK_CU(cuMemcpyDtoH(back.data(), upper, words * sizeof(unsigned)));
  CHECK(back == out, "an explicit round trip through the variable differs");

  if (host && overlaps(variable, bytes, next, kBytes)) {
    // The address names host memory of this process too: calls that go by it alone refuse.
    CUresult status = cuMemcpy(variable, reinterpret_cast<CUdeviceptr>(out.data()), 64);
    CHECK(status == CUDA_ERROR_INVALID_VALUE, "cuMemcpy into the variable: %s, not refused",
          cuErrorName(status));
    status = cuMemcpy(reinterpret_cast<CUdeviceptr>(back.data()), variable, 64);
    CHECK(status == CUDA_ERROR_INVALID_VALUE, "cuMemcpy from the variable: %s, not refused",
          cuErrorName(status));
    unsigned type = 0;
    status = cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, variable);
    CHECK(status == CUDA_ERROR_INVALID_VALUE,
          "cuPointerGetAttribute of the variable: %s (type %u), not refused", cuErrorName(status),
          type);
    CUpointer_attribute attribute = CU_POINTER_ATTRIBUTE_MEMORY_TYPE;
    void* data[] = {&type};
    status = cuPointerGetAttributes(1, &attribute, data, variable);
    CHECK(status == CUDA_ERROR_INVALID_VALUE, "cuPointerGetAttributes of the variable: %s",
          cuErrorName(status));
    CUDA_MEMCPY2D copy{};
    copy.srcMemoryType = CU_MEMORYTYPE_HOST;
    copy.srcHost = out.data();
    copy.srcPitch = 64;
    copy.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
    copy.dstDevice = variable;
    copy.dstPitch = 64;
    copy.WidthInBytes = 64;
    copy.Height = 2;
    status = cuMemcpy2D(&copy);
    CHECK(status == CUDA_ERROR_INVALID_VALUE, "cuMemcpy2D to a unified end at the variable: %s",
          cuErrorName(status));
    const auto* hostBytes = static_cast<const unsigned char*>(host);
    for (size_t i = 0; i < kBytes; i += 4093) {
      CHECK(hostBytes[i] == fill, "host memory under the variable changed at byte %zu", i);
    }
    std::printf(
        "cuModuleGetGlobal: the variable lies on host memory put at %#llx; calls that go by "
        "the address alone refuse it\n",
        static_cast<unsigned long long>(next));
  } else if (host) {
    std::printf("cuModuleGetGlobal: the variable got %#llx, not the host memory's %#llx\n",
                static_cast<unsigned long long>(variable), static_cast<unsigned long long>(next));
  } else {
    std::printf(
        "cuModuleGetGlobal: the next address is reserved in this process; no host memory can lie "
        "there\n");
  }
  CHECK_CU(cuModuleUnload(module));
  CHECK_CU(cuMemFree(first));
  CHECK_CU(cuMemFree(second));
  if (host) munmap(host, kBytes);
}

}  // namespace

int main() {
  CHECK_CU(cuInit(0));
  CUdevice device = 0;
  CHECK_CU(cuDeviceGet(&device, 0));
  CUcontext context = nullptr;
  CHECK_CU(cuCtxCreate(&context, nullptr, 0, device));

  // First, while the server places allocations one after another.
  checkModuleVariable();

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

    // A graph allocation node's address is fixed once the node is made, and asked again before.
    std::map<CUdeviceptr, CUgraph> graphs;
    checkAllocations(
        "cuGraphAddMemAllocNode",
        [&graphs, device] {
          CUgraph graph = nullptr;
          CHECK_CU(cuGraphCreate(&graph, 0));
          CUDA_MEM_ALLOC_NODE_PARAMS params{};
          params.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
          params.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
          params.poolProps.location.id = device;
          params.bytesize = kBytes;
          CUgraphNode node = nullptr;
          CHECK_CU(cuGraphAddMemAllocNode(&node, graph, nullptr, 0, &params));
          graphs[params.dptr] = graph;
          return params.dptr;
        },
        [&graphs](CUdeviceptr p) { CHECK_CU(cuGraphDestroy(graphs.at(p))); }, false);
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
