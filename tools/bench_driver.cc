#include "tools/bench_driver.h"

#include <dlfcn.h>

#include <stdexcept>

namespace gpupool::tools {
namespace {

constexpr char kEmptyKernelPtx[] =
    ".version 7.0\n"
    ".target sm_50\n"
    ".address_size 64\n"
    ".visible .entry gpupool_bench_empty()\n"
    "{\n"
    "  ret;\n"
    "}\n";

}  // namespace

std::unique_ptr<BenchDriver> BenchDriver::load(const std::string& path, std::string* error) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    *error = "cannot load " + path + ": " + dlerror();
    return nullptr;
  }
  std::unique_ptr<BenchDriver> d(new BenchDriver());
  d->handle_ = handle;
  bool ok = true;
  auto bind = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(handle, name));
    if (!fn) {
      ok = false;
      *error = path + " lacks " + name;
    }
  };
  bind(d->cuInit, "cuInit");
  bind(d->cuDeviceGet, "cuDeviceGet");
  bind(d->cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  bind(d->cuCtxSetCurrent, "cuCtxSetCurrent");
  bind(d->cuCtxSynchronize, "cuCtxSynchronize");
  bind(d->cuMemAlloc, "cuMemAlloc_v2");
  bind(d->cuMemFree, "cuMemFree_v2");
  bind(d->cuMemAllocManaged, "cuMemAllocManaged");
  bind(d->cuMemHostAlloc, "cuMemHostAlloc");
  bind(d->cuMemFreeHost, "cuMemFreeHost");
  bind(d->cuMemcpyHtoD, "cuMemcpyHtoD_v2");
  bind(d->cuMemcpyDtoH, "cuMemcpyDtoH_v2");
  bind(d->cuModuleLoadData, "cuModuleLoadData");
  bind(d->cuModuleGetFunction, "cuModuleGetFunction");
  bind(d->cuLaunchKernel, "cuLaunchKernel");
  bind(d->cuStreamCreate, "cuStreamCreate");
  bind(d->cuStreamDestroy, "cuStreamDestroy_v2");
  bind(d->cuStreamSynchronize, "cuStreamSynchronize");
  bind(d->cuLaunchHostFunc, "cuLaunchHostFunc");
  bind(d->cuGetErrorName, "cuGetErrorName");
  // The versioned names: CUDA_KERNEL_NODE_PARAMS is the _v2 layout in CUDA 12's header.
  bind(d->cuGraphCreate, "cuGraphCreate");
  bind(d->cuGraphAddKernelNode, "cuGraphAddKernelNode_v2");
  bind(d->cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags");
  bind(d->cuGraphLaunch, "cuGraphLaunch");
  bind(d->cuGraphExecDestroy, "cuGraphExecDestroy");
  bind(d->cuGraphDestroy, "cuGraphDestroy");
  if (!ok) return nullptr;
  return d;
}

BenchDriver::~BenchDriver() {
  // Never dlclose a CUDA driver: its threads and atexit handlers outlive this object.
}

std::string BenchDriver::errorName(CUresult r) const {
  const char* name = nullptr;
  if (cuGetErrorName(r, &name) == CUDA_SUCCESS && name) return name;
  return "CUresult " + std::to_string(static_cast<int>(r));
}

void check(const BenchDriver& d, CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) throw std::runtime_error(std::string(what) + ": " + d.errorName(r));
}

BenchContext openBenchContext(const BenchDriver& d) {
  check(d, d.cuInit(0), "cuInit");
  CUdevice dev = 0;
  check(d, d.cuDeviceGet(&dev, 0), "cuDeviceGet");
  BenchContext c;
  check(d, d.cuDevicePrimaryCtxRetain(&c.context, dev), "cuDevicePrimaryCtxRetain");
  check(d, d.cuCtxSetCurrent(c.context), "cuCtxSetCurrent");
  CUmodule module = nullptr;
  check(d, d.cuModuleLoadData(&module, kEmptyKernelPtx), "cuModuleLoadData");
  check(d, d.cuModuleGetFunction(&c.emptyKernel, module, "gpupool_bench_empty"),
        "cuModuleGetFunction");
  return c;
}

void launchEmptyKernel(const BenchDriver& d, CUfunction emptyKernel, CUstream stream) {
  check(d, d.cuLaunchKernel(emptyKernel, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr),
        "cuLaunchKernel");
}

}  // namespace gpupool::tools
