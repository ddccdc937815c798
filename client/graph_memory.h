// Graph memory: the allocations that memory alloc nodes make and memory free nodes free
// (cuGraphAddMemAllocNode, cuGraphAddMemFreeNode, the capture of cuMemAllocAsync/cuMemFreeAsync),
// and the device's graph memory attributes and trim (client/graph_memory_api.cc).
//
// An allocation's address is fixed when its node is created and stays the same for every launch,
// so the node holds a block of device memory from then on: a block of the context's graph pool, a
// created pool on the server (existing mempool requests) whose memory counts against the tenant's
// quota like any pool's. The pool keeps freed blocks (release threshold: all) until
// cuDeviceGraphMemTrim, as the driver's graph allocator caches its memory. Alloc and free nodes
// reach the server as empty nodes: what they change is the allocation's state, kept here, under
// graphMutex(): live from a launch of its alloc node until a launch of a free node, cuMemFreeAsync
// or cuMemFree (or the next launch of an exec made with AUTO_FREE_ON_LAUNCH). The block goes back
// to the pool when no node names the allocation any more and it is not live.
#pragma once

#include <cuda.h>

#include <memory>

#include "graph_model.h"

namespace gpupool::client {

struct GraphAllocation;

// Fills `node` (a fresh one, to be added to `graph`) as an alloc node of `p.bytesize` bytes on
// `p.poolProps.location`, in `ctx` (null: the current context when on that device, else the
// device's primary context); allocates its block and writes its address to p.dptr.
CUresult setAllocNode(GraphNodeObject* node, GraphObject* graph, CUDA_MEM_ALLOC_NODE_PARAMS* p,
                      ContextObject* ctx, const char* call);
// Fills `node` (to be added to `graph`) as a free node of the graph allocation at `dptr`, under the
// driver's rules (an address an alloc node returned, freed once, in its own graph or others).
CUresult setFreeNode(GraphNodeObject* node, GraphObject* graph, CUdeviceptr dptr, const char* call);

// Whether `graph` has alloc or free nodes (no cloning, no deleting nodes or edges, no child graph
// use, one instantiation at a time).
bool hasMemoryNodes(const GraphObject& graph);
// Instantiation of `graph`: refused while another exec of it exists; then noted as `exec`.
CUresult checkOneMemoryExec(const GraphObject& graph);
void noteMemoryExec(const GraphObject& graph, GraphExecObject* exec);
// cuGraphExecDestroy and cuGraphDestroy forget their objects.
void forgetMemoryExec(GraphExecObject* exec);
void forgetMemoryGraph(const GraphObject* graph);
// A launch of `exec` on `stream` (server stream `remoteStream`): its allocations become live and
// those it frees stop being; refused (CUDA_ERROR_INVALID_VALUE) when an allocation is still live
// from an earlier launch without AUTO_FREE_ON_LAUNCH, or a free node's allocation is not live.
CUresult launchGraphMemory(GraphExecObject* exec, CUstream stream, uint64_t remoteStream);

// cuMemFreeAsync / cuMemFree of a graph allocation: true when `dptr` is one (the result in
// *result), false for other memory. Call without graphMutex() held.
bool freeGraphAllocation(CUdeviceptr dptr, ContextObject* ctx, CUstream stream,
                         uint64_t remoteStream, const char* call, CUresult* result);

}  // namespace gpupool::client
