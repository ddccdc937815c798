// Keeps device addresses out of this process's own address space where the server announced no
// device address window for it to reserve at connection (the cuda backend: the real driver picks
// its addresses, and they are addresses of gpupoold's process, not of ours). Without it a device
// allocation could land on addresses where this process already has host memory, and a unified
// copy or pointer query would then take that host memory for device memory (issue #14: "client
// host addresses and device addresses can never collide").
//
// Each device range this process learns of (cuMemAlloc, pools, VMM reservations, module
// variables, graph allocations, IPC opens) is reserved here, PROT_NONE, as the window is: from
// then on no host mapping of this process can take it. A range stays reserved after its memory
// is freed, because drivers reuse freed device addresses and a host mapping that moved in meanwhile
// would collide with the next allocation there; reservations cost address space only.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace gpupool::client {

class RemoteSession;

// Keeps [address, address + bytes), a device range of `server`, apart from this process's host
// memory: nothing to do inside the window reserved for that server at connection, else reserved
// above. False, with *why, when host memory of this process lies there already.
bool keepDeviceRangeApart(const RemoteSession& server, uint64_t address, uint64_t bytes,
                          std::string* why);

// For a device range whose address the server fixed (module variables, IPC opens): keeps it apart
// as above. False where host memory of this process lies there already: pointers there are then
// ambiguous, and the caller marks the allocation (DeviceAllocation::hostMemoryToo) so that calls
// deciding by address alone refuse them. Says so under GPU_POOL_LOG=1, naming `what`.
bool keepFixedDeviceRangeApart(const RemoteSession& server, const std::string& what,
                               uint64_t address, uint64_t bytes);

// For the calls that can take another address (cuMemAlloc, cuMemAllocAsync, cuMemAddressReserve,
// graph allocation nodes):
// asks `request` for a device range (it sets *address and *bytes, or returns the server's error)
// until one is kept apart from this process's host memory (keepDeviceRangeApart), at most 8
// times. The overlapping ones are held meanwhile, so that the server does not hand them out
// again, and then given to `release`. `what` names the call in the refusal and in the log.
CUresult requestDeviceRangeApart(
    const char* what, const RemoteSession& server,
    const std::function<CUresult(uint64_t* address, uint64_t* bytes)>& request,
    const std::function<void(const std::vector<uint64_t>& overlapping)>& release,
    uint64_t* address);

}  // namespace gpupool::client
