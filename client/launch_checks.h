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
// Checks a launch attribute that kernel graph nodes and cuLaunchKernelEx share, by value: hints
// that change speed, not results (priority, access-policy window, memory sync domain and map,
// cluster scheduling preference, NVLink-centric scheduling) and `cooperative` are accepted, as
// is a cluster of at most 1x1x1; anything else is refused with CUDA_ERROR_INVALID_VALUE and the
// reason, naming `who`. Sets *cooperative when the attribute asks for a cooperative launch.
CUresult checkKernelAttribute(const char* who, int id, const CUlaunchAttributeValue& value,
                              bool* cooperative);

}  // namespace gpupool::client
