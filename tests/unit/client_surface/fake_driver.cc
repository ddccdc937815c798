#include "fake_driver.h"

#include "context_hooks.h"

namespace fake_driver {

State& state() {
  static State instance;
  return instance;
}

}  // namespace fake_driver

namespace gpupool::client {

CUresult primaryContextHandle(CUdevice dev, CUcontext* out) {
  fake_driver::state().lastPrimaryContextDevice = dev;
  *out = fake_driver::state().primaryContext;
  return CUDA_SUCCESS;
}

}  // namespace gpupool::client

extern "C" {

CUresult CUDAAPI cuDriverGetVersion(int* version) {
  *version = fake_driver::state().driverVersion;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetCount(int* count) {
  *count = static_cast<int>(fake_driver::state().devices.size());
  return fake_driver::state().deviceGetCountResult;
}

CUresult CUDAAPI cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
  const auto& devices = fake_driver::state().devices;
  if (dev < 0 || dev >= static_cast<int>(devices.size())) return CUDA_ERROR_INVALID_DEVICE;
  *uuid = devices[dev].uuid;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice dev) {
  const auto& devices = fake_driver::state().devices;
  if (dev < 0 || dev >= static_cast<int>(devices.size())) return CUDA_ERROR_INVALID_DEVICE;
  switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID:
      *value = devices[dev].pciDomain;
      return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
      *value = devices[dev].pciBus;
      return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
      *value = devices[dev].pciDevice;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult CUDAAPI cuCtxGetCurrent(CUcontext* context) {
  *context = fake_driver::state().currentContext;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleLoadFatBinary(CUmodule* module, const void* fatbin) {
  fake_driver::state().lastFatbinLoaded = fatbin;
  *module = fake_driver::state().moduleToReturn;
  return CUDA_SUCCESS;
}

}  // extern "C"
