// Managed memory (client/managed_memory_api.cc) as the other API families meet it: freeing an
// allocation, a context going away, and synchronous copies into managed memory.
#pragma once

#include <cuda.h>

#include "driver_state.h"

namespace gpupool::client {

// cuMemFree of a managed allocation at `base`: unmaps its host mirror and frees it on the server.
CUresult freeManagedAllocation(CUdeviceptr base, const DeviceAllocation& info);

// The server side of `ctx` is gone: its managed allocations' mirrors go too.
void dropManagedAllocationsOf(ContextObject* ctx);

// After a synchronous copy or memset wrote [dst, ...) in `ctx`: when dst is managed memory, the
// host mirror takes the device's changes now, as the host may read it as soon as the call returns.
CUresult refreshManagedAfterWrite(ContextObject* ctx, CUdeviceptr dst);

}  // namespace gpupool::client
