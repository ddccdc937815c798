// Marks a hand-written driver entry point: a strong, exported definition that overrides the
// generated weak stub of the same name (client/gen). Files that use it are compiled with
// __CUDA_API_VERSION_INTERNAL so each name denotes exactly that ABI (no cuda.h renaming).
#pragma once

#include <cuda.h>

#define GPUPOOL_DRIVER_API extern "C" __attribute__((visibility("default")))

namespace gpupool::wire {}
namespace wire = gpupool::wire;
