// Graph memory (see graph_memory.h): memory alloc and free nodes, their state across launches and
// frees outside the graph, and the device's graph memory attributes and trim.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "client_log.h"
#include "device_address_reservations.h"
#include "driver_export.h"
#include "graph_memory.h"

namespace gpupool::client {

// One allocation of an alloc node: its block in the context's graph pool, held while a node names
// it or it is live. Fields other than the block's are guarded by graphMutex().
struct GraphAllocation : std::enable_shared_from_this<GraphAllocation> {
  GraphAllocation() = default;
  GraphAllocation(const GraphAllocation&) = delete;
  GraphAllocation& operator=(const GraphAllocation&) = delete;
  ~GraphAllocation();  // gives the block back to the graph pool

  ContextObject* context = nullptr;
  uint64_t contextRemote = 0;  // the server context the block is in (stale once it is gone)
  CUdeviceptr address = 0;
  size_t bytes = 0;
  const GraphObject* owner = nullptr;     // the graph its alloc node was made in
  bool freedByOwner = false;              // its owner has a free node for it
  bool freedElsewhere = false;            // another graph has one
  bool live = false;                      // allocated by a launch, not freed since
  std::shared_ptr<GraphAllocation> self;  // held while live: the memory outlives its graphs
  CUstream lastStream = nullptr;          // where it was last allocated or freed, and its server id
  uint64_t lastRemoteStream = 0;
};

namespace {

// The graph allocations by address, for frees (a leaf lock: nothing is called while it is held).
std::mutex& allocationsMutex() {
  static auto* mutex = new std::mutex();
  return *mutex;
}
std::map<CUdeviceptr, std::weak_ptr<GraphAllocation>>& allocationsByAddress() {
  static auto* map = new std::map<CUdeviceptr, std::weak_ptr<GraphAllocation>>();
  return *map;
}

std::shared_ptr<GraphAllocation> findAllocation(CUdeviceptr address) {
  std::lock_guard lock(allocationsMutex());
  auto it = allocationsByAddress().find(address);
  return it == allocationsByAddress().end() ? nullptr : it->second.lock();
}

// A context's graph pool: a created pool on the server that keeps what is freed until trimmed.
struct GraphPool {
  ContextObject* context = nullptr;
  uint64_t contextRemote = 0;
  uint64_t pool = 0;
};

std::mutex& graphPoolsMutex() {
  static auto* mutex = new std::mutex();
  return *mutex;
}
std::vector<GraphPool>& graphPools() {
  static auto* pools = new std::vector<GraphPool>();
  return *pools;
}

// Whether the context `pool` belongs to still has the server context it was made in.
bool poolAlive(const GraphPool& pool) {
  return asContext(reinterpret_cast<CUcontext>(pool.context)) && pool.context->remote &&
         pool.context->remote == pool.contextRemote;
}

// The live graph pools of device `dev`.
std::vector<GraphPool> devicePools(CUdevice dev) {
  std::lock_guard lock(graphPoolsMutex());
  auto& pools = graphPools();
  std::erase_if(pools, [](const GraphPool& p) { return !poolAlive(p); });
  std::vector<GraphPool> found;
  for (const GraphPool& p : pools) {
    if (p.context->device == dev) found.push_back(p);
  }
  return found;
}

CUresult graphPoolOf(ContextObject* ctx, uint64_t* pool) {
  std::lock_guard lock(graphPoolsMutex());
  for (const GraphPool& p : graphPools()) {
    if (p.context == ctx && poolAlive(p)) {
      *pool = p.pool;
      return CUDA_SUCCESS;
    }
  }
  GraphPool made{ctx, ctx->remote, 0};
  CUresult r = ctx->server->call(
      "cuGraphAddMemAllocNode", [&](wire::Request::Builder b) { b.setMemPoolCreate(ctx->remote); },
      {},
      [&](wire::Response::Reader reply, ReplyBulk&) {
        made.pool = reply.getHandle();
        return CUDA_SUCCESS;
      });
  if (r != CUDA_SUCCESS) return r;
  // Freed graph memory stays cached for the next allocation until cuDeviceGraphMemTrim.
  r = ctx->server->call("cuGraphAddMemAllocNode", [&](wire::Request::Builder b) {
    auto m = b.initMemPoolAttribute();
    m.setContext(ctx->remote);
    m.setPool(made.pool);
    m.setAttribute(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD);
    m.setSet(true);
    m.setValue(std::numeric_limits<uint64_t>::max());
  });
  if (r != CUDA_SUCCESS) return r;
  graphPools().push_back(made);
  *pool = made.pool;
  return CUDA_SUCCESS;
}

// What the executable graph's launches do to graph memory: the allocations its alloc nodes make
// and those its free nodes free.
void memoryNodes(const GraphObject& graph, std::vector<GraphAllocation*>* allocs,
                 std::vector<GraphAllocation*>* frees) {
  for (const auto& n : graph.nodes) {
    if (n->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) allocs->push_back(n->memory.get());
    if (n->type == CU_GRAPH_NODE_TYPE_MEM_FREE) frees->push_back(n->memory.get());
  }
}

// Executable graphs of graphs with memory nodes, and the graph each was made from (null once that
// graph is destroyed); under graphMutex().
std::map<GraphExecObject*, const GraphObject*>& memoryExecs() {
  static auto* execs = new std::map<GraphExecObject*, const GraphObject*>();
  return *execs;
}

}  // namespace

GraphAllocation::~GraphAllocation() {
  {
    std::lock_guard lock(allocationsMutex());
    auto it = allocationsByAddress().find(address);
    if (it != allocationsByAddress().end() && it->second.expired()) {
      allocationsByAddress().erase(it);
    }
  }
  {
    std::lock_guard lock(DriverState::get().mutex);
    auto& allocations = DriverState::get().deviceAllocations;
    auto it = allocations.find(address);
    if (it != allocations.end() && it->second.context == context) allocations.erase(it);
  }
  if (!asContext(reinterpret_cast<CUcontext>(context)) || context->remote != contextRemote) {
    return;  // the context went, and the block with it
  }
  // In order after the launches and frees that used it, on the stream they were on (the null
  // stream when that stream is gone).
  uint64_t stream = lastStream && !asStream(lastStream) ? 0 : lastRemoteStream;
  (void)context->server->post("cuGraphExecDestroy", [&](wire::Request::Builder b) {
    auto m = b.initMemFreeAsync();
    m.setContext(contextRemote);
    m.setAddress(address);
    m.setStream(stream);
  });
}

CUresult setAllocNode(GraphNodeObject* node, GraphObject* graph, CUDA_MEM_ALLOC_NODE_PARAMS* p,
                      ContextObject* ctx, const char* call) {
  if (!p || p->bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  const CUmemPoolProps& props = p->poolProps;
  if (props.allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
      props.location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
    return graphRefusal(CUDA_ERROR_NOT_SUPPORTED, call,
                        "only device memory can be allocated in a graph (no host or managed "
                        "memory)");
  }
  CUdevice dev = props.location.id;
  if (dev < 0 || dev >= DriverState::get().deviceCount()) return CUDA_ERROR_INVALID_VALUE;
  if (props.handleTypes != CU_MEM_HANDLE_TYPE_NONE) {
    return graphRefusal(CUDA_ERROR_INVALID_VALUE, call,
                        "graph allocations cannot have exportable handle types");
  }
  if (p->accessDescCount && !p->accessDescs) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < p->accessDescCount; ++i) {
    const CUmemAccessDesc& d = p->accessDescs[i];
    if (d.location.type != CU_MEM_LOCATION_TYPE_DEVICE || d.location.id < 0 ||
        d.location.id >= DriverState::get().deviceCount()) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    if (d.location.id == dev ? d.flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE
                             : d.flags != CU_MEM_ACCESS_FLAGS_PROT_NONE) {
      return graphRefusal(
          d.location.id == dev ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_SUPPORTED, call,
          "a graph allocation is read-write on its own device; access from "
          "another device (peer access) is not served");
    }
  }
  if (!ctx) {
    ContextObject* current = DriverState::get().current();
    ctx = current && current->device == dev ? current : DriverState::get().primaryContext(dev);
  }
  if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
  if (ctx->device != dev) {
    return graphRefusal(CUDA_ERROR_INVALID_VALUE, call,
                        "the allocation's device is not the capturing stream's");
  }
  if (CUresult r = DriverState::get().ensureRemote(ctx); r != CUDA_SUCCESS) return r;
  uint64_t pool = 0;
  if (CUresult r = graphPoolOf(ctx, &pool); r != CUDA_SUCCESS) return r;
  // The address is fixed once the node is made: the block is the node's until no node names it.
  // Until then another block can be asked for where this one is host memory of this process.
  uint64_t address = 0;
  CUresult r = requestDeviceRangeApart(
      call, *ctx->server,
      [&](uint64_t* at, uint64_t* bytesThere) {
        *bytesThere = p->bytesize;
        return ctx->server->call(
            call,
            [&](wire::Request::Builder b) {
              auto m = b.initMemAllocAsync();
              m.setContext(ctx->remote);
              m.setPool(pool);
              m.setBytes(p->bytesize);
              m.setStream(0);
            },
            {},
            [&](wire::Response::Reader reply, ReplyBulk&) {
              *at = reply.getMemAlloc().getAddress();
              return CUDA_SUCCESS;
            });
      },
      [&](const std::vector<uint64_t>& overlapping) {
        for (uint64_t held : overlapping) {
          ctx->server->post(call, [&](wire::Request::Builder b) {
            auto m = b.initMemFreeAsync();
            m.setContext(ctx->remote);
            m.setAddress(held);
            m.setStream(0);
          });
        }
      },
      &address);
  if (r != CUDA_SUCCESS) return r;
  auto allocation = std::make_shared<GraphAllocation>();
  allocation->context = ctx;
  allocation->contextRemote = ctx->remote;
  allocation->address = address;
  allocation->bytes = p->bytesize;
  allocation->owner = graph;
  {
    std::lock_guard lock(DriverState::get().mutex);
    DriverState::get().deviceAllocations[address] = DeviceAllocation{p->bytesize, ctx, nullptr};
  }
  {
    std::lock_guard lock(allocationsMutex());
    allocationsByAddress()[address] = allocation;
  }
  node->type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
  node->context = ctx;
  node->memory = std::move(allocation);
  node->accessDescs.assign(p->accessDescs, p->accessDescs + p->accessDescCount);
  node->alloc = *p;
  node->alloc.dptr = address;
  node->alloc.accessDescs = node->accessDescs.data();
  p->dptr = address;
  return CUDA_SUCCESS;
}

CUresult setFreeNode(GraphNodeObject* node, GraphObject* graph, CUdeviceptr dptr,
                     const char* call) {
  std::shared_ptr<GraphAllocation> allocation = findAllocation(dptr);
  if (!allocation) {
    return graphRefusal(CUDA_ERROR_INVALID_VALUE, call,
                        "the address was not returned by a memory alloc node");
  }
  bool own = allocation->owner == graph;
  if (allocation->freedByOwner || (own && allocation->freedElsewhere)) {
    return graphRefusal(CUDA_ERROR_INVALID_VALUE, call,
                        "the allocation is already freed by a free node of its own graph, or "
                        "another graph frees it and its own graph cannot");
  }
  for (const auto& n : graph->nodes) {
    if (n->type == CU_GRAPH_NODE_TYPE_MEM_FREE && n->memory == allocation) {
      return graphRefusal(CUDA_ERROR_INVALID_VALUE, call,
                          "the graph already frees this allocation");
    }
  }
  (own ? allocation->freedByOwner : allocation->freedElsewhere) = true;
  node->type = CU_GRAPH_NODE_TYPE_MEM_FREE;
  node->context = allocation->context;
  node->memory = std::move(allocation);
  return CUDA_SUCCESS;
}

bool hasMemoryNodes(const GraphObject& graph) {
  for (const auto& n : graph.nodes) {
    if (n->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC || n->type == CU_GRAPH_NODE_TYPE_MEM_FREE) {
      return true;
    }
  }
  return false;
}

CUresult checkOneMemoryExec(const GraphObject& graph) {
  if (!hasMemoryNodes(graph)) return CUDA_SUCCESS;
  for (const auto& [exec, from] : memoryExecs()) {
    if (from == &graph) {
      return graphRefusal(CUDA_ERROR_INVALID_VALUE, "cuGraphInstantiate",
                          "a graph with memory alloc or free nodes may have only one executable "
                          "graph at a time; destroy the other first");
    }
  }
  return CUDA_SUCCESS;
}

void noteMemoryExec(const GraphObject& graph, GraphExecObject* exec) {
  if (hasMemoryNodes(graph)) memoryExecs()[exec] = &graph;
}

void forgetMemoryExec(GraphExecObject* exec) { memoryExecs().erase(exec); }

void forgetMemoryGraph(const GraphObject* graph) {
  for (auto& [exec, from] : memoryExecs()) {
    if (from == graph) from = nullptr;
  }
}

CUresult launchGraphMemory(GraphExecObject* exec, CUstream stream, uint64_t remoteStream) {
  std::vector<GraphAllocation*> allocs, frees;
  memoryNodes(*exec->source, &allocs, &frees);
  if (allocs.empty() && frees.empty()) return CUDA_SUCCESS;
  bool autoFree = exec->flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH;
  for (GraphAllocation* a : allocs) {
    if (a->live && !autoFree) {
      return graphRefusal(CUDA_ERROR_INVALID_VALUE, "cuGraphLaunch",
                          "an allocation of the graph's last launch is not freed yet (free it, or "
                          "instantiate with CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH)");
    }
  }
  for (GraphAllocation* f : frees) {
    bool ownAlloc = std::find(allocs.begin(), allocs.end(), f) != allocs.end();
    if (!ownAlloc && !f->live) {
      return graphRefusal(CUDA_ERROR_INVALID_VALUE, "cuGraphLaunch",
                          "a free node frees an allocation that is not allocated");
    }
  }
  for (GraphAllocation* a : allocs) {
    a->live = true;
    a->self = a->shared_from_this();
    a->lastStream = stream;
    a->lastRemoteStream = remoteStream;
  }
  for (GraphAllocation* f : frees) {
    f->live = false;
    f->lastStream = stream;
    f->lastRemoteStream = remoteStream;
    f->self.reset();  // the free node still names it
  }
  return CUDA_SUCCESS;
}

bool freeGraphAllocation(CUdeviceptr dptr, ContextObject* ctx, CUstream stream,
                         uint64_t remoteStream, const char* call, CUresult* result) {
  std::shared_ptr<GraphAllocation> allocation = findAllocation(dptr);
  if (!allocation) return false;
  std::shared_ptr<GraphAllocation> dropped;  // released after the lock
  std::lock_guard lock(graphMutex());
  if (allocation->context != ctx) {
    *result = graphRefusal(CUDA_ERROR_INVALID_VALUE, call,
                           "the stream is not in the context of the graph allocation");
  } else if (allocation->freedByOwner) {
    *result = graphRefusal(CUDA_ERROR_INVALID_VALUE, call,
                           "the allocation is freed by its own graph; it cannot be freed outside");
  } else if (!allocation->live) {
    *result = graphRefusal(CUDA_ERROR_INVALID_VALUE, call,
                           "the graph allocation is not allocated (no launch made it, or it was "
                           "freed already)");
  } else {
    allocation->live = false;
    allocation->lastStream = stream;
    allocation->lastRemoteStream = remoteStream;
    dropped = std::move(allocation->self);
    *result = CUDA_SUCCESS;
  }
  return true;
}

}  // namespace gpupool::client

