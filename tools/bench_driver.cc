#include "tools/bench_driver.h"

#include <dlfcn.h>

namespace gpupool::tools {

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
  bind(d->cuMemHostAlloc, "cuMemHostAlloc");
  bind(d->cuMemFreeHost, "cuMemFreeHost");
  bind(d->cuMemcpyHtoD, "cuMemcpyHtoD_v2");
  bind(d->cuMemcpyDtoH, "cuMemcpyDtoH_v2");
  bind(d->cuModuleLoadData, "cuModuleLoadData");
  bind(d->cuModuleGetFunction, "cuModuleGetFunction");
  bind(d->cuLaunchKernel, "cuLaunchKernel");
  bind(d->cuGetErrorName, "cuGetErrorName");
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

}  // namespace gpupool::tools
