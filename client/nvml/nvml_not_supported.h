// The answer of every NVML function libnvidia-ml.so.1 does not implement (the generated stubs),
// and of those the emu cannot answer honestly (temperature, power, fans, events).
#pragma once

#include <nvml.h>

namespace gpupool::nvml {

// Logs "gpupool: <name> is not supported (returning NVML_ERROR_NOT_SUPPORTED)" at GPU_POOL_LOG >=
// 1, once per name, and returns NVML_ERROR_NOT_SUPPORTED. `name` must have static lifetime.
nvmlReturn_t reportNotSupported(const char* name);

// The same for what NVIDIA's library answers only to privileged callers (NVML_ERROR_NO_PERMISSION).
nvmlReturn_t reportNoPermission(const char* name);

}  // namespace gpupool::nvml
