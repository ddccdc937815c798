// NVML's devices as CUDA_VISIBLE_DEVICES selects them, read as libcuda reads it
// (client/visible_devices.h).
#pragma once

#include <string>
#include <vector>

#include "client/nvml/nvml_session.h"

namespace gpupool::nvml {

std::vector<VisibleDevice> selectVisibleDevices(const std::vector<VisibleDevice>& all,
                                                const char* visible);
// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as NVIDIA prints a UUID.
std::string formatGpuUuid(const unsigned char (&uuid)[16]);

}  // namespace gpupool::nvml
