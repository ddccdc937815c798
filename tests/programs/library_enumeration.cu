// Runtime API: a library loaded from PTX (cudaLibraryLoadData), its kernels counted and listed
// (cudaLibraryGetKernelCount, cudaLibraryEnumerateKernels), one launched through its
// cudaKernel_t; and a module's kernels listed through driver entry points that the runtime hands
// out (cudaGetDriverEntryPointByVersion: cuModuleGetFunctionCount, cuModuleEnumerateFunctions,
// cuFuncGetName, cuKernelGetName), as a program without -lcuda reaches them.
#include <cuda.h>
#include <cuda_runtime.h>

#include <set>
#include <string>
#include <vector>

#include "link_callee_ptx.h"
#include "self_check.h"

namespace {

constexpr int kCount = 512;

// The PTX of a module with three kernels (and a device function that is not one).
const char kThreeKernelsPtx[] = R"PTX(
.version 8.0
.target sm_75
.address_size 64

.func (.param .b32 r) twice(.param .b32 x)
{
    .reg .b32 %r<3>;
    ld.param.b32 %r1, [x];
    add.s32 %r2, %r1, %r1;
    st.param.b32 [r], %r2;
    ret;
}
.visible .entry first() { ret; }
.visible .entry second(.param .u64 p) { ret; }
.visible .entry third(.param .u32 v) { ret; }
)PTX";

template <typename Fn>
Fn entryPoint(const char* name, unsigned version) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  CHECK_CUDA(cudaGetDriverEntryPointByVersion(name, &fn, version, cudaEnableDefault, &found));
  CHECK(found == cudaDriverEntryPointSuccess && fn, "no driver entry point %s", name);
  return reinterpret_cast<Fn>(fn);
}

}  // namespace

int main() {
  CHECK_CUDA(cudaFree(nullptr));
  auto kernelGetName = entryPoint<CUresult (*)(const char**, CUkernel)>("cuKernelGetName", 12030);

  cudaLibrary_t library = nullptr;
  CHECK_CUDA(
      cudaLibraryLoadData(&library, k_link_callee_ptx, nullptr, nullptr, 0, nullptr, nullptr, 0));
  unsigned count = 0;
  CHECK_CUDA(cudaLibraryGetKernelCount(&count, library));
  CHECK(count == 1, "cudaLibraryGetKernelCount: %u, expected 1 (fillSquares)", count);
  cudaKernel_t kernel = nullptr;
  CHECK_CUDA(cudaLibraryEnumerateKernels(&kernel, 1, library));
  const char* name = nullptr;
  CHECK(kernelGetName(&name, reinterpret_cast<CUkernel>(kernel)) == CUDA_SUCCESS && name,
        "cuKernelGetName failed");
  CHECK(std::string(name) == "fillSquares", "enumerated kernel is %s", name);
  int* d = nullptr;
  CHECK_CUDA(cudaMalloc(&d, kCount * sizeof(int)));
  int n = kCount;
  void* args[] = {&d, &n};
  CHECK_CUDA(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(kCount / 128), dim3(128),
                              args, 0, nullptr));
  std::vector<int> out(kCount);
  CHECK_CUDA(cudaMemcpy(out.data(), d, kCount * sizeof(int), cudaMemcpyDeviceToHost));
  for (int i = 0; i < kCount; ++i) CHECK(out[i] == i * i, "fillSquares: out[%d] = %d", i, out[i]);
  CHECK_CUDA(cudaFree(d));
  CHECK_CUDA(cudaLibraryUnload(library));

  auto moduleLoadData = entryPoint<CUresult (*)(CUmodule*, const void*)>("cuModuleLoadData", 2000);
  auto functionCount =
      entryPoint<CUresult (*)(unsigned*, CUmodule)>("cuModuleGetFunctionCount", 12040);
  auto enumerate = entryPoint<CUresult (*)(CUfunction*, unsigned, CUmodule)>(
      "cuModuleEnumerateFunctions", 12040);
  auto funcGetName = entryPoint<CUresult (*)(const char**, CUfunction)>("cuFuncGetName", 12030);
  auto moduleUnload = entryPoint<CUresult (*)(CUmodule)>("cuModuleUnload", 2000);
  CUmodule module = nullptr;
  CHECK(moduleLoadData(&module, kThreeKernelsPtx) == CUDA_SUCCESS, "cuModuleLoadData failed");
  CHECK(functionCount(&count, module) == CUDA_SUCCESS && count == 3,
        "cuModuleGetFunctionCount: %u, expected 3", count);
  CUfunction functions[3] = {};
  CHECK(enumerate(functions, 3, module) == CUDA_SUCCESS, "cuModuleEnumerateFunctions failed");
  std::set<std::string> names;
  for (CUfunction f : functions) {
    CHECK(funcGetName(&name, f) == CUDA_SUCCESS && name, "cuFuncGetName failed");
    names.insert(name);
  }
  CHECK(names == (std::set<std::string>{"first", "second", "third"}),
        "cuModuleEnumerateFunctions listed other kernels");
  CHECK(moduleUnload(module) == CUDA_SUCCESS, "cuModuleUnload failed");
  return pass();
}
