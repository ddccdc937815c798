// CUDA_VISIBLE_DEVICES as CUDA reads it, for libcuda.so.1 and libnvidia-ml.so.1 alike: pool
// ordinals or "GPU-<hex>" / "MIG-<hex>" UUID prefixes, in the order given; the list ends at the
// first entry that names no device. The pool is every device of every server of GPU_POOL_ENDPOINT,
// in list order, so one UUID list names devices across several servers.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <vector>

namespace gpupool::client {

using DeviceUuid = std::array<unsigned char, 16>;

// The indices into `uuids` (every device of the pool, in pool order) that `visible` selects, in
// its order; every index when `visible` is null (the variable is unset).
std::vector<size_t> visibleDeviceIndices(const char* visible, const std::vector<DeviceUuid>& uuids);

// The 32 lower-case hex digits of a UUID.
std::string uuidHex(const DeviceUuid& uuid);

}  // namespace gpupool::client
