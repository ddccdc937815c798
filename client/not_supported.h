// Answers of the driver entry points the fake libcuda does not implement, or refuses.
#pragma once

#include <cuda.h>

namespace gpupool::client {

// Writes "gpupool: <name> is not supported (returning CUDA_ERROR_NOT_SUPPORTED)" to stderr the
// first time it is called for a given name (thread-safe; later calls for that name are silent)
// and returns CUDA_ERROR_NOT_SUPPORTED. `name` must point to a string with static lifetime.
CUresult reportNotSupported(const char* name);

// Answer of the entry points client/refused_calls.def lists: writes "gpupool: <name> is refused:
// <reason> (returning <codeName>)" to stderr the first time, like reportNotSupported, and returns
// `code`. Every argument must point to a string with static lifetime.
CUresult reportRefused(const char* name, CUresult code, const char* codeName, const char* reason);

}  // namespace gpupool::client
