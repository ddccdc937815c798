// What identifies a device to NVML, derived from the Welcome's DeviceInfo: its PCI address, its
// serial and its UUID text, shared by the handle lookups and the identity queries.
#pragma once

#include <string>

#include "client/nvml/nvml_session.h"

namespace gpupool::nvml {

struct PciAddress {
  unsigned domain = 0, bus = 0, device = 0;
};

// From the PCI attributes, as cuDeviceGetPCIBusId answers.
PciAddress pciAddressOf(const VisibleDevice& device);
// "GPU-…" from the UUID bytes (also for a MIG instance, whose uuidText is "MIG-…").
std::string formatGpuUuidOf(const VisibleDevice& device);

}  // namespace gpupool::nvml