using namespace gpupool::client;

namespace {

// Adds a memory node to graph `h` after checking the driver is initialised (graph lock held).
template <typename Fill>
CUresult addMemoryNode(CUgraphNode* out, CUgraph h, const CUgraphNode* deps, size_t count,
                       Fill fill) {
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  std::lock_guard lock(graphMutex());
  GraphObject* graph = asGraph(h);
  if (!graph) return CUDA_ERROR_INVALID_VALUE;
  auto node = std::make_unique<GraphNodeObject>();
  if (CUresult r = fill(graph, node.get()); r != CUDA_SUCCESS) return r;
  CUresult error = CUDA_SUCCESS;
  GraphNodeObject* n = addNode(graph, std::move(node), deps, count, &error);
  if (!n) return error;
  *out = reinterpret_cast<CUgraphNode>(n);
  return CUDA_SUCCESS;
}

// The pool attribute that answers a graph memory attribute. Memory stays associated with graphs
// ("used") until cuDeviceGraphMemTrim gives it back, not only while an allocation is live: NVIDIA
// reported 32 MiB used after every graph allocation was freed and every graph destroyed (observed
// on driver 580.159.04, H200). So the used attributes answer what the pools hold.
bool poolAttributeOf(CUgraphMem_attribute attr, CUmemPool_attribute* out) {
  switch (attr) {
    case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT:
      *out = CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT;
      return true;
    case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH:
      *out = CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH;
      return true;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT:
      *out = CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT;
      return true;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH:
      *out = CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH;
      return true;
    default:
      return false;
  }
}

CUresult graphPoolAttribute(const GraphPool& pool, CUmemPool_attribute attribute, bool set,
                            uint64_t* value) {
  ContextObject* ctx = pool.context;
  return ctx->server->call(
      set ? "cuDeviceSetGraphMemAttribute" : "cuDeviceGetGraphMemAttribute",
      [&](wire::Request::Builder b) {
        auto m = b.initMemPoolAttribute();
        m.setContext(pool.contextRemote);
        m.setPool(pool.pool);
        m.setAttribute(attribute);
        m.setSet(set);
        m.setValue(set ? *value : 0);
      },
      {},
      [&](wire::Response::Reader reply, ReplyBulk&) {
        if (!set) *value = static_cast<uint64_t>(reply.getValue());
        return CUDA_SUCCESS;
      });
}

bool validGraphDevice(CUdevice dev) { return dev >= 0 && dev < DriverState::get().deviceCount(); }

}  // namespace

