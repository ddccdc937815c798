// Identity queries: name, brand, UUID, PCI info, index, minor number, architecture,
// compute capability, multi-GPU board and memory bus width, all from the Welcome's DeviceInfo.
#include "client/nvml/device_identity.h"

#include <cuda.h>

#include <cstdio>
#include <cstring>

#include "client/nvml/nvml_not_supported.h"
#include "client/nvml/visible_devices.h"

namespace gpupool::nvml {

PciAddress pciAddressOf(const VisibleDevice& d) {
  return {static_cast<unsigned>(d.attribute(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)),
          static_cast<unsigned>(d.attribute(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)),
          static_cast<unsigned>(d.attribute(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID))};
}

std::string formatGpuUuidOf(const VisibleDevice& d) { return formatGpuUuid(d.uuid); }

}  // namespace gpupool::nvml

using namespace gpupool::nvml;

namespace {

// Architecture by compute capability (nvml.h of CUDA 11.8 knows up to Hopper).
nvmlDeviceArchitecture_t architectureOf(int major, int minor) {
  switch (major) {
    case 3:
      return NVML_DEVICE_ARCH_KEPLER;
    case 5:
      return NVML_DEVICE_ARCH_MAXWELL;
    case 6:
      return NVML_DEVICE_ARCH_PASCAL;
    case 7:
      return minor >= 5 ? NVML_DEVICE_ARCH_TURING : NVML_DEVICE_ARCH_VOLTA;
    case 8:
      return minor >= 9 ? NVML_DEVICE_ARCH_ADA : NVML_DEVICE_ARCH_AMPERE;
    case 9:
      return NVML_DEVICE_ARCH_HOPPER;
    default:
      return NVML_DEVICE_ARCH_UNKNOWN;
  }
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device,
                                                                      char* name,
                                                                      unsigned int length) {
  nvmlReturn_t r;
  const VisibleDevice* d = deviceOf(device, &r);
  return d ? copyText(d->name, name, length) : r;
}

// By the product line the name shows; NVML_BRAND_NVIDIA for the rest (the emu's devices).
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t device,
                                                                       nvmlBrandType_t* type) {
  nvmlReturn_t r;
  const VisibleDevice* d = deviceOf(device, &r);
  if (!d) return r;
  if (!type) return NVML_ERROR_INVALID_ARGUMENT;
  if (d->name.find("GeForce") != std::string::npos) {
    *type = NVML_BRAND_GEFORCE;
  } else if (d->name.find("Quadro") != std::string::npos) {
    *type = NVML_BRAND_QUADRO;
  } else if (d->name.find("Tesla") != std::string::npos) {
    *type = NVML_BRAND_TESLA;
  } else if (d->name.find("TITAN") != std::string::npos) {
    *type = NVML_BRAND_TITAN;
  } else {
    *type = NVML_BRAND_NVIDIA;
  }
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device,
                                                                      char* uuid,
                                                                      unsigned int length) {
  nvmlReturn_t r;
  const VisibleDevice* d = deviceOf(device, &r);
  return d ? copyText(d->uuidText, uuid, length) : r;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device,
                                                                            nvmlPciInfo_t* pci) {
  nvmlReturn_t r;
  const VisibleDevice* d = deviceOf(device, &r);
  if (!d) return r;
  if (!pci) return NVML_ERROR_INVALID_ARGUMENT;
  PciAddress a = pciAddressOf(*d);
  std::memset(pci, 0, sizeof *pci);
  pci->domain = a.domain;
  pci->bus = a.bus;
  pci->device = a.device;
  // NVIDIA's vendor id; the device id (upper 16 bits) and subsystem are not known: 0.
  pci->pciDeviceId = 0x10de;
  std::snprintf(pci->busId, sizeof pci->busId, "%08X:%02X:%02X.0", a.domain, a.bus, a.device);
  std::snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.0", a.domain & 0xffff,
                a.bus & 0xff, a.device & 0xff);
  return NVML_SUCCESS;
}

// v1 and v2 fill the same struct (v1 left busId with the legacy 16-byte form).
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device,
                                                                            nvmlPciInfo_t* pci) {
  return nvmlDeviceGetPciInfo_v3(device, pci);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device,
                                                                         nvmlPciInfo_t* pci) {
  nvmlReturn_t r = nvmlDeviceGetPciInfo_v3(device, pci);
  if (r == NVML_SUCCESS) std::memcpy(pci->busId, pci->busIdLegacy, sizeof pci->busIdLegacy);
  return r;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device,
                                                                       unsigned int* index) {
  nvmlReturn_t r;
  if (!deviceOf(device, &r)) return r;
  if (!index) return NVML_ERROR_INVALID_ARGUMENT;
  // A MIG device's index is its slot under its GPU (what GetMigDeviceHandleByIndex takes).
  const VisibleDevice* d = deviceOf(device, &r);
  *index = device->kind == nvmlDevice_st::Kind::migDevice
               ? d->migIndex
               : static_cast<unsigned>(device - topLevelHandle(0));
  return NVML_SUCCESS;
}

// /dev/nvidia<minor> does not exist here; the GPU's index stands for it, distinct per GPU (a MIG
// device has its GPU's).
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMinorNumber(
    nvmlDevice_t device, unsigned int* minorNumber) {
  nvmlReturn_t r;
  if (!deviceOf(device, &r)) return r;
  if (device->kind == nvmlDevice_st::Kind::migDevice) device = topLevelHandle(device->parent);
  return nvmlDeviceGetIndex(device, minorNumber);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetCudaComputeCapability(
    nvmlDevice_t device, int* major, int* minor) {
  nvmlReturn_t r;
  const VisibleDevice* d = deviceOf(device, &r);
  if (!d) return r;
  if (!major || !minor) return NVML_ERROR_INVALID_ARGUMENT;
  *major = d->attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  *minor = d->attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetArchitecture(
    nvmlDevice_t device, nvmlDeviceArchitecture_t* arch) {
  nvmlReturn_t r;
  const VisibleDevice* d = deviceOf(device, &r);
  if (!d) return r;
  if (!arch) return NVML_ERROR_INVALID_ARGUMENT;
  *arch = architectureOf(d->attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
                         d->attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR));
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMultiGpuBoard(
    nvmlDevice_t device, unsigned int* multiGpuBool) {
  nvmlReturn_t r;
  const VisibleDevice* d = deviceOf(device, &r);
  if (!d) return r;
  if (!multiGpuBool) return NVML_ERROR_INVALID_ARGUMENT;
  *multiGpuBool = d->attribute(CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD) ? 1 : 0;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMemoryBusWidth(
    nvmlDevice_t device, unsigned int* busWidth) {
  nvmlReturn_t r;
  const VisibleDevice* d = deviceOf(device, &r);
  if (!d) return r;
  if (!busWidth) return NVML_ERROR_INVALID_ARGUMENT;
  int bits = d->attribute(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
  if (bits <= 0) return reportNotSupported("nvmlDeviceGetMemoryBusWidth");
  *busWidth = static_cast<unsigned>(bits);
  return NVML_SUCCESS;
}

}  // extern "C"
