// Profiler control and driver logs. No profiler is ever attached to the pool's devices from the
// client, and this driver keeps no log buffer, so these are the calls a real driver answers when
// no profiler is attached and no message was logged: successes that change nothing, with the
// argument checks cuda.h documents.
#include <cudaProfiler.h>

#include <cstdio>
#include <memory>

#include "callback_registry.h"
#include "driver_export.h"
#include "driver_state.h"

using namespace gpupool::client;

namespace {

CUresult requireCurrentContext() {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  return DriverState::get().current() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

// The registered log callbacks: never called, since nothing is logged.
CallbackRegistry<CUlogsCallbackHandle>& logCallbacks() {
  static CallbackRegistry<CUlogsCallbackHandle> callbacks;
  return callbacks;
}

// This driver's log is always empty, so every iterator is at its end: position 0.
constexpr CUlogIterator kLogEnd = 0;

}  // namespace

// cuProfilerInitialize is refused in refused_calls.def, as NVIDIA's driver has since CUDA 12.0.

GPUPOOL_DRIVER_API CUresult cuProfilerStart() { return requireCurrentContext(); }

GPUPOOL_DRIVER_API CUresult cuProfilerStop() { return requireCurrentContext(); }

GPUPOOL_DRIVER_API CUresult cuLogsRegisterCallback(CUlogsCallback callback, void*,
                                                   CUlogsCallbackHandle* handle) {
  if (!callback) return CUDA_ERROR_INVALID_VALUE;
  CUlogsCallbackHandle registered = logCallbacks().add(0);
  if (handle) *handle = registered;  // optional, as cuda.h says
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuLogsUnregisterCallback(CUlogsCallbackHandle handle) {
  return logCallbacks().remove(handle, 0) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

GPUPOOL_DRIVER_API CUresult cuLogsCurrent(CUlogIterator* iterator, unsigned int flags) {
  if (!iterator || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  *iterator = kLogEnd;
  return CUDA_SUCCESS;
}

// Writes the (empty) log to the file, creating or truncating it as a dump of no entries does.
GPUPOOL_DRIVER_API CUresult cuLogsDumpToFile(CUlogIterator* iterator, const char* path,
                                             unsigned int flags) {
  if (!path || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path, "w"), std::fclose);
  if (!file) return CUDA_ERROR_INVALID_VALUE;
  if (iterator) *iterator = kLogEnd;
  return CUDA_SUCCESS;
}

// No entries: *size becomes 0 and the buffer is left as it was.
GPUPOOL_DRIVER_API CUresult cuLogsDumpToMemory(CUlogIterator* iterator, char* buffer, size_t* size,
                                               unsigned int flags) {
  if (!buffer || !size || *size == 0 || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  // Nothing logged: size 0 and the buffer untouched, no terminator written (observed on driver
  // 580.159.04, H200).
  *size = 0;
  if (iterator) *iterator = kLogEnd;
  return CUDA_SUCCESS;
}
