// Managed memory (client/managed_memory_api.cc) as the other API families meet it: freeing an
// allocation, a context going away, synchronous copies into managed memory, and the modules'
// __managed__ variables.
#pragma once

#include <cuda.h>

#include <string>

#include "driver_state.h"

namespace gpupool::client {

// cuMemFree of a managed allocation at `base`: unmaps its host mirror and frees it on the server.
CUresult freeManagedAllocation(CUdeviceptr base, const DeviceAllocation& info);

// The server side of `ctx` is gone: its managed allocations' mirrors go too.
void dropManagedAllocationsOf(ContextObject* ctx);

// The __managed__ variable `name` of module m, [address, address+variableBytes): unless a mirror
// already holds it, the server makes the managed memory holding it a managed region, and a host
// mirror takes its pages here, so the address is valid in host code too. That region may hold
// mirrored ones of the same module (a driver that names no allocation for a module's variables
// gives each its pages, joined where they meet): their mirrors give way to it.
CUresult adoptManagedGlobal(ModuleObject* m, const std::string& name, CUdeviceptr address,
                            size_t variableBytes);

// Module m is being unloaded: the mirrors of its __managed__ variables go.
void dropManagedGlobalsOf(ModuleObject* m);

// After a synchronous copy or memset wrote [dst, ...) in `ctx`: when dst is managed memory, the
// host mirror takes the device's changes now, as the host may read it as soon as the call returns.
CUresult refreshManagedAfterWrite(ContextObject* ctx, CUdeviceptr dst);

}  // namespace gpupool::client
