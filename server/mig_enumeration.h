// Which pool devices a GPU server can offer: every GPU without MIG, and every MIG instance of a GPU
// with MIG enabled (its parent GPU and its profile named, e.g. "1g.10gb"), asked of NVML.
//
// The NVML calls are behind NvmlQueries (server/nvml_queries.h) so the enumeration logic is tested
// against recorded NVML answers (tests/pool/mig_enumeration_test.cc).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "server/nvml_queries.h"

namespace gpupool::server {

// Where a MIG instance sits on its GPU, as NVML lists it (what the client's NVML needs to show
// the GPU at the top and the instance under it, as NVIDIA's does).
struct MigPlacement {
  std::string parentName;          // the GPU's name
  uint64_t parentMemoryBytes = 0;  // the whole GPU's memory
  unsigned index = 0;              // its index under the GPU (nvmlDeviceGetMigDeviceHandleByIndex)
  unsigned maxDevices = 0;         // nvmlDeviceGetMaxMigDeviceCount of the GPU
  int64_t gpuInstanceId = -1;      // -1: NVML did not say
  int64_t computeInstanceId = -1;
  bool modeChangePending = false;  // the GPU leaves MIG mode at its next reset
};

struct PoolDeviceCandidate {
  std::string uuid;  // "GPU-…" or "MIG-…"
  std::string name;
  uint64_t memoryBytes = 0;
  unsigned gpuIndex = 0;    // NVML index of the GPU (the parent, for a MIG instance)
  std::string parentUuid;   // MIG: the parent GPU; empty for a whole GPU
  std::string profile;      // MIG: e.g. "1g.10gb", from the instance's name
  bool migPending = false;  // the GPU's MIG mode changes at the next reset
  MigPlacement mig;         // MIG instances only
};

// Enumerates in NVML order: a GPU with MIG enabled contributes its instances (not itself); a GPU
// without contributes itself. Empty MIG slots (NOT_FOUND) are skipped. Any other NVML failure
// stops with *error naming the call and the GPU.
std::vector<PoolDeviceCandidate> enumeratePoolDevices(NvmlQueries& nvml, std::string* error);

// The candidate whose UUID has the bytes `uuid` (what cuDeviceGetUuid reports for a GPU or, under
// CUDA_VISIBLE_DEVICES=MIG-…, a MIG instance); null when NVML lists no such device.
const PoolDeviceCandidate* findPoolDevice(const std::vector<PoolDeviceCandidate>& candidates,
                                          const std::array<uint8_t, 16>& uuid);

// The MIG profile in an instance name such as "NVIDIA A100-SXM4-40GB MIG 1g.5gb" ("1g.5gb").
std::string migProfileFromName(const std::string& name);

}  // namespace gpupool::server