GPUPOOL_DRIVER_API CUresult cuGraphAddMemAllocNode(CUgraphNode* out, CUgraph h,
                                                   const CUgraphNode* deps, size_t count,
                                                   CUDA_MEM_ALLOC_NODE_PARAMS* p) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  return addMemoryNode(out, h, deps, count, [&](GraphObject* graph, GraphNodeObject* n) {
    return setAllocNode(n, graph, p, nullptr, "cuGraphAddMemAllocNode");
  });
}

GPUPOOL_DRIVER_API CUresult cuGraphMemAllocNodeGetParams(CUgraphNode h,
                                                         CUDA_MEM_ALLOC_NODE_PARAMS* out) {
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  std::lock_guard lock(graphMutex());
  GraphNodeObject* n = asGraphNode(h);
  if (!n || n->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC) return CUDA_ERROR_INVALID_VALUE;
  *out = n->alloc;  // poolProps and accessDescs owned by the node, as the driver's are
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuGraphAddMemFreeNode(CUgraphNode* out, CUgraph h,
                                                  const CUgraphNode* deps, size_t count,
                                                  CUdeviceptr dptr) {
  return addMemoryNode(out, h, deps, count, [&](GraphObject* graph, GraphNodeObject* n) {
    return setFreeNode(n, graph, dptr, "cuGraphAddMemFreeNode");
  });
}

GPUPOOL_DRIVER_API CUresult cuGraphMemFreeNodeGetParams(CUgraphNode h, CUdeviceptr* out) {
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  std::lock_guard lock(graphMutex());
  GraphNodeObject* n = asGraphNode(h);
  if (!n || n->type != CU_GRAPH_NODE_TYPE_MEM_FREE) return CUDA_ERROR_INVALID_VALUE;
  *out = n->memory->address;
  return CUDA_SUCCESS;
}

// Gives the graph pools' idle memory back to the device: blocks no node names and no launch
// holds (the pool keeps them otherwise, as the driver's graph allocator does).
GPUPOOL_DRIVER_API CUresult cuDeviceGraphMemTrim(CUdevice dev) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!validGraphDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  for (const GraphPool& pool : devicePools(dev)) {
    CUresult r = pool.context->server->call("cuDeviceGraphMemTrim", [&](wire::Request::Builder b) {
      auto m = b.initMemPoolTrimTo();
      m.setContext(pool.contextRemote);
      m.setPool(pool.pool);
      m.setMinBytesToKeep(0);
    });
    if (r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuDeviceGetGraphMemAttribute(CUdevice dev, CUgraphMem_attribute attr,
                                                         void* value) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!validGraphDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  CUmemPool_attribute attribute;
  if (!value || !poolAttributeOf(attr, &attribute)) return CUDA_ERROR_INVALID_VALUE;
  uint64_t total = 0;
  for (const GraphPool& pool : devicePools(dev)) {
    uint64_t v = 0;
    if (CUresult r = graphPoolAttribute(pool, attribute, false, &v); r != CUDA_SUCCESS) return r;
    total += v;
  }
  *static_cast<cuuint64_t*>(value) = total;
  return CUDA_SUCCESS;
}

// Only the high watermarks can be set, and only to 0 (reset to the current value).
GPUPOOL_DRIVER_API CUresult cuDeviceSetGraphMemAttribute(CUdevice dev, CUgraphMem_attribute attr,
                                                         void* value) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!validGraphDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  CUmemPool_attribute attribute;
  if (!value || !poolAttributeOf(attr, &attribute)) return CUDA_ERROR_INVALID_VALUE;
  if ((attr != CU_GRAPH_MEM_ATTR_USED_MEM_HIGH && attr != CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH) ||
      *static_cast<cuuint64_t*>(value) != 0) {
    return refuseCall(CUDA_ERROR_INVALID_VALUE,
                      "cuDeviceSetGraphMemAttribute: only the high watermarks can be set, to 0");
  }
  for (const GraphPool& pool : devicePools(dev)) {
    uint64_t zero = 0;
    if (CUresult r = graphPoolAttribute(pool, attribute, true, &zero); r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}
