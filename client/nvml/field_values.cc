// nvmlDeviceGetFieldValues: NVML's batch query by field id. The call succeeds and each value
// carries its own status, as NVIDIA's does; this library answers no field yet, so every value's
// status is NOT_SUPPORTED (and the value untouched). Refusing the whole call instead, as the
// generated stub did, made nvidia-smi -q print whatever its buffer held as power limits: it reads
// the values of a call that failed.
#include <chrono>
#include <string>

#include "client/client_log.h"
#include "client/nvml/nvml_session.h"

using namespace gpupool::nvml;

extern "C" {

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetFieldValues(
    nvmlDevice_t device, int valuesCount, nvmlFieldValue_t* values) {
  if (nvmlReturn_t r = checkInitialized(); r != NVML_SUCCESS) return r;
  nvmlReturn_t r;
  if (!deviceOf(device, &r)) return r;
  if (!values || valuesCount < 0) return NVML_ERROR_INVALID_ARGUMENT;
  const long long now = std::chrono::duration_cast<std::chrono::microseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
  for (int i = 0; i < valuesCount; ++i) {
    values[i].timestamp = now;
    values[i].latencyUsec = 0;
    values[i].nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
  }
  if (valuesCount > 0 && gpupool::client::logLevel() >= 1) {
    std::string ids;
    for (int i = 0; i < valuesCount; ++i) {
      ids += (i ? ", " : "") + std::to_string(values[i].fieldId);
    }
    gpupool::client::logLine("nvmlDeviceGetFieldValues: no field is answered (fields " + ids +
                             ": each has status NVML_ERROR_NOT_SUPPORTED)");
  }
  return NVML_SUCCESS;
}

}  // extern "C"
