// Linking at run time, as Numba and other JITs do: cuLinkCreate with log buffers, cuLinkAddData of
// separately compiled device code (nvcc -rdc: a kernel in one unit calls a __device__ function and
// reads a __device__ variable of the other), cuLinkComplete, then cuModuleLoadData of the image
// it returns, a launch and its results. The callee comes as PTX, as a fatbin and as a host object
// (cuLinkAddFile). Also: the logs and their sizes written back into the option values, an
// unresolved extern reported in the error log, broken PTX refused by cuLinkAddData, the module's
// and a library's kernels enumerated (cuModuleGetFunctionCount, cuModuleEnumerateFunctions,
// cuLibraryGetKernelCount, cuLibraryEnumerateKernels, cuKernelGetName), and cuModuleGetLoadingMode.
#include <cuda.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "driver_check.h"
#include "link_callee_fatbin.h"
#include "link_callee_o.h"
#include "link_callee_ptx.h"
#include "link_caller_ptx.h"

namespace {

constexpr int kCount = 1000;
constexpr size_t kLogBytes = 8192;

// bin2c pads each array with one NUL: PTX keeps it as its terminator, binaries leave it out.
// Copied to 8-byte aligned storage, as images are when a program reads them into memory.
template <size_t N>
void* bytesOf(const unsigned char (&array)[N]) {
  static std::vector<std::unique_ptr<uint64_t[]>> copies;  // kept for the program's life
  copies.emplace_back(new uint64_t[(N + 7) / 8]);
  std::memcpy(copies.back().get(), array, N);
  return copies.back().get();
}

struct Linker {
  char info[kLogBytes] = {};
  char error[kLogBytes] = {};
  CUjit_option keys[6] = {CU_JIT_INFO_LOG_BUFFER,  CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                          CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                          CU_JIT_LOG_VERBOSE,      CU_JIT_OPTIMIZATION_LEVEL};
  void* values[6] = {info,
                     reinterpret_cast<void*>(kLogBytes),
                     error,
                     reinterpret_cast<void*>(kLogBytes),
                     reinterpret_cast<void*>(1),
                     reinterpret_cast<void*>(3)};
  CUlinkState state = nullptr;

