// The `cuda` backend: runs client work on the real CUDA driver, dlopened from a path.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/backend.h"

namespace gpupool::transport {
class PinnedMemory;
}

namespace gpupool::server {

// Loads the driver at `driverPath` (e.g. "libcuda.so.1"), initializes it and snapshots up to
// `maxDevices` devices (-1 = all): name, UUID, PCI location, total memory and every
// CUdevice_attribute (an attribute the driver refuses reads as 0). Returns null and sets *error
// when the driver cannot be loaded, initialized or enumerated. Device address windows are not
// known for the real driver, so deviceAddressWindow() is (0, 0). Contexts note their pinned
// staging buffers in `pinnedMemory` (when given), which must outlive the backend.
std::unique_ptr<Backend> makeCudaBackend(const std::string& driverPath, int maxDevices,
                                         std::string* error,
                                         transport::PinnedMemory* pinnedMemory = nullptr);

// One pool device chosen among the driver's: by ordinal, or by UUID ("GPU-…", or a MIG instance
// "MIG-…", matched against cuDeviceGetUuid).
struct CudaDeviceSelection {
  std::optional<int> index;
  std::string uuid;
};

// The same, serving exactly `selections`, in that order. When a selection names a MIG instance,
// CUDA_VISIBLE_DEVICES is set to the selected UUIDs before cuInit (see cuda_backend.cc). A
// selection that names no driver device, or the same device as an earlier one, fails: null,
// *error the reason and *failedSelection its position (-1 when no single selection is at fault).
std::unique_ptr<Backend> makeCudaBackend(const std::string& driverPath,
                                         const std::vector<CudaDeviceSelection>& selections,
                                         std::string* error, int* failedSelection,
                                         transport::PinnedMemory* pinnedMemory = nullptr);

}  // namespace gpupool::server
