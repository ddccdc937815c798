// The slice of the CUDA driver API that `gpupool bench` measures, loaded with dlopen so the same
// code can measure gpupool's libcuda.so.1 and, in a child process, a machine's real driver.
#pragma once

#include <cuda.h>

#include <memory>
#include <string>

namespace gpupool::tools {

struct BenchDriver {
  // Loads `path` and resolves the entry points; null with *error on failure.
  static std::unique_ptr<BenchDriver> load(const std::string& path, std::string* error);
  ~BenchDriver();

  CUresult (*cuInit)(unsigned);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemAllocManaged)(CUdeviceptr*, size_t, unsigned);
  CUresult (*cuMemHostAlloc)(void**, size_t, unsigned);
  CUresult (*cuMemFreeHost)(void*);
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, size_t);
  CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, size_t);
  CUresult (*cuModuleLoadData)(CUmodule*, const void*);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void**, void**);
  CUresult (*cuStreamCreate)(CUstream*, unsigned);
  CUresult (*cuStreamDestroy)(CUstream);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuLaunchHostFunc)(CUstream, CUhostFn, void*);
  CUresult (*cuGetErrorName)(CUresult, const char**);
  CUresult (*cuGraphCreate)(CUgraph*, unsigned);
  CUresult (*cuGraphAddKernelNode)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t,
                                   const CUDA_KERNEL_NODE_PARAMS*);
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec*, CUgraph, unsigned long long);
  CUresult (*cuGraphLaunch)(CUgraphExec, CUstream);
  CUresult (*cuGraphExecDestroy)(CUgraphExec);
  CUresult (*cuGraphDestroy)(CUgraph);

  std::string errorName(CUresult r) const;

 private:
  void* handle_ = nullptr;
};

// Throws std::runtime_error naming `what` and the error when r is not CUDA_SUCCESS.
void check(const BenchDriver& d, CUresult r, const char* what);

// What every measurement starts from: device 0's primary context, current on the calling thread,
// and an empty kernel (so a launch measures the launch path, not the kernel).
struct BenchContext {
  CUcontext context = nullptr;
  CUfunction emptyKernel = nullptr;
};

// cuInit, the primary context of device 0 made current, and the empty kernel loaded; throws on
// failure.
BenchContext openBenchContext(const BenchDriver& d);

// Launches the empty kernel once on `stream`, one thread; throws on failure.
void launchEmptyKernel(const BenchDriver& d, CUfunction emptyKernel, CUstream stream);

}  // namespace gpupool::tools
