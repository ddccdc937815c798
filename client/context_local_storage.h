// Context-local storage (CLS): the per-context key/value slots cudart keeps its state in,
// served through the CONTEXT_LOCAL_STORAGE_INTERFACE_V0301 export table.
#pragma once

#include <cuda.h>

#include "context_hooks.h"

namespace gpupool::client {

// Called with (ctx, key, value) when ctx is destroyed or its primary context reset.
using ClsDestructor = void (*)(CUcontext ctx, void* key, void* value);

// In all three, ctx == nullptr means the calling thread's current context (cuCtxGetCurrent);
// when there is none they return CUDA_ERROR_INVALID_CONTEXT (or cuCtxGetCurrent's error).
// Thread-safe.

// Stores value (and dtor, which may be null) under (ctx, key), replacing any earlier entry
// without running its destructor.
CUresult clsPut(CUcontext ctx, void* key, void* value, ClsDestructor dtor);

// Removes (ctx, key) without running its destructor; absent keys are not an error.
CUresult clsDelete(CUcontext ctx, void* key);

// *value = the value stored under (ctx, key); CUDA_ERROR_INVALID_HANDLE when absent,
// CUDA_ERROR_INVALID_VALUE when value is null.
CUresult clsGet(void** value, CUcontext ctx, void* key);

}  // namespace gpupool::client
