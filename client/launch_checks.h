// The checks cuLaunchKernel makes before anything is sent (launch_api.cc), shared with kernel
// graph nodes, which the driver checks the same way when they are set.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <vector>

#include "driver_state.h"

namespace gpupool::client {

// Packs the parameters given as kernelParams or extra into one block laid out as `f` declares.
CUresult packParams(const FunctionObject& f, void** kernelParams, void** extra,
                    std::vector<uint8_t>* block);
// Checks the shape against the device and the function as the driver does, locally, so a launch
// needs no answer from the server.
CUresult checkShape(const FunctionObject& f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                    unsigned by, unsigned bz, unsigned sharedBytes);

}  // namespace gpupool::client
