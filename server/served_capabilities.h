// What the pool tells clients a device can do: the device's own attributes, except those naming a
// capability the pool does not serve, which read as "not supported", and managed memory, which the
// pool serves itself on every device (without concurrent access). Libraries pick their feature
// path from these attributes (NCCL enables cuMem when VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED is 1), so
// advertising a capability the client refuses would send them down a path that fails.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <span>
#include <vector>

namespace gpupool::server {

struct WithheldCapability {
  CUdevice_attribute attribute;
  int32_t servedValue;  // what clients read instead of the device's value
  const char* reason;
};

// Every attribute the pool answers differently from the device, with its reason.
std::span<const WithheldCapability> withheldCapabilities();

// `deviceAttributes` (index = CUdevice_attribute) as clients see them. `sessionsShareEvents`: the
// backend shares events between sessions (Backend::sharesEventsBetweenSessions), so IPC event
// handles are served and IPC_EVENT_SUPPORTED reads 1.
std::vector<int32_t> servedAttributes(const std::vector<int32_t>& deviceAttributes,
                                      bool sessionsShareEvents = false);

}  // namespace gpupool::server
