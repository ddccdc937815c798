// Kernel launches: parameters are packed by the layout the server reported for the function, so
// the server gets one flat parameter block, exactly as the kernel declares it.
#include <algorithm>
#include <cstring>
#include <vector>

#include "driver_export.h"
#include "driver_state.h"
#include "launch_checks.h"
#include "module_resolution.h"
#include "stream_capture.h"

using namespace gpupool::client;

namespace gpupool::client {

CUresult packParams(const FunctionObject& f, void** kernelParams, void** extra,
                    std::vector<uint8_t>* block) {
  block->assign(f.paramBytes(), 0);
  if (kernelParams) {
    for (size_t i = 0; i < f.params.size(); ++i) {
      if (!kernelParams[i]) return CUDA_ERROR_INVALID_VALUE;
      std::memcpy(block->data() + f.params[i].first, kernelParams[i], f.params[i].second);
    }
    return CUDA_SUCCESS;
  }
  if (extra) {
    const void* buffer = nullptr;
    size_t size = 0;
    for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
      if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) {
        buffer = extra[i + 1];
      } else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) {
        size = *static_cast<size_t*>(extra[i + 1]);
      } else {
        return CUDA_ERROR_INVALID_VALUE;
      }
    }
    if (!buffer || size < block->size()) return CUDA_ERROR_INVALID_VALUE;
    std::memcpy(block->data(), buffer, block->size());
    return CUDA_SUCCESS;
  }
  return f.params.empty() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

namespace {
// The driver's answer to an impossible launch shape (cudart turns it into
// cudaErrorInvalidConfiguration); see server/backends/emu/emu_context.cc.
constexpr CUresult kInvalidLaunchConfiguration = static_cast<CUresult>(9);
}  // namespace

CUresult checkShape(const FunctionObject& f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                    unsigned by, unsigned bz, unsigned sharedBytes) {
  const DeviceSnapshot* d = DriverState::get().device(f.module->context->device);
  auto attr = [&](CUdevice_attribute a) { return static_cast<uint64_t>(d->attribute(a)); };
  auto fattr = [&](CUfunction_attribute a) -> uint64_t {
    return static_cast<size_t>(a) < f.attributes.size() ? static_cast<uint64_t>(f.attributes[a])
                                                        : 0;
  };
  uint64_t threads = uint64_t{bx} * by * bz;
  uint64_t maxThreads = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  if (fattr(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)) {
    maxThreads = std::min(maxThreads, fattr(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK));
  }
  if (threads == 0 || gx == 0 || gy == 0 || gz == 0 || threads > maxThreads ||
      bx > attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X) ||
      by > attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y) ||
      bz > attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z) ||
      gx > attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X) ||
      gy > attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y) ||
      gz > attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)) {
    return kInvalidLaunchConfiguration;
  }
  if (f.attributes.size() > CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES &&
      sharedBytes > fattr(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)) {
    return kInvalidLaunchConfiguration;
  }
  return CUDA_SUCCESS;
}

}  // namespace gpupool::client

namespace {

CUresult launch(CUfunction h, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                unsigned bz, unsigned sharedBytes, CUstream stream, void** kernelParams,
                void** extra) {
  CaptureScope capturing;  // a capturing stream takes the launch as a node
  ContextObject* ctx = nullptr;
  uint64_t s = 0;
  if (CUresult r = resolveStream(stream, &ctx, &s); r != CUDA_SUCCESS) return r;
  FunctionObject* f = nullptr;
  if (CUresult r = resolveFunction(h, ctx, &f); r != CUDA_SUCCESS) return r;
  if (f->module->context != ctx) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = checkShape(*f, gx, gy, gz, bx, by, bz, sharedBytes); r != CUDA_SUCCESS) {
    return r;
  }
  std::vector<uint8_t> params;
  if (CUresult r = packParams(*f, kernelParams, extra, &params); r != CUDA_SUCCESS) return r;
  unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
  if (CUresult r = CUDA_SUCCESS; captureKernel(stream, f, grid, block, sharedBytes, params, &r)) {
    return r;
  }
  return ctx->server->post("cuLaunchKernel", [&](wire::Request::Builder b) {
    auto k = b.initLaunchKernel();
    k.setContext(ctx->remote);
    k.setFunction(f->remote);
    k.getGrid().setX(gx);
    k.getGrid().setY(gy);
    k.getGrid().setZ(gz);
    k.getBlock().setX(bx);
    k.getBlock().setY(by);
    k.getBlock().setZ(bz);
    k.setSharedBytes(sharedBytes);
    k.setStream(s);
    k.setParams(kj::arrayPtr(params.data(), params.size()));
  });
}

CUresult launchEx(const CUlaunchConfig* config, CUfunction h, void** kernelParams, void** extra) {
  if (!config) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < config->numAttrs; ++i) {
    const CUlaunchAttribute& a = config->attrs[i];
    // Grid-wide cooperation cannot be honoured; every other attribute is a scheduling hint.
    if (a.id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE && a.value.cooperative) {
      return CUDA_ERROR_NOT_SUPPORTED;
    }
  }
  return launch(h, config->gridDimX, config->gridDimY, config->gridDimZ, config->blockDimX,
                config->blockDimY, config->blockDimZ, config->sharedMemBytes, config->hStream,
                kernelParams, extra);
}

}  // namespace

GPUPOOL_DRIVER_API CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy,
                                           unsigned int gz, unsigned int bx, unsigned int by,
                                           unsigned int bz, unsigned int sharedBytes,
                                           CUstream stream, void** kernelParams, void** extra) {
  return launch(f, gx, gy, gz, bx, by, bz, sharedBytes, stream, kernelParams, extra);
}

GPUPOOL_DRIVER_API CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                                unsigned int gz, unsigned int bx, unsigned int by,
                                                unsigned int bz, unsigned int sharedBytes,
                                                CUstream stream, void** kernelParams,
                                                void** extra) {
  PerThreadDefaultStream perThread;
  return launch(f, gx, gy, gz, bx, by, bz, sharedBytes, stream, kernelParams, extra);
}

GPUPOOL_DRIVER_API CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f,
                                             void** kernelParams, void** extra) {
  return launchEx(config, f, kernelParams, extra);
}

GPUPOOL_DRIVER_API CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f,
                                                  void** kernelParams, void** extra) {
  PerThreadDefaultStream perThread;
  return launchEx(config, f, kernelParams, extra);
}
