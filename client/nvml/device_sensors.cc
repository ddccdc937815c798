// What the server's NVML reads of a device (docs/nvml.md, "Where answers come from"): temperature,
// power, fan, ECC counts, BAR1 and the board serial, from the cached status reply. A figure the
// server did not read (every one on the emu, which has no sensors) is NOT_SUPPORTED, never made up.
#include "client/nvml/nvml_not_supported.h"
#include "client/nvml/nvml_session.h"

using namespace gpupool::nvml;

namespace {

// The server's reading of `device`, or the error: the handle's, the server's, or NOT_SUPPORTED
// (named `what`) when the server read no `figure`.
template <typename Figure>
nvmlReturn_t sensorFigure(nvmlDevice_t device, const char* what, Figure figure, int64_t* out) {
  LiveStatus::Device live;
  if (nvmlReturn_t r = liveDeviceStatus(device, &live); r != NVML_SUCCESS) return r;
  int64_t value = figure(live.sensors);
  if (value < 0) return reportNotSupported(what);
  *out = value;
  return NVML_SUCCESS;
}

nvmlReturn_t unsignedFigure(nvmlDevice_t device, unsigned int* out, const char* what,
                            int64_t ServerSensors::*field) {
  nvmlReturn_t r;
  if (!deviceOf(device, &r)) return r;
  if (!out) return NVML_ERROR_INVALID_ARGUMENT;
  int64_t value = 0;
  r = sensorFigure(
      device, what, [field](const ServerSensors& s) { return s.*field; }, &value);
  if (r == NVML_SUCCESS) *out = static_cast<unsigned>(value);
  return r;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetTemperature(
    nvmlDevice_t device, nvmlTemperatureSensors_t sensorType, unsigned int* temp) {
  if (sensorType != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
  return unsignedFigure(device, temp, "nvmlDeviceGetTemperature", &ServerSensors::temperatureC);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device,
                                                                            unsigned int* power) {
  return unsignedFigure(device, power, "nvmlDeviceGetPowerUsage", &ServerSensors::powerUsageMw);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(
    nvmlDevice_t device, unsigned int* limit) {
  return unsignedFigure(device, limit, "nvmlDeviceGetEnforcedPowerLimit",
                        &ServerSensors::powerLimitMw);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetPowerManagementLimit(
    nvmlDevice_t device, unsigned int* limit) {
  return unsignedFigure(device, limit, "nvmlDeviceGetPowerManagementLimit",
                        &ServerSensors::powerManagementLimitMw);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t device,
                                                                          unsigned int* speed) {
  return unsignedFigure(device, speed, "nvmlDeviceGetFanSpeed", &ServerSensors::fanSpeedPercent);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetTotalEccErrors(
    nvmlDevice_t device, nvmlMemoryErrorType_t errorType, nvmlEccCounterType_t counterType,
    unsigned long long* eccCounts) {
  nvmlReturn_t r;
  if (!deviceOf(device, &r)) return r;
  if (!eccCounts || errorType >= NVML_MEMORY_ERROR_TYPE_COUNT ||
      counterType >= NVML_ECC_COUNTER_TYPE_COUNT) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  int64_t value = 0;
  r = sensorFigure(
      device, "nvmlDeviceGetTotalEccErrors",
      [&](const ServerSensors& s) { return s.ecc[errorType][counterType]; }, &value);
  if (r == NVML_SUCCESS) *eccCounts = static_cast<unsigned long long>(value);
  return r;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetBAR1MemoryInfo(
    nvmlDevice_t device, nvmlBAR1Memory_t* bar1Memory) {
  nvmlReturn_t r;
  if (!deviceOf(device, &r)) return r;
  if (!bar1Memory) return NVML_ERROR_INVALID_ARGUMENT;
  LiveStatus::Device live;
  if ((r = liveDeviceStatus(device, &live)) != NVML_SUCCESS) return r;
  if (live.sensors.bar1Total < 0 || live.sensors.bar1Used < 0) {
    return reportNotSupported("nvmlDeviceGetBAR1MemoryInfo");
  }
  bar1Memory->bar1Total = static_cast<unsigned long long>(live.sensors.bar1Total);
  bar1Memory->bar1Used = static_cast<unsigned long long>(live.sensors.bar1Used);
  bar1Memory->bar1Free = bar1Memory->bar1Total - bar1Memory->bar1Used;
  return NVML_SUCCESS;
}

// The board serial the server's NVML reports; a device without one (the emu) has none to give.
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device,
                                                                        char* serial,
                                                                        unsigned int length) {
  nvmlReturn_t r;
  if (!deviceOf(device, &r)) return r;
  if (!serial) return NVML_ERROR_INVALID_ARGUMENT;
  LiveStatus::Device live;
  if ((r = liveDeviceStatus(device, &live)) != NVML_SUCCESS) return r;
  if (live.sensors.serial.empty()) return reportNotSupported("nvmlDeviceGetSerial");
  return copyText(live.sensors.serial, serial, length);
}

}  // extern "C"
