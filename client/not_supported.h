// Answer of every driver entry point the fake libcuda does not implement.
#pragma once

#include <cuda.h>

namespace gpupool::client {

// Writes "gpupool: <name> is not supported (returning CUDA_ERROR_NOT_SUPPORTED)" to stderr the
// first time it is called for a given name (thread-safe; later calls for that name are silent)
// and returns CUDA_ERROR_NOT_SUPPORTED. `name` must point to a string with static lifetime.
CUresult reportNotSupported(const char* name);

}  // namespace gpupool::client
