// Host functions in stream order, for the other files that place one (graph launches).
#pragma once

#include <cuda.h>

namespace gpupool::client {

// Places `fn(data)` in `stream`'s order, as cuLaunchHostFunc does outside capture: the call
// returns at once and a client thread runs the function when the stream reaches it.
CUresult enqueueHostFunction(CUstream stream, CUhostFn fn, void* data);

}  // namespace gpupool::client
