// gpupool's NVML library (libnvidia-ml.so.1), loaded at run time the way nvidia-smi loads
// NVIDIA's: `gpupool smi` is built on the same answers every NVML program on this host gets.
#pragma once

#define NVML_NO_UNVERSIONED_FUNC_DEFS  // name each entry point by the version it is
#include <nvml.h>

#include <memory>
#include <optional>
#include <string>

namespace gpupool::tools {

class NvmlLibrary {
 public:
  // Loads libnvidia-ml.so.1 from gpupool's library directory and initializes NVML; nothing, with
  // *error saying why and what to do, when either fails.
  static std::unique_ptr<NvmlLibrary> open(std::string* error);
  ~NvmlLibrary();  // nvmlShutdown; the library stays loaded
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  const char* errorString(nvmlReturn_t result) const;

  // The entry points smi uses, resolved by their versioned names.
#define GPUPOOL_NVML_ENTRY_POINTS(X)     \
  X(nvmlInit_v2)                         \
  X(nvmlShutdown)                        \
  X(nvmlErrorString)                     \
  X(nvmlSystemGetDriverVersion)          \
  X(nvmlSystemGetCudaDriverVersion_v2)   \
  X(nvmlSystemGetProcessName)            \
  X(nvmlDeviceGetCount_v2)               \
  X(nvmlDeviceGetHandleByIndex_v2)       \
  X(nvmlDeviceGetIndex)                  \
  X(nvmlDeviceGetName)                   \
  X(nvmlDeviceGetUUID)                   \
  X(nvmlDeviceGetSerial)                 \
  X(nvmlDeviceGetPciInfo_v3)             \
  X(nvmlDeviceGetMemoryInfo)             \
  X(nvmlDeviceGetUtilizationRates)       \
  X(nvmlDeviceGetTemperature)            \
  X(nvmlDeviceGetPowerUsage)             \
  X(nvmlDeviceGetPowerManagementLimit)   \
  X(nvmlDeviceGetFanSpeed)               \
  X(nvmlDeviceGetClockInfo)              \
  X(nvmlDeviceGetMaxClockInfo)           \
  X(nvmlDeviceGetPerformanceState)       \
  X(nvmlDeviceGetComputeMode)            \
  X(nvmlDeviceGetPersistenceMode)        \
  X(nvmlDeviceGetEccMode)                \
  X(nvmlDeviceGetMigMode)                \
  X(nvmlDeviceGetMaxMigDeviceCount)      \
  X(nvmlDeviceGetMigDeviceHandleByIndex) \
  X(nvmlDeviceGetGpuInstanceId)          \
  X(nvmlDeviceGetComputeInstanceId)      \
  X(nvmlDeviceGetCudaComputeCapability)  \
  X(nvmlDeviceGetComputeRunningProcesses_v3)

#define GPUPOOL_NVML_MEMBER(name) decltype(&::name) name = nullptr;
  GPUPOOL_NVML_ENTRY_POINTS(GPUPOOL_NVML_MEMBER)
#undef GPUPOOL_NVML_MEMBER

 private:
  NvmlLibrary() = default;
  void* handle_ = nullptr;
  bool initialized_ = false;
};

}  // namespace gpupool::tools