  Linker() { CHECK_CU(cuLinkCreate(6, keys, values, &state)); }
  ~Linker() { CHECK_CU(cuLinkDestroy(state)); }
  size_t infoSize() const { return reinterpret_cast<uintptr_t>(values[1]); }
  size_t errorSize() const { return reinterpret_cast<uintptr_t>(values[3]); }
};

// Launches applyScale of `module` on 0..kCount-1 and checks out[i] == 3*i + 7 + 7.
void checkApplyScale(CUmodule module) {
  CUfunction f = nullptr;
  CHECK_CU(cuModuleGetFunction(&f, module, "applyScale"));
  std::vector<int> in(kCount), out(kCount, -1);
  for (int i = 0; i < kCount; ++i) in[i] = i;
  CUdeviceptr dIn = 0, dOut = 0;
  CHECK_CU(cuMemAlloc(&dIn, kCount * sizeof(int)));
  CHECK_CU(cuMemAlloc(&dOut, kCount * sizeof(int)));
  CHECK_CU(cuMemcpyHtoD(dIn, in.data(), kCount * sizeof(int)));
  int n = kCount;
  void* params[] = {&dOut, &dIn, &n};
  CHECK_CU(cuLaunchKernel(f, (kCount + 127) / 128, 1, 1, 128, 1, 1, 0, nullptr, params, nullptr));
  CHECK_CU(cuMemcpyDtoH(out.data(), dOut, kCount * sizeof(int)));
  for (int i = 0; i < kCount; ++i) {
    CHECK(out[i] == 3 * i + 7 + 7, "applyScale: out[%d] = %d, expected %d", i, out[i], 3 * i + 14);
  }
  CHECK_CU(cuMemFree(dIn));
  CHECK_CU(cuMemFree(dOut));
}

// The kernels of a module linked from both units: applyScale and fillSquares, nothing else.
void checkModuleKernels(CUmodule module) {
  unsigned count = 0;
  CHECK_CU(cuModuleGetFunctionCount(&count, module));
  CHECK(count == 2, "cuModuleGetFunctionCount: %u, expected 2", count);
  CUfunction functions[2] = {};
  CHECK_CU(cuModuleEnumerateFunctions(functions, 2, module));
  std::set<std::string> names;
  for (CUfunction f : functions) {
    const char* name = nullptr;
    CHECK_CU(cuFuncGetName(&name, f));
    names.insert(name);
  }
  CHECK(names == (std::set<std::string>{"applyScale", "fillSquares"}),
        "cuModuleEnumerateFunctions named other kernels");
}

// Links the caller PTX with the callee as added by `addCallee`, loads the image and runs it.
template <typename AddCallee>
void linkAndRun(const char* what, AddCallee addCallee) {
  Linker link;
  CHECK_CU(cuLinkAddData(link.state, CU_JIT_INPUT_PTX, bytesOf(k_link_caller_ptx),
                         sizeof k_link_caller_ptx, "link_caller.ptx", 0, nullptr, nullptr));
  addCallee(link.state);
  void* image = nullptr;
  size_t imageBytes = 0;
  CUresult r = cuLinkComplete(link.state, &image, &imageBytes);
  if (r != CUDA_SUCCESS) {
    FAIL("%s: cuLinkComplete returned %s; error log: %s", what, cuErrorName(r), link.error);
  }
  CHECK(image != nullptr && imageBytes > 0, "%s: cuLinkComplete returned no image", what);
  // LOG_VERBOSE: the info log says what was linked; its size comes back in the option value.
  CHECK(link.info[0] != '\0', "%s: the verbose info log is empty", what);
  CHECK(link.infoSize() > 0 && link.infoSize() <= kLogBytes &&
            std::strlen(link.info) < link.infoSize() + 1,
        "%s: info log size %zu does not match the log", what, link.infoSize());
  CUmodule module = nullptr;
  CHECK_CU(cuModuleLoadData(&module, image));
  checkApplyScale(module);
  checkModuleKernels(module);
  CHECK_CU(cuModuleUnload(module));
}

void checkUnresolvedExtern() {
  Linker link;
  CHECK_CU(cuLinkAddData(link.state, CU_JIT_INPUT_PTX, bytesOf(k_link_caller_ptx),
                         sizeof k_link_caller_ptx, "link_caller.ptx", 0, nullptr, nullptr));
  void* image = nullptr;
  size_t imageBytes = 0;
  CUresult r = cuLinkComplete(link.state, &image, &imageBytes);
  CHECK(r != CUDA_SUCCESS, "cuLinkComplete linked a call to an undefined function");
  std::printf("unresolved extern: cuLinkComplete returned %s; error log: %s\n", cuErrorName(r),
              link.error);
  CHECK(std::strstr(link.error, "scaleAndOffset") || std::strstr(link.error, "offsetBias"),
        "the error log does not name the unresolved extern: %s", link.error);
  CHECK(link.errorSize() > 0 && link.errorSize() <= kLogBytes,
        "error log size %zu not written back", link.errorSize());
}

void checkLibraryKernels(const void* image) {
  CUlibrary library = nullptr;
  CHECK_CU(cuLibraryLoadData(&library, image, nullptr, nullptr, 0, nullptr, nullptr, 0));
  unsigned count = 0;
  CHECK_CU(cuLibraryGetKernelCount(&count, library));
  CHECK(count == 2, "cuLibraryGetKernelCount: %u, expected 2", count);
  CUkernel kernels[2] = {};
  CHECK_CU(cuLibraryEnumerateKernels(kernels, 2, library));
  std::set<std::string> names;
  for (CUkernel k : kernels) {
    const char* name = nullptr;
    CHECK_CU(cuKernelGetName(&name, k));
    names.insert(name);
  }
  CHECK(names == (std::set<std::string>{"applyScale", "fillSquares"}),
        "cuLibraryEnumerateKernels named other kernels");
  // A kernel from the enumeration launches like any other.
  CUkernel fill = nullptr;
  CHECK_CU(cuLibraryGetKernel(&fill, library, "fillSquares"));
  auto launchFill = [&](const char* where) {
    CUdeviceptr d = 0;
    CHECK_CU(cuMemAlloc(&d, kCount * sizeof(int)));
    int n = kCount;
    void* params[] = {&d, &n};
    CHECK_CU(cuLaunchKernel(reinterpret_cast<CUfunction>(fill), (kCount + 127) / 128, 1, 1, 128, 1,
                            1, 0, nullptr, params, nullptr));
    std::vector<int> out(kCount);
    CHECK_CU(cuMemcpyDtoH(out.data(), d, kCount * sizeof(int)));
    for (int i = 0; i < kCount; ++i) {
      CHECK(out[i] == i * i, "fillSquares in %s: out[%d] = %d", where, i, out[i]);
    }
    CHECK_CU(cuMemFree(d));
  };
  launchFill("the primary context");
  // The library is context-independent: its kernel runs in a context made after it was loaded,
  // that context's end takes only its own copy, and the library goes on in the others.
  CUcontext primary = nullptr, own = nullptr;
  CUdevice device;
  CHECK_CU(cuCtxGetCurrent(&primary));
  CHECK_CU(cuCtxGetDevice(&device));
  CHECK_CU(cuCtxCreate(&own, nullptr, 0, device));
  launchFill("a context of its own");
  CHECK_CU(cuCtxDestroy(own));
  CHECK_CU(cuCtxSetCurrent(primary));
  launchFill("the primary context, after the other context's end");
  CHECK_CU(cuLibraryUnload(library));
}

}  // namespace

