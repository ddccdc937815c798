// CUDA graphs on the client: graph and node objects, and the flattening and upload that
// cuGraphInstantiate does (see graph_model.h).
#include "graph_model.h"

#include <capnp/message.h>

#include <algorithm>
#include <set>
#include <string>

#include "client_log.h"
#include "common/graph_conditional.h"
#include "graph_memory.h"
#include "launch_checks.h"
#include "module_resolution.h"
#include "stream_mem_ops.h"

namespace gpupool::client {

std::mutex& graphMutex() {
  static auto* mutex = new std::mutex();  // never destroyed: atexit handlers may still use it
  return *mutex;
}

namespace {

template <typename T>
T* lookup(const void* handle, Tag tag) {
  if (!isRegistered(handle)) return nullptr;
  T* object = static_cast<T*>(const_cast<void*>(handle));
  return object->tag == tag ? object : nullptr;
}

void unregisterNodes(GraphObject& graph);

// Unregisters the graphs `node` owns (a child graph, conditional bodies) and their nodes.
void unregisterOwned(GraphNodeObject& node) {
  if (node.child) {
    unregisterNodes(*node.child);
    unregisterObject(node.child.get());
  }
  for (auto& body : node.bodies) {
    unregisterNodes(*body);
    unregisterObject(body.get());
  }
}

void unregisterNodes(GraphObject& graph) {
  for (auto& node : graph.nodes) {
    unregisterOwned(*node);
    unregisterObject(node.get());
    node->tag = Tag::kDead;
  }
}

const char* bodyRefusal(const GraphObject& graph);

// Why `node` (with the graphs it holds) cannot be in a conditional node's body, or null.
const char* bodyNodeRefusal(const GraphNodeObject& node) {
  if (!allowedInConditionalBody(node.type)) {
    return "a conditional node's body may hold kernel, empty, child graph, memset, memcpy and "
           "conditional nodes only";
  }
  if (node.child) {
    if (const char* why = bodyRefusal(*node.child)) return why;
  }
  for (const auto& body : node.bodies) {
    if (const char* why = bodyRefusal(*body)) return why;
  }
  return nullptr;
}

// Why `graph` cannot be (in) a conditional node's body, or null.
const char* bodyRefusal(const GraphObject& graph) {
  for (const auto& node : graph.nodes) {
    if (const char* why = bodyNodeRefusal(*node)) return why;
  }
  return nullptr;
}

// Points each of node->paramPointers at its parameter in node->params.
void pointAtParams(GraphNodeObject* node) {
  node->paramPointers.clear();
  if (!node->function) return;
  for (auto& [offset, size] : node->function->params) {
    node->paramPointers.push_back(node->params.data() + offset);
  }
}

}  // namespace

CUresult graphRefusal(CUresult code, const char* call, const char* why) {
  if (logLevel() >= 1) logLine(std::string(call) + ": " + why);
  return code;
}

GraphObject* asGraph(CUgraph h) { return lookup<GraphObject>(h, Tag::kGraph); }
GraphNodeObject* asGraphNode(CUgraphNode h) { return lookup<GraphNodeObject>(h, Tag::kGraphNode); }
GraphExecObject* asGraphExec(CUgraphExec h) { return lookup<GraphExecObject>(h, Tag::kGraphExec); }

GraphObject::~GraphObject() {
  for (auto [object, count] : userRefs) releaseUserObject(object, count);
}

GraphObject* newGraph() {
  auto* graph = new GraphObject();
  registerObject(graph);
  return graph;
}

void destroyGraph(GraphObject* graph) {
  forgetMemoryGraph(graph);
  unregisterNodes(*graph);
  unregisterObject(graph);
  graph->tag = Tag::kDead;
  delete graph;
}

bool allowedInConditionalBody(CUgraphNodeType type) {
  switch (type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
    case CU_GRAPH_NODE_TYPE_EMPTY:
    case CU_GRAPH_NODE_TYPE_GRAPH:
    case CU_GRAPH_NODE_TYPE_MEMSET:
    case CU_GRAPH_NODE_TYPE_MEMCPY:
    case CU_GRAPH_NODE_TYPE_CONDITIONAL:
      return true;
    default:
      return false;
  }
}

bool insideConditionalBody(const GraphObject* graph) {
  for (; graph && graph->owner; graph = graph->owner->graph) {
    if (graph->owner->type == CU_GRAPH_NODE_TYPE_CONDITIONAL) return true;
  }
  return false;
}

GraphNodeObject* addNode(GraphObject* graph, std::unique_ptr<GraphNodeObject> node,
                         const CUgraphNode* deps, size_t count, CUresult* error) {
  // A node that does not join the graph takes the graphs it owns with it.
  auto refuse = [&](CUresult code) {
    unregisterOwned(*node);
    *error = code;
    return nullptr;
  };
  if (count && !deps) return refuse(CUDA_ERROR_INVALID_VALUE);
  std::vector<GraphNodeObject*> found;
  for (size_t i = 0; i < count; ++i) {
    GraphNodeObject* d = asGraphNode(deps[i]);
    if (!d || d->graph != graph || std::count(found.begin(), found.end(), d)) {
      return refuse(CUDA_ERROR_INVALID_VALUE);
    }
    found.push_back(d);
  }
  if (insideConditionalBody(graph)) {
    if (const char* why = bodyNodeRefusal(*node)) {
      return refuse(graphRefusal(CUDA_ERROR_INVALID_VALUE, "cuGraphAdd*Node", why));
    }
  }
  return addNode(graph, std::move(node), found);
}

GraphNodeObject* addNode(GraphObject* graph, std::unique_ptr<GraphNodeObject> node,
                         const std::vector<GraphNodeObject*>& deps) {
  GraphNodeObject* n = node.get();
  n->graph = graph;
  if (n->child) n->child->owner = n;
  for (auto& body : n->bodies) body->owner = n;
  n->dependencies = deps;
  for (GraphNodeObject* d : deps) d->dependents.push_back(n);
  graph->nodes.push_back(std::move(node));
  registerObject(n);
  return n;
}

void removeNode(GraphNodeObject* node) {
  auto drop = [](std::vector<GraphNodeObject*>& list, GraphNodeObject* n) {
    list.erase(std::remove(list.begin(), list.end(), n), list.end());
  };
  for (GraphNodeObject* d : node->dependencies) drop(d->dependents, node);
  for (GraphNodeObject* d : node->dependents) drop(d->dependencies, node);
  GraphObject* graph = node->graph;
  unregisterOwned(*node);
  unregisterObject(node);
  node->tag = Tag::kDead;
  auto it = std::find_if(graph->nodes.begin(), graph->nodes.end(),
                         [&](const auto& n) { return n.get() == node; });
  graph->nodes.erase(it);
}

std::unique_ptr<GraphObject> cloneGraph(
    const GraphObject& graph, std::map<const GraphNodeObject*, GraphNodeObject*>* mapping) {
  auto copy = std::make_unique<GraphObject>();
  registerObject(copy.get());
  for (auto [object, count] : graph.userRefs) retainUserObject(object, count);
  copy->userRefs = graph.userRefs;
  copy->conditionHandles = graph.conditionHandles;
  std::map<const GraphNodeObject*, GraphNodeObject*> map;
  std::map<const GraphNodeObject*, GraphNodeObject*> bodyNodes;
  for (const auto& node : graph.nodes) {
    auto n = std::make_unique<GraphNodeObject>();
    n->type = node->type;
    n->function = node->function;
    std::copy(std::begin(node->grid), std::end(node->grid), n->grid);
    std::copy(std::begin(node->block), std::end(node->block), n->block);
    n->sharedBytes = node->sharedBytes;
    n->params = node->params;
    pointAtParams(n.get());
    n->kernelAttributes = node->kernelAttributes;
    n->context = node->context;
    n->memset = node->memset;
    n->copy = node->copy;
    n->event = node->event;
    n->host = node->host;
    n->enabled = node->enabled;
    n->memory = node->memory;
    n->alloc = node->alloc;
    n->accessDescs = node->accessDescs;
    n->memOps = node->memOps;
    n->alloc.accessDescs = n->accessDescs.data();
    if (node->child) n->child = cloneGraph(*node->child, nullptr);
    n->conditionHandle = node->conditionHandle;
    n->conditionType = node->conditionType;
    for (const auto& body : node->bodies) {
      // Body nodes are mapped too: the exec setters and cuGraphNodeFindInClone reach them.
      std::map<const GraphNodeObject*, GraphNodeObject*> inBody;
      n->bodies.push_back(cloneGraph(*body, &inBody));
      n->bodyHandles.push_back(reinterpret_cast<CUgraph>(n->bodies.back().get()));
      bodyNodes.insert(inBody.begin(), inBody.end());
    }
    map[node.get()] = addNode(copy.get(), std::move(n), {});
  }
  // Edges second: cuGraphAddDependencies may have made a node depend on a later one.
  for (const auto& node : graph.nodes) {
    GraphNodeObject* n = map.at(node.get());
    for (GraphNodeObject* d : node->dependencies) {
      n->dependencies.push_back(map.at(d));
      map.at(d)->dependents.push_back(n);
    }
  }
  if (mapping) {
    map.insert(bodyNodes.begin(), bodyNodes.end());
    *mapping = std::move(map);
  }
  return copy;
}

CUresult setConditionalNode(GraphNodeObject* node, GraphObject* graph,
                            CUDA_CONDITIONAL_NODE_PARAMS& p, const char* call) {
  // The handle must have been made for this graph or one it is nested in.
  ContextObject* ctx = nullptr;
  for (const GraphObject* g = graph; g && !ctx; g = g->owner ? g->owner->graph : nullptr) {
    auto it = g->conditionHandles.find(p.handle);
    if (it != g->conditionHandles.end()) ctx = it->second;
  }
  if (!ctx) {
    return graphRefusal(CUDA_ERROR_INVALID_VALUE, call,
                        "the conditional handle was not made for this graph or a graph it is in");
  }
  if (p.ctx && asContext(p.ctx) != ctx) {
    return graphRefusal(CUDA_ERROR_INVALID_VALUE, call,
                        "a conditional node runs in the context its handle was made in");
  }
  if (const char* why = conditionalNodeRefusal(p.type, p.size)) {
    return graphRefusal(CUDA_ERROR_INVALID_VALUE, call, why);
  }
  node->type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
  node->context = ctx;
  node->conditionHandle = p.handle;
  node->conditionType = p.type;
  for (unsigned i = 0; i < p.size; ++i) {
    node->bodies.push_back(std::make_unique<GraphObject>());
    registerObject(node->bodies.back().get());
    node->bodyHandles.push_back(reinterpret_cast<CUgraph>(node->bodies.back().get()));
  }
  p.phGraph_out = node->bodyHandles.data();
  return CUDA_SUCCESS;
}

CUresult setKernelNode(GraphNodeObject* node, CUfunction h, CUkernel kernel, CUcontext ctxHandle,
                       const unsigned grid[3], const unsigned block[3], unsigned sharedBytes,
                       void** kernelParams, void** extra) {
  ContextObject* ctx = nullptr;
  if (!h) {
    // A CUkernel runs in the context the parameters name, or the current one.
    if (!kernel) return CUDA_ERROR_INVALID_VALUE;
    h = reinterpret_cast<CUfunction>(kernel);
    if (CUresult r = namedOrCurrentRemoteContext(ctxHandle, &ctx); r != CUDA_SUCCESS) return r;
  }
  FunctionObject* f = nullptr;
  if (CUresult r = resolveFunction(h, ctx, &f); r != CUDA_SUCCESS) return r;
  if (CUresult r =
          checkShape(*f, grid[0], grid[1], grid[2], block[0], block[1], block[2], sharedBytes);
      r != CUDA_SUCCESS) {
    return r;
  }
  std::vector<uint8_t> params;
  if (CUresult r = packParams(*f, kernelParams, extra, &params); r != CUDA_SUCCESS) return r;
  setCapturedKernel(node, f, grid, block, sharedBytes, std::move(params));
  return CUDA_SUCCESS;
}

void setCapturedKernel(GraphNodeObject* node, FunctionObject* f, const unsigned grid[3],
                       const unsigned block[3], unsigned sharedBytes, std::vector<uint8_t> params) {
  node->type = CU_GRAPH_NODE_TYPE_KERNEL;
  node->function = f;
  node->context = f->module->context;
  std::copy(grid, grid + 3, node->grid);
  std::copy(block, block + 3, node->block);
  node->sharedBytes = sharedBytes;
  node->params = std::move(params);
  pointAtParams(node);
}

CUresult setMemsetNode(GraphNodeObject* node, const CUDA_MEMSET_NODE_PARAMS& p, CUcontext ctx) {
  if (p.elementSize != 1 && p.elementSize != 2 && p.elementSize != 4) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (p.width == 0 || p.height == 0) return CUDA_ERROR_INVALID_VALUE;
  size_t row = p.width * p.elementSize;
  size_t pitch = p.height == 1 ? row : p.pitch;
  if (pitch < row) return CUDA_ERROR_INVALID_VALUE;
  DeviceAllocation info;
  if (!DriverState::get().findDevice(p.dst, pitch * (p.height - 1) + row, nullptr, &info)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (ctx && asContext(ctx) != info.context) {
    return graphRefusal(CUDA_ERROR_INVALID_VALUE, "cuGraphAddMemsetNode",
                        "the memory is not in the context the node names");
  }
  if (CUresult r = DriverState::get().ensureRemote(info.context); r != CUDA_SUCCESS) return r;
  node->type = CU_GRAPH_NODE_TYPE_MEMSET;
  node->memset = p;
  node->memset.pitch = pitch;
  node->context = info.context;
  return CUDA_SUCCESS;
}

namespace {

// The address of a CU_MEMORYTYPE_UNIFIED end: its host pointer when set, else its device pointer.
CUdeviceptr unifiedAddressOf(CUdeviceptr device, const void* host) {
  return host ? reinterpret_cast<CUdeviceptr>(host) : device;
}

// The device address a CUDA_MEMCPY3D end starts at, or 0 when it is not device memory.
CUdeviceptr deviceEnd(CUmemorytype type, CUdeviceptr device, const void* host) {
  if (type == CU_MEMORYTYPE_DEVICE) return device;
  if (type == CU_MEMORYTYPE_UNIFIED) {
    CUdeviceptr address = unifiedAddressOf(device, host);
    return DriverState::get().findDevice(address, 0) ? address : 0;
  }
  return 0;
}

// Whether an end is unified and lies where device and host memory are at once, which cannot be
// told apart (DriverState::unifiedIsDevice refuses it, naming the call).
bool ambiguousUnifiedEnd(CUmemorytype type, CUdeviceptr device, const void* host) {
  bool isDevice = false;
  return type == CU_MEMORYTYPE_UNIFIED &&
         DriverState::get().unifiedIsDevice("cuGraphAddMemcpyNode", unifiedAddressOf(device, host),
                                            &isDevice) != CUDA_SUCCESS;
}

}  // namespace

CUresult setMemcpyNode(GraphNodeObject* node, const CUDA_MEMCPY3D& p, CUcontext ctx) {
  if (ambiguousUnifiedEnd(p.srcMemoryType, p.srcDevice, p.srcHost) ||
      ambiguousUnifiedEnd(p.dstMemoryType, p.dstDevice, p.dstHost)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUdeviceptr src = deviceEnd(p.srcMemoryType, p.srcDevice, p.srcHost);
  CUdeviceptr dst = deviceEnd(p.dstMemoryType, p.dstDevice, p.dstHost);
  if (!src || !dst) {
    return graphRefusal(CUDA_ERROR_NOT_SUPPORTED, "cuGraphAddMemcpyNode",
                        "only device-to-device copies are served in graphs; copies with a host or "
                        "array end are refused");
  }
  if (p.WidthInBytes == 0 || p.Height == 0 || p.Depth == 0) return CUDA_ERROR_INVALID_VALUE;
  size_t srcPitch = p.srcPitch ? p.srcPitch : p.WidthInBytes;
  size_t dstPitch = p.dstPitch ? p.dstPitch : p.WidthInBytes;
  if ((p.Height > 1 || p.Depth > 1) && (srcPitch < p.WidthInBytes || dstPitch < p.WidthInBytes)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto& state = DriverState::get();
  DeviceAllocation srcInfo, dstInfo;
  if (!state.findDevice(src, 0, nullptr, &srcInfo) ||
      !state.findDevice(dst, 0, nullptr, &dstInfo)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (srcInfo.context != dstInfo.context) {
    return graphRefusal(CUDA_ERROR_NOT_SUPPORTED, "cuGraphAddMemcpyNode",
                        "copies between devices are not served in graphs");
  }
  if (ctx && asContext(ctx) != dstInfo.context) {
    return graphRefusal(CUDA_ERROR_INVALID_VALUE, "cuGraphAddMemcpyNode",
                        "the memory is not in the context the node names");
  }
  if (CUresult r = state.ensureRemote(dstInfo.context); r != CUDA_SUCCESS) return r;
  node->type = CU_GRAPH_NODE_TYPE_MEMCPY;
  node->copy = p;
  node->context = dstInfo.context;
  return CUDA_SUCCESS;
}

CUresult setBatchMemOpNode(GraphNodeObject* node, const CUDA_BATCH_MEM_OP_NODE_PARAMS& p,
                           const char* call) {
  if (p.flags != 0) return graphRefusal(CUDA_ERROR_INVALID_VALUE, call, "flags must be 0");
  ContextObject* ctx = nullptr;
  if (CUresult r = namedOrCurrentRemoteContext(p.ctx, &ctx); r != CUDA_SUCCESS) return r;
  // A node of no operations is accepted and does nothing (observed on driver 580.159.04, H200);
  // the server gets it as an empty node (fillNode).
  std::vector<CUstreamBatchMemOpParams> ops;
  if (p.count != 0) {
    if (CUresult r = checkStreamMemOps(call, ctx, true, p.count, p.paramArray, &ops);
        r != CUDA_SUCCESS) {
      return r;
    }
  }
  node->type = CU_GRAPH_NODE_TYPE_BATCH_MEM_OP;
  node->context = ctx;
  node->memOps = std::move(ops);
  return CUDA_SUCCESS;
}

CUresult nodeFromParams(GraphNodeObject* node, const CUgraphNodeParams& p, const char* call) {
  if (p.reserved0[0] || p.reserved0[1] || p.reserved0[2] || p.reserved2) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  switch (p.type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: {
      const auto& k = p.kernel;
      unsigned grid[3] = {k.gridDimX, k.gridDimY, k.gridDimZ};
      unsigned block[3] = {k.blockDimX, k.blockDimY, k.blockDimZ};
      return setKernelNode(node, k.func, k.kern, k.ctx, grid, block, k.sharedMemBytes,
                           k.kernelParams, k.extra);
    }
    case CU_GRAPH_NODE_TYPE_MEMCPY:
      if (p.memcpy.flags || p.memcpy.reserved) return CUDA_ERROR_INVALID_VALUE;
      return setMemcpyNode(node, p.memcpy.copyParams, p.memcpy.copyCtx);
    case CU_GRAPH_NODE_TYPE_MEMSET: {
      const auto& m = p.memset;
      CUDA_MEMSET_NODE_PARAMS v1{};
      v1.dst = m.dst;
      v1.pitch = m.pitch;
      v1.value = m.value;
      v1.elementSize = m.elementSize;
      v1.width = m.width;
      v1.height = m.height;
      return setMemsetNode(node, v1, m.ctx);
    }
    case CU_GRAPH_NODE_TYPE_GRAPH: {
      if (p.graph.ownership != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE) {
        return graphRefusal(CUDA_ERROR_NOT_SUPPORTED, call,
                            "child graph nodes that take over the graph (ownership MOVE) are "
                            "not served; clone it");
      }
      GraphObject* child = asGraph(p.graph.graph);
      if (!child) return CUDA_ERROR_INVALID_VALUE;
      if (hasMemoryNodes(*child)) {
        return graphRefusal(CUDA_ERROR_INVALID_VALUE, call,
                            "a graph with memory alloc or free nodes can be a child graph only "
                            "when moved into it (ownership MOVE, not served)");
      }
      node->type = CU_GRAPH_NODE_TYPE_GRAPH;
      node->child = cloneGraph(*child, nullptr);
      return CUDA_SUCCESS;
    }
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT: {
      EventObject* e = asEvent(p.type == CU_GRAPH_NODE_TYPE_EVENT_RECORD ? p.eventRecord.event
                                                                         : p.eventWait.event);
      if (!e) return CUDA_ERROR_INVALID_VALUE;
      if (CUresult r = DriverState::get().ensureRemote(e->context); r != CUDA_SUCCESS) return r;
      node->type = p.type;
      node->event = e;
      return CUDA_SUCCESS;
    }
    case CU_GRAPH_NODE_TYPE_EMPTY:
      node->type = CU_GRAPH_NODE_TYPE_EMPTY;
      return CUDA_SUCCESS;
    case CU_GRAPH_NODE_TYPE_HOST:
      if (!p.host.fn) return CUDA_ERROR_INVALID_VALUE;
      node->type = CU_GRAPH_NODE_TYPE_HOST;
      node->host.fn = p.host.fn;
      node->host.userData = p.host.userData;
      return CUDA_SUCCESS;
    case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP: {
      CUDA_BATCH_MEM_OP_NODE_PARAMS v1{};  // the same fields as the _v2 struct
      v1.ctx = p.memOp.ctx;
      v1.count = p.memOp.count;
      v1.paramArray = p.memOp.paramArray;
      v1.flags = p.memOp.flags;
      return setBatchMemOpNode(node, v1, call);
    }
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
      // cuGraphAddNode makes them (graph_api.cc); once made they do not change.
      return graphRefusal(CUDA_ERROR_INVALID_VALUE, call,
                          "memory alloc and free nodes cannot change their parameters");
    case CU_GRAPH_NODE_TYPE_CONDITIONAL:
      // cuGraphAddNode makes them (graph_api.cc); their bodies stay theirs.
      return graphRefusal(CUDA_ERROR_INVALID_VALUE, call,
                          "a conditional node's parameters cannot change once it is made");
    default:
      return graphRefusal(CUDA_ERROR_NOT_SUPPORTED, call,
                          "external semaphore nodes are not served (external semaphores cannot "
                          "be imported into a remote GPU)");
  }
}

namespace {

// One node of the flattened graph, as sent to the server.
struct FlatNode {
  const GraphNodeObject* node = nullptr;  // null: an empty node standing for a child's edges
  std::vector<uint32_t> deps;
  std::vector<std::vector<FlatNode>> bodies;  // a conditional node's, each flattened
};

// Calls `visit` on every node of `nodes`, bodies included.
template <typename Visit>
CUresult visitFlat(const std::vector<FlatNode>& nodes, const Visit& visit) {
  for (const FlatNode& f : nodes) {
    if (CUresult r = visit(f); r != CUDA_SUCCESS) return r;
    for (const auto& body : f.bodies) {
      if (CUresult r = visitFlat(body, visit); r != CUDA_SUCCESS) return r;
    }
  }
  return CUDA_SUCCESS;
}

class Flattener {
 public:
  // Appends `graph`'s nodes in a topological order; each root depends on `entry` (when given).
  // Sets *exits to the indices the graph's sinks ended up at.
  CUresult add(const GraphObject& graph, const std::vector<uint32_t>& entry,
               std::vector<uint32_t>* exits) {
    std::map<const GraphNodeObject*, size_t> waiting;
    std::vector<const GraphNodeObject*> ready;
    for (const auto& n : graph.nodes) {
      waiting[n.get()] = n->dependencies.size();
      if (n->dependencies.empty()) ready.push_back(n.get());
    }
    std::map<const GraphNodeObject*, uint32_t> at;
    size_t done = 0;
    while (!ready.empty()) {
      const GraphNodeObject* n = ready.front();
      ready.erase(ready.begin());
      ++done;
      std::vector<uint32_t> deps = n->dependencies.empty() ? entry : std::vector<uint32_t>{};
      for (GraphNodeObject* d : n->dependencies) deps.push_back(at.at(d));
      if (n->type == CU_GRAPH_NODE_TYPE_GRAPH) {
        // The child's nodes go in its place: its roots after this node's dependencies, and this
        // node's dependents after an empty node that follows all of its sinks.
        std::vector<uint32_t> childExits;
        if (CUresult r = add(*n->child, deps, &childExits); r != CUDA_SUCCESS) return r;
        at[n] = push(nullptr, childExits.empty() ? deps : childExits);
      } else if (n->type == CU_GRAPH_NODE_TYPE_CONDITIONAL) {
        // Each body is a graph of its own on the server, flattened the same way.
        std::vector<std::vector<FlatNode>> bodies;
        for (const auto& body : n->bodies) {
          if (const char* why = bodyRefusal(*body)) {
            return graphRefusal(CUDA_ERROR_INVALID_VALUE, "cuGraphInstantiate", why);
          }
          Flattener inner;
          std::vector<uint32_t> bodyExits;
          if (CUresult r = inner.add(*body, {}, &bodyExits); r != CUDA_SUCCESS) return r;
          bodies.push_back(std::move(inner.nodes));
        }
        at[n] = push(n, deps);
        nodes.back().bodies = std::move(bodies);
      } else {
        at[n] = push(n, deps);
      }
      for (GraphNodeObject* d : n->dependents) {
        if (--waiting[d] == 0) ready.push_back(d);
      }
    }
    if (done != graph.nodes.size()) {
      return graphRefusal(CUDA_ERROR_INVALID_VALUE, "cuGraphInstantiate", "the graph has a cycle");
    }
    exits->clear();
    for (const auto& n : graph.nodes) {
      if (n->dependents.empty()) exits->push_back(at.at(n.get()));
    }
    return CUDA_SUCCESS;
  }

  std::vector<FlatNode> nodes;

 private:
  uint32_t push(const GraphNodeObject* node, std::vector<uint32_t> deps) {
    nodes.push_back({node, std::move(deps), {}});
    return static_cast<uint32_t>(nodes.size() - 1);
  }
};

// The context every node runs in; graphs spanning contexts are refused.
CUresult graphContext(const std::vector<FlatNode>& nodes, ContextObject** ctx) {
  return visitFlat(nodes, [&](const FlatNode& f) {
    if (!f.node) return CUDA_SUCCESS;
    ContextObject* c = f.node->context;
    if (f.node->event) c = f.node->event->context;
    if (!c) return CUDA_SUCCESS;
    if (*ctx && *ctx != c) {
      return graphRefusal(CUDA_ERROR_NOT_SUPPORTED, "cuGraphInstantiate",
                          "graphs whose nodes run in more than one context are not served");
    }
    *ctx = c;
    return CUDA_SUCCESS;
  });
}

CUresult checkNodeHandles(const std::vector<FlatNode>& nodes) {
  return visitFlat(nodes, [](const FlatNode& f) {
    if (!f.node) return CUDA_SUCCESS;
    if (f.node->event && !asEvent(reinterpret_cast<CUevent>(f.node->event))) {
      return graphRefusal(CUDA_ERROR_INVALID_HANDLE, "cuGraphInstantiate",
                          "an event node names a destroyed event");
    }
    if (f.node->function && !asFunction(reinterpret_cast<CUfunction>(f.node->function))) {
      return graphRefusal(CUDA_ERROR_INVALID_HANDLE, "cuGraphInstantiate",
                          "a kernel node names an unloaded function");
    }
    return CUDA_SUCCESS;
  });
}

void fillCopy(wire::Request::GraphCopy::Builder b, const CUDA_MEMCPY3D& p) {
  CUdeviceptr src = deviceEnd(p.srcMemoryType, p.srcDevice, p.srcHost);
  CUdeviceptr dst = deviceEnd(p.dstMemoryType, p.dstDevice, p.dstHost);
  uint64_t srcPitch = p.srcPitch ? p.srcPitch : p.WidthInBytes;
  uint64_t dstPitch = p.dstPitch ? p.dstPitch : p.WidthInBytes;
  uint64_t srcSlice = srcPitch * (p.srcHeight ? p.srcHeight : p.Height);
  uint64_t dstSlice = dstPitch * (p.dstHeight ? p.dstHeight : p.Height);
  b.setSrc(src + p.srcZ * srcSlice + p.srcY * srcPitch + p.srcXInBytes);
  b.setSrcPitch(srcPitch);
  b.setSrcSlice(srcSlice);
  b.setDst(dst + p.dstZ * dstSlice + p.dstY * dstPitch + p.dstXInBytes);
  b.setDstPitch(dstPitch);
  b.setDstSlice(dstSlice);
  b.setWidthBytes(p.WidthInBytes);
  b.setHeight(p.Height);
  b.setDepth(p.Depth);
}

void fillNode(wire::Request::GraphNode::Builder b, const FlatNode& f) {
  auto deps = b.initDependencies(static_cast<unsigned>(f.deps.size()));
  for (size_t i = 0; i < f.deps.size(); ++i) deps.set(static_cast<unsigned>(i), f.deps[i]);
  const GraphNodeObject* n = f.node;
  if (!n || !n->enabled) {
    b.setEmpty();
    return;
  }
  switch (n->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: {
      auto k = b.initKernel();
      k.setFunction(n->function->remote);
      k.getGrid().setX(n->grid[0]);
      k.getGrid().setY(n->grid[1]);
      k.getGrid().setZ(n->grid[2]);
      k.getBlock().setX(n->block[0]);
      k.getBlock().setY(n->block[1]);
      k.getBlock().setZ(n->block[2]);
      k.setSharedBytes(n->sharedBytes);
      k.setParams(kj::arrayPtr(n->params.data(), n->params.size()));
      k.setCooperative(n->cooperative());
      if (const CUlaunchAttributeValue* c = n->cluster()) {
        k.getCluster().setX(c->clusterDim.x);
        k.getCluster().setY(c->clusterDim.y);
        k.getCluster().setZ(c->clusterDim.z);
      }
      return;
    }
    case CU_GRAPH_NODE_TYPE_MEMSET: {
      auto m = b.initMemset();
      m.setDst(n->memset.dst);
      m.setValue(n->memset.value);
      m.setElementSize(n->memset.elementSize);
      m.setWidth(n->memset.width);
      m.setHeight(n->memset.height);
      m.setPitch(n->memset.pitch);
      return;
    }
    case CU_GRAPH_NODE_TYPE_MEMCPY:
      fillCopy(b.initCopy(), n->copy);
      return;
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
      b.setEventRecord(n->event->remote);
      return;
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
      b.setEventWait(n->event->remote);
      return;
    case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP:
      if (n->memOps.empty()) {
        b.setEmpty();  // a batch of no operations
        return;
      }
      fillStreamMemOps(b.initMemOps(static_cast<unsigned>(n->memOps.size())), n->memOps);
      return;
    case CU_GRAPH_NODE_TYPE_CONDITIONAL: {
      auto c = b.initConditional();
      c.setHandle(n->conditionHandle);
      c.setType(static_cast<uint32_t>(n->conditionType));
      auto bodies = c.initBodies(static_cast<unsigned>(f.bodies.size()));
      for (unsigned i = 0; i < f.bodies.size(); ++i) {
        auto list = bodies[i].initNodes(static_cast<unsigned>(f.bodies[i].size()));
        for (unsigned j = 0; j < f.bodies[i].size(); ++j) fillNode(list[j], f.bodies[i][j]);
      }
      return;
    }
    default:
      b.setEmpty();
      return;
  }
}

}  // namespace

CUresult instantiateGraph(GraphObject* graph, unsigned long long flags, GraphExecObject** out) {
  Flattener flat;
  ContextObject* ctx = nullptr;
  {
    std::lock_guard lock(graphMutex());
    std::vector<uint32_t> exits;
    if (CUresult r = flat.add(*graph, {}, &exits); r != CUDA_SUCCESS) return r;
    if (CUresult r = checkNodeHandles(flat.nodes); r != CUDA_SUCCESS) return r;
    if (CUresult r = graphContext(flat.nodes, &ctx); r != CUDA_SUCCESS) return r;
    if (CUresult r = checkOneMemoryExec(*graph); r != CUDA_SUCCESS) return r;
  }
  if (!ctx) {
    if (CUresult r = currentRemoteContext(&ctx); r != CUDA_SUCCESS) return r;
  } else if (CUresult r = DriverState::get().ensureRemote(ctx); r != CUDA_SUCCESS) {
    return r;
  }
  // Host nodes run on the client: the flattened nodes go up in runs between them, each run a graph
  // of its own (edges from earlier runs are kept by the stream's order, as the server replays
  // serially). The nodes are written out under the graph lock before the call, not in its
  // builder: the call holds the session's lock, and capture takes the graph lock first and a
  // session's later.
  std::vector<ExecPiece> pieces;
  std::vector<std::unique_ptr<capnp::MallocMessageBuilder>> runs;
  {
    std::lock_guard lock(graphMutex());
    size_t start = 0;
    auto writeRun = [&](size_t end) {
      if (end == start && !(pieces.empty() && end == flat.nodes.size())) return;
      auto message = std::make_unique<capnp::MallocMessageBuilder>();
      auto create = message->initRoot<wire::Request::GraphCreate>();
      auto nodes = create.initNodes(static_cast<unsigned>(end - start));
      for (size_t i = start; i < end; ++i) {
        FlatNode local = flat.nodes[i];
        local.deps.clear();
        for (uint32_t d : flat.nodes[i].deps) {
          if (d >= start) local.deps.push_back(static_cast<uint32_t>(d - start));
        }
        fillNode(nodes[static_cast<unsigned>(i - start)], local);
      }
      runs.push_back(std::move(message));
      pieces.push_back({});
    };
    for (size_t i = 0; i < flat.nodes.size(); ++i) {
      const GraphNodeObject* n = flat.nodes[i].node;
      if (!n || n->type != CU_GRAPH_NODE_TYPE_HOST) continue;
      writeRun(i);
      pieces.push_back({0, n->host.fn, n->host.userData});
      start = i + 1;
    }
    writeRun(flat.nodes.size());
  }
  size_t run = 0;
  for (ExecPiece& piece : pieces) {
    if (piece.fn) continue;
    auto graphCreate = runs[run++]->getRoot<wire::Request::GraphCreate>();
    CUresult r = ctx->server->call(
        "cuGraphInstantiate",
        [&](wire::Request::Builder b) {
          b.setGraphCreate(graphCreate.asReader());
          b.getGraphCreate().setContext(ctx->remote);
        },
        {},
        [&](wire::Response::Reader reply, ReplyBulk&) {
          piece.remote = reply.getHandle();
          return CUDA_SUCCESS;
        });
    if (r != CUDA_SUCCESS) {
      (void)discardPieces(ctx, pieces, "cuGraphInstantiate");
      return r;
    }
  }
  auto* exec = new GraphExecObject();
  exec->context = ctx;
  exec->pieces = std::move(pieces);
  exec->flags = flags;
  {
    std::lock_guard lock(graphMutex());
    exec->source = cloneGraph(*graph, &exec->nodeOf);
    noteMemoryExec(*graph, exec);
  }
  registerObject(exec);
  *out = exec;
  return CUDA_SUCCESS;
}

CUresult discardPieces(ContextObject* ctx, const std::vector<ExecPiece>& pieces, const char* call) {
  CUresult result = CUDA_SUCCESS;
  for (const ExecPiece& piece : pieces) {
    if (!piece.remote) continue;
    CUresult r = ctx->server->post(call, [&](wire::Request::Builder b) {
      auto d = b.initGraphDestroy();
      d.setContext(ctx->remote);
      d.setGraph(piece.remote);
    });
    if (result == CUDA_SUCCESS) result = r;
  }
  return result;
}

}  // namespace gpupool::client
