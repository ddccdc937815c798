// The execution API from before CUDA 4.0, which old programs and bindings still call: each
// function keeps a block shape, a dynamic shared-memory size and a parameter buffer
// (cuFuncSetBlockShape, cuFuncSetSharedSize, cuParamSet*), and cuLaunch/cuLaunchGrid/
// cuLaunchGridAsync launch it with them, through cuLaunchKernel's packed parameter buffer, which
// binds the module's texture references (client/texture_reference_api.cc).
#include <cuda.h>

#include <cstring>
#include <mutex>

#include "client_log.h"
#include "driver_export.h"
#include "driver_state.h"
#include "texture_references.h"

using namespace gpupool::client;

namespace {

// The legacy parameter space of a launch: 4 KiB, as on every GPU of that API's time.
constexpr size_t kLegacyParamSpace = 4096;

CUresult setParams(CUfunction h, int offset, const void* bytes, size_t size) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  FunctionObject* f = asFunction(h);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  if (offset < 0 || (size && !bytes) || static_cast<size_t>(offset) + size > kLegacyParamSpace) {
    return refuseCall(CUDA_ERROR_INVALID_VALUE, "cuParamSet*: bytes [" + std::to_string(offset) +
                                                    ", +" + std::to_string(size) +
                                                    ") are outside the 4 KiB parameter space");
  }
  std::lock_guard lock(DriverState::get().mutex);
  auto& params = f->legacy.params;
  if (params.size() < kLegacyParamSpace) params.resize(kLegacyParamSpace);
  if (size) std::memcpy(params.data() + offset, bytes, size);
  return CUDA_SUCCESS;
}

CUresult launchGrid(CUfunction h, int width, int height, CUstream stream) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  FunctionObject* f = asFunction(h);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  if (width <= 0 || height <= 0) return CUDA_ERROR_INVALID_VALUE;
  FunctionObject::LegacyLaunch launch;
  {
    std::lock_guard lock(DriverState::get().mutex);
    launch = f->legacy;
  }
  if (launch.block[0] <= 0) {
    return refuseCall(CUDA_ERROR_INVALID_VALUE,
                      "cuLaunchGrid: no block shape (call cuFuncSetBlockShape first)");
  }
  launch.params.resize(std::max(launch.params.size(), launch.paramSize));
  size_t size = launch.paramSize;
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, launch.params.data(),
                   CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
  return cuLaunchKernel(
      h, static_cast<unsigned>(width), static_cast<unsigned>(height), 1,
      static_cast<unsigned>(launch.block[0]), static_cast<unsigned>(launch.block[1]),
      static_cast<unsigned>(launch.block[2]), launch.sharedBytes, stream, nullptr, extra);
}

}  // namespace

GPUPOOL_DRIVER_API CUresult cuFuncSetBlockShape(CUfunction h, int x, int y, int z) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  FunctionObject* f = asFunction(h);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  if (x <= 0 || y <= 0 || z <= 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(DriverState::get().mutex);
  f->legacy.block[0] = x;
  f->legacy.block[1] = y;
  f->legacy.block[2] = z;
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuFuncSetSharedSize(CUfunction h, unsigned int bytes) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  FunctionObject* f = asFunction(h);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  std::lock_guard lock(DriverState::get().mutex);
  f->legacy.sharedBytes = bytes;
  return CUDA_SUCCESS;
}

// Bank size is fixed at four bytes since Volta; NVIDIA's driver accepts and ignores a setting.
GPUPOOL_DRIVER_API CUresult cuFuncSetSharedMemConfig(CUfunction h, CUsharedconfig config) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!asFunction(h)) return CUDA_ERROR_INVALID_HANDLE;
  if (config > CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuParamSetSize(CUfunction h, unsigned int bytes) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  FunctionObject* f = asFunction(h);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  if (bytes > kLegacyParamSpace) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(DriverState::get().mutex);
  f->legacy.paramSize = bytes;
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuParamSeti(CUfunction h, int offset, unsigned int value) {
  return setParams(h, offset, &value, sizeof value);
}

GPUPOOL_DRIVER_API CUresult cuParamSetf(CUfunction h, int offset, float value) {
  return setParams(h, offset, &value, sizeof value);
}

GPUPOOL_DRIVER_API CUresult cuParamSetv(CUfunction h, int offset, void* bytes, unsigned int size) {
  return setParams(h, offset, bytes, size);
}

// The launch binds every reference of the function's module; this only checks that the reference
// is the module's. Any texunit is accepted, the call a no-op (NVIDIA accepted texunit 0 on driver
// 580.159.04, H200).
GPUPOOL_DRIVER_API CUresult cuParamSetTexRef(CUfunction h, int /*texunit*/, CUtexref hTexRef) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  FunctionObject* f = asFunction(h);
  ModuleObject* module = nullptr;
  if (!f || !textureReferenceModule(hTexRef, &module)) return CUDA_ERROR_INVALID_HANDLE;
  if (module != f->module) {
    return refuseCall(CUDA_ERROR_INVALID_VALUE,
                      "cuParamSetTexRef: the texture reference is not of the function's module");
  }
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuLaunch(CUfunction h) { return launchGrid(h, 1, 1, nullptr); }

GPUPOOL_DRIVER_API CUresult cuLaunchGrid(CUfunction h, int width, int height) {
  return launchGrid(h, width, height, nullptr);
}

GPUPOOL_DRIVER_API CUresult cuLaunchGridAsync(CUfunction h, int width, int height,
                                              CUstream stream) {
  return launchGrid(h, width, height, stream);
}
