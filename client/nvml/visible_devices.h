// CUDA_VISIBLE_DEVICES as libcuda reads it (client/driver_state.cc): pool ordinals or "GPU-<hex>"
// UUID prefixes, in the order given; the list ends at the first entry that names no device.
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
