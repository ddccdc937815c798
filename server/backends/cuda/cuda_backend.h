// The `cuda` backend: runs client work on the real CUDA driver, dlopened from a path.
#pragma once

#include <memory>
#include <string>

#include "server/backend.h"

namespace gpupool::server {

// Loads the driver at `driverPath` (e.g. "libcuda.so.1"), initializes it and snapshots up to
// `maxDevices` devices (-1 = all): name, UUID, PCI location, total memory and every
// CUdevice_attribute (an attribute the driver refuses reads as 0). Returns null and sets *error
// when the driver cannot be loaded, initialized or enumerated. Device address windows are not
// known for the real driver, so deviceAddressWindow() is (0, 0).
std::unique_ptr<Backend> makeCudaBackend(const std::string& driverPath, int maxDevices,
                                         std::string* error);

}  // namespace gpupool::server
