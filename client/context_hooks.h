// Calls between the context code (the lead's) and the driver-surface code (export tables, CLS).
#pragma once

#include <cuda.h>

namespace gpupool::client {

// Implemented by the context code: the primary context handle of dev (the same handle
// cuDevicePrimaryCtxRetain returns), without retaining it. The surface provides a weak default
// that returns CUDA_ERROR_NOT_INITIALIZED, so this may be left undefined in unit tests.
CUresult primaryContextHandle(CUdevice dev, CUcontext* out);

// Implemented by the surface (context_local_storage.cc): runs and removes every context-local
// storage destructor registered for ctx. The context code calls it on cuDevicePrimaryCtxReset
// and cuCtxDestroy. Destructors run without any lock held, so they may call back into CLS.
void destroyContextLocalStorage(CUcontext ctx);

// Implemented by client/coredump_api.cc: drops ctx's core dump settings when it is destroyed.
void forgetCoredumpSettings(CUcontext ctx);

// Implemented by client/module_api.cc: forgets the modules loaded in ctx (their functions, and the
// libraries' and kernels' entries for ctx) once its server side is gone, as the driver's
// cuCtxDestroy and cuDevicePrimaryCtxReset end them: their handles are invalid from then on, and a
// library used again in a context loads again.
void forgetContextModules(CUcontext ctx);

// Implemented by client/stream_event_api.cc: ctx's streams and events become invalid handles when
// its server side is gone, as the driver's are (a later cuStreamDestroy or cuEventDestroy of one
// returns CUDA_ERROR_INVALID_HANDLE instead of reaching into the ended context).
void forgetContextStreamsAndEvents(CUcontext ctx);

}  // namespace gpupool::client
