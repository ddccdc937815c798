// Peer-to-peer between pool devices, as NCCL and frameworks ask NVML before they try it: no two
// devices the pool serves map each other's memory (libcuda's cuDeviceCanAccessPeer answers 0 and
// copies between them are staged, client/device_api.cc), so every capability between any two of
// them is NVML_P2P_STATUS_NOT_SUPPORTED. The PCIe and NVLink topology of the server's GPUs is not
// the client's to use: those queries stay refused (docs/nvml.md).
#include "client/nvml/nvml_session.h"

using namespace gpupool::nvml;

extern "C" {

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetP2PStatus(
    nvmlDevice_t device1, nvmlDevice_t device2, nvmlGpuP2PCapsIndex_t p2pIndex,
    nvmlGpuP2PStatus_t* p2pStatus) {
  nvmlReturn_t r;
  if (!deviceOf(device1, &r) || !deviceOf(device2, &r)) return r;
  int caps = static_cast<int>(p2pIndex);
  if (!p2pStatus || caps < NVML_P2P_CAPS_INDEX_READ || caps >= NVML_P2P_CAPS_INDEX_UNKNOWN) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  *p2pStatus = NVML_P2P_STATUS_NOT_SUPPORTED;
  return NVML_SUCCESS;
}

}  // extern "C"
