// MIG as NVIDIA's NVML shows it: a MIG-enabled GPU is a top-level device whose instances are MIG
// device handles under it (nvmlDeviceGetMigDeviceHandleByIndex), each with its GPU and compute
// instance ids. The placement comes from the server's NVML through status (nvml_session.h); a
// server without NVML cannot place an instance, which then stays a device of its own.
#include "client/nvml/nvml_not_supported.h"
#include "client/nvml/nvml_session.h"

using namespace gpupool::nvml;

namespace {

bool isMigDevice(nvmlDevice_t device) { return device->kind == nvmlDevice_st::Kind::migDevice; }
bool isMigEnabledGpu(nvmlDevice_t device) { return device->kind == nvmlDevice_st::Kind::migParent; }

// A MIG device's instance id (GPU or compute): NOT_SUPPORTED on any other handle, and where the
// server's NVML did not say.
nvmlReturn_t instanceId(nvmlDevice_t device, unsigned* id, int64_t VisibleDevice::*which,
                        const char* name) {
  nvmlReturn_t r;
  const VisibleDevice* d = deviceOf(device, &r);
  if (!d) return r;
  if (!id) return NVML_ERROR_INVALID_ARGUMENT;
  if (!isMigDevice(device) || d->*which < 0) return reportNotSupported(name);
  *id = static_cast<unsigned>(d->*which);
  return NVML_SUCCESS;
}

}  // namespace

extern "C" {

// A MIG-enabled GPU reports MIG enabled (pending: what it will be after its next reset); a whole
// GPU reports MIG disabled (if it has instances, they are not in this pool). A MIG device has no
// mode of its own.
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMigMode(
    nvmlDevice_t device, unsigned int* currentMode, unsigned int* pendingMode) {
  nvmlReturn_t r;
  const VisibleDevice* d = deviceOf(device, &r);
  if (!d) return r;
  if (!currentMode || !pendingMode) return NVML_ERROR_INVALID_ARGUMENT;
  if (isMigEnabledGpu(device)) {
    *currentMode = NVML_DEVICE_MIG_ENABLE;
    *pendingMode = d->migModeChangePending ? NVML_DEVICE_MIG_DISABLE : NVML_DEVICE_MIG_ENABLE;
    return NVML_SUCCESS;
  }
  if (isMigDevice(device) || !d->parentUuid.empty() || d->uuidText.rfind("MIG-", 0) == 0) {
    return reportNotSupported("nvmlDeviceGetMigMode (of a MIG device)");
  }
  *currentMode = NVML_DEVICE_MIG_DISABLE;
  *pendingMode = NVML_DEVICE_MIG_DISABLE;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceIsMigDeviceHandle(
    nvmlDevice_t device, unsigned int* isMig) {
  nvmlReturn_t r;
  const VisibleDevice* d = deviceOf(device, &r);
  if (!d) return r;
  if (!isMig) return NVML_ERROR_INVALID_ARGUMENT;
  // An instance the server could not place (no NVML there) is still a MIG device.
  *isMig = isMigDevice(device) || (!isMigEnabledGpu(device) && !d->parentUuid.empty()) ? 1 : 0;
  return NVML_SUCCESS;
}

// The GPU's MIG slots, as the server's NVML counts them; 0 for a GPU without MIG enabled.
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(
    nvmlDevice_t device, unsigned int* count) {
  nvmlReturn_t r;
  const VisibleDevice* d = deviceOf(device, &r);
  if (!d) return r;
  if (!count || isMigDevice(device)) return NVML_ERROR_INVALID_ARGUMENT;
  *count = isMigEnabledGpu(device) ? d->migMaxDevices : 0;
  return NVML_SUCCESS;
}

// NOT_FOUND for a slot without an instance this process sees (empty, or another tenant's).
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(
    nvmlDevice_t device, unsigned int index, nvmlDevice_t* migDevice) {
  nvmlReturn_t r;
  const VisibleDevice* d = deviceOf(device, &r);
  if (!d) return r;
  if (!migDevice) return NVML_ERROR_INVALID_ARGUMENT;
  if (!isMigEnabledGpu(device)) {
    return reportNotSupported("nvmlDeviceGetMigDeviceHandleByIndex (of a GPU without MIG)");
  }
  if (index >= d->migMaxDevices) return NVML_ERROR_INVALID_ARGUMENT;
  for (unsigned visible : d->instances) {
    if (visibleDevices()[visible].migIndex == index) {
      *migDevice = handleOfVisible(visible);
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(
    nvmlDevice_t migDevice, nvmlDevice_t* device) {
  nvmlReturn_t r;
  if (!deviceOf(migDevice, &r)) return r;
  if (!device || !isMigDevice(migDevice)) return NVML_ERROR_INVALID_ARGUMENT;
  *device = topLevelHandle(migDevice->parent);
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device,
                                                                               unsigned int* id) {
  return instanceId(device, id, &VisibleDevice::gpuInstanceId,
                    "nvmlDeviceGetGpuInstanceId (of a device that is not a placed MIG device)");
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetComputeInstanceId(
    nvmlDevice_t device, unsigned int* id) {
  return instanceId(device, id, &VisibleDevice::computeInstanceId,
                    "nvmlDeviceGetComputeInstanceId (of a device that is not a placed MIG device)");
}

}  // extern "C"