int main() {
  CHECK_CU(cuInit(0));
  CUdevice device;
  CHECK_CU(cuDeviceGet(&device, 0));
  CUcontext context = nullptr;
  CHECK_CU(cuDevicePrimaryCtxRetain(&context, device));
  CHECK_CU(cuCtxSetCurrent(context));

  CUmoduleLoadingMode mode{};
  CHECK_CU(cuModuleGetLoadingMode(&mode));
  CHECK(mode == CU_MODULE_LAZY_LOADING || mode == CU_MODULE_EAGER_LOADING,
        "cuModuleGetLoadingMode: %d", static_cast<int>(mode));

  linkAndRun("PTX + PTX", [](CUlinkState state) {
    CHECK_CU(cuLinkAddData(state, CU_JIT_INPUT_PTX, bytesOf(k_link_callee_ptx),
                           sizeof k_link_callee_ptx, "link_callee.ptx", 0, nullptr, nullptr));
  });
  linkAndRun("PTX + fatbin", [](CUlinkState state) {
    CHECK_CU(cuLinkAddData(state, CU_JIT_INPUT_FATBINARY, bytesOf(k_link_callee_fatbin),
                           sizeof k_link_callee_fatbin - 1, "link_callee.fatbin", 0, nullptr,
                           nullptr));
  });
  linkAndRun("PTX + object file", [](CUlinkState state) {
    char path[] = "/tmp/link_driver_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp failed");
    size_t size = sizeof k_link_callee_o - 1;
    CHECK(write(fd, k_link_callee_o, size) == static_cast<ssize_t>(size), "write failed");
    close(fd);
    CUresult r = cuLinkAddFile(state, CU_JIT_INPUT_OBJECT, path, 0, nullptr, nullptr);
    unlink(path);
    CHECK_CU(r);
  });
  {
    Linker link;
    expectError(
        cuLinkAddFile(link.state, CU_JIT_INPUT_PTX, "/nonexistent/unit.ptx", 0, nullptr, nullptr),
        CUDA_ERROR_FILE_NOT_FOUND, "cuLinkAddFile(missing file)");
  }
  checkUnresolvedExtern();
  {
    // PTX is compiled as it is added: a syntax error fails cuLinkAddData, with the log.
    Linker link;
    const char broken[] =
        ".version 8.0\n.target sm_75\n.address_size 64\n"
        ".visible .entry broken( { ret; }\n";
    expectError(cuLinkAddData(link.state, CU_JIT_INPUT_PTX, const_cast<char*>(broken),
                              sizeof broken, "broken.ptx", 0, nullptr, nullptr),
                CUDA_ERROR_INVALID_PTX, "cuLinkAddData(PTX with a syntax error)");
    CHECK(link.error[0] != '\0' && link.errorSize() > 0,
          "cuLinkAddData wrote no error log for broken PTX");
  }

  // The linked image as a library.
  {
    Linker link;
    CHECK_CU(cuLinkAddData(link.state, CU_JIT_INPUT_PTX, bytesOf(k_link_caller_ptx),
                           sizeof k_link_caller_ptx, "link_caller.ptx", 0, nullptr, nullptr));
    CHECK_CU(cuLinkAddData(link.state, CU_JIT_INPUT_PTX, bytesOf(k_link_callee_ptx),
                           sizeof k_link_callee_ptx, "link_callee.ptx", 0, nullptr, nullptr));
    void* image = nullptr;
    size_t imageBytes = 0;
    CHECK_CU(cuLinkComplete(link.state, &image, &imageBytes));
    checkLibraryKernels(image);
  }

  CHECK_CU(cuDevicePrimaryCtxRelease(device));
  return pass();
}
