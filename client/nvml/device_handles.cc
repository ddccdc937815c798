// Device count and handles: by index, UUID, PCI bus id and board serial (the serial only where the
// server's NVML reports one).
#include <cstdio>
#include <cstring>
#include <string>

#include "client/nvml/device_identity.h"
#include "client/nvml/nvml_session.h"

using namespace gpupool::nvml;

namespace {

// The first handle (top-level devices first, then MIG devices when `migDevicesToo`) whose device
// `matches`.
template <typename Matches>
nvmlReturn_t findHandle(nvmlDevice_t* device, bool migDevicesToo, Matches&& matches) {
  if (!device) return NVML_ERROR_INVALID_ARGUMENT;
  if (nvmlReturn_t r = checkInitialized(); r != NVML_SUCCESS) return r;
  for (nvmlDevice_t handle : allHandles()) {
    if (!migDevicesToo && handle->kind == nvmlDevice_st::Kind::migDevice) continue;
    nvmlReturn_t r;
    if (const VisibleDevice* d = deviceOf(handle, &r); d && matches(*d)) {
      *device = handle;
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

// "domain:bus:device.function" or "bus:device.function", hex, any case.
bool parseBusId(const char* text, unsigned* domain, unsigned* bus, unsigned* device) {
  unsigned function = 0;
  if (std::sscanf(text, "%x:%x:%x.%x", domain, bus, device, &function) == 4) return true;
  *domain = 0;
  return std::sscanf(text, "%x:%x.%x", bus, device, &function) == 3;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  if (nvmlReturn_t r = checkInitialized(); r != NVML_SUCCESS) return r;
  *count = topLevelCount();
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetCount(unsigned int* count) {
  return nvmlDeviceGetCount_v2(count);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(
    unsigned int index, nvmlDevice_t* device) {
  if (!device) return NVML_ERROR_INVALID_ARGUMENT;
  if (nvmlReturn_t r = checkInitialized(); r != NVML_SUCCESS) return r;
  if (index >= topLevelCount()) return NVML_ERROR_INVALID_ARGUMENT;
  *device = topLevelHandle(index);
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetHandleByIndex(
    unsigned int index, nvmlDevice_t* device) {
  return nvmlDeviceGetHandleByIndex_v2(index, device);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetHandleByUUID(
    const char* uuid, nvmlDevice_t* device) {
  if (!uuid) return NVML_ERROR_INVALID_ARGUMENT;
  // A MIG device's UUID finds its MIG device handle, as NVIDIA's does.
  return findHandle(device, /*migDevicesToo=*/true, [&](const VisibleDevice& d) {
    return d.uuidText == uuid || formatGpuUuidOf(d) == uuid;
  });
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(
    const char* pciBusId, nvmlDevice_t* device) {
  unsigned domain = 0, bus = 0, slot = 0;
  if (!pciBusId || !parseBusId(pciBusId, &domain, &bus, &slot)) return NVML_ERROR_INVALID_ARGUMENT;
  // A MIG instance shares its GPU's address: the GPU is answered.
  return findHandle(device, /*migDevicesToo=*/false, [&](const VisibleDevice& d) {
    PciAddress a = pciAddressOf(d);
    return a.domain == domain && a.bus == bus && a.device == slot;
  });
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetHandleByPciBusId(
    const char* pciBusId, nvmlDevice_t* device) {
  return nvmlDeviceGetHandleByPciBusId_v2(pciBusId, device);
}

// The GPU whose board serial the server's NVML reports as `serial` (the first, as NVIDIA's answers,
// where a board has several). NOT_FOUND
// when none matches, which includes every device of a server without NVML.
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetHandleBySerial(
    const char* serial, nvmlDevice_t* device) {
  if (!serial || !device) return NVML_ERROR_INVALID_ARGUMENT;
  if (nvmlReturn_t r = checkInitialized(); r != NVML_SUCCESS) return r;
  for (unsigned i = 0; i < topLevelCount(); ++i) {
    LiveStatus::Device live;
    if (nvmlReturn_t r = liveDeviceStatus(topLevelHandle(i), &live); r != NVML_SUCCESS) return r;
    if (!live.sensors.serial.empty() && live.sensors.serial == serial) {
      *device = topLevelHandle(i);
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

}  // extern "C"
