// The CUDA graph API: building graphs node by node, reading them back, cloning, instantiating and
// launching. Graphs are built on the client (graph_model.h); an executable graph lives on the
// server and each launch is one posted message (one per run between host nodes, which run on the
// client). Memory alloc and free nodes are in graph_memory_api.cc; external semaphore nodes return
// CUDA_ERROR_NOT_SUPPORTED. Conditional nodes carry their bodies to the server, which decides
// between them as the graph runs (server/handlers/graph_handlers.cc).
#include <algorithm>
#include <cstdio>
#include <set>
#include <string>

#include "client_log.h"
#include "driver_export.h"
#include "graph_memory.h"
#include "graph_model.h"
#include "host_func_api.h"
#include "launch_checks.h"
#include "raw_enum.h"
#include "stream_capture.h"

using namespace gpupool::client;

namespace {

// Locks graph state after checking the driver is initialised.
class Locked {
 public:
  Locked() : init_(requireInit()) {
    if (init_ == CUDA_SUCCESS) lock_ = std::unique_lock(graphMutex());
  }
  CUresult init() const { return init_; }

 private:
  CUresult init_;
  std::unique_lock<std::mutex> lock_;
};

template <typename Fill>
CUresult addNode(CUgraphNode* out, CUgraph h, const CUgraphNode* deps, size_t count, Fill fill) {
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  Locked lock;
  if (lock.init() != CUDA_SUCCESS) return lock.init();
  GraphObject* graph = asGraph(h);
  if (!graph) return CUDA_ERROR_INVALID_VALUE;
  auto node = std::make_unique<GraphNodeObject>();
  if (CUresult r = fill(node.get()); r != CUDA_SUCCESS) return r;
  CUresult error = CUDA_SUCCESS;
  GraphNodeObject* n = addNode(graph, std::move(node), deps, count, &error);
  if (!n) return error;
  *out = reinterpret_cast<CUgraphNode>(n);
  return CUDA_SUCCESS;
}

// The node `h` of kind `type`, under the lock; null when it is not one.
GraphNodeObject* nodeOf(CUgraphNode h, CUgraphNodeType type) {
  GraphNodeObject* n = asGraphNode(h);
  return n && n->type == type ? n : nullptr;
}

// Runs `use` on node `h`, which must be of kind `type`, under the graph lock.
template <typename Use>
CUresult withNode(CUgraphNode h, CUgraphNodeType type, Use use) {
  Locked lock;
  if (lock.init() != CUDA_SUCCESS) return lock.init();
  GraphNodeObject* n = nodeOf(h, type);
  if (!n) return CUDA_ERROR_INVALID_VALUE;
  return use(n);
}

template <typename Params>
CUresult kernelFromParams(GraphNodeObject* node, const Params& p, CUkernel kernel, CUcontext ctx) {
  unsigned grid[3] = {p.gridDimX, p.gridDimY, p.gridDimZ};
  unsigned block[3] = {p.blockDimX, p.blockDimY, p.blockDimZ};
  return setKernelNode(node, p.func, kernel, ctx, grid, block, p.sharedMemBytes, p.kernelParams,
                       p.extra);
}

template <typename Params>
void kernelToParams(const GraphNodeObject* n, Params* p) {
  p->func = reinterpret_cast<CUfunction>(n->function);
  p->gridDimX = n->grid[0];
  p->gridDimY = n->grid[1];
  p->gridDimZ = n->grid[2];
  p->blockDimX = n->block[0];
  p->blockDimY = n->block[1];
  p->blockDimZ = n->block[2];
  p->sharedMemBytes = n->sharedBytes;
  p->kernelParams = const_cast<void**>(n->paramPointers.data());
  p->extra = nullptr;
}

// Edge data other than the default (programmatic dependent launch edges) is not served.
CUresult defaultEdges(const CUgraphEdgeData* edges, size_t count, const char* call) {
  if (!edges) return CUDA_SUCCESS;
  for (size_t i = 0; i < count; ++i) {
    if (edges[i].from_port || edges[i].to_port || edges[i].type) {
      return graphRefusal(CUDA_ERROR_NOT_SUPPORTED, call,
                          "edges other than default ones (programmatic launches) are not served");
    }
  }
  return CUDA_SUCCESS;
}

CUresult changeDependencies(CUgraph h, const CUgraphNode* from, const CUgraphNode* to,
                            const CUgraphEdgeData* edges, size_t count, bool add) {
  if (CUresult r = defaultEdges(edges, count, "cuGraphAddDependencies"); r != CUDA_SUCCESS) {
    return r;
  }
  Locked lock;
  if (lock.init() != CUDA_SUCCESS) return lock.init();
  GraphObject* graph = asGraph(h);
  if (!graph) return CUDA_ERROR_INVALID_VALUE;
  if (count && (!from || !to)) return CUDA_ERROR_INVALID_VALUE;
  if (!add && hasMemoryNodes(*graph)) {
    return graphRefusal(CUDA_ERROR_INVALID_VALUE, "cuGraphRemoveDependencies",
                        "edges of a graph with memory alloc or free nodes cannot be removed");
  }
  // All checked before any changes, so a bad entry changes nothing.
  std::set<std::pair<GraphNodeObject*, GraphNodeObject*>> pairs;
  for (size_t i = 0; i < count; ++i) {
    GraphNodeObject* a = asGraphNode(from[i]);
    GraphNodeObject* b = asGraphNode(to[i]);
    if (!a || !b || a == b || a->graph != graph || b->graph != graph) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    bool exists = std::count(b->dependencies.begin(), b->dependencies.end(), a) > 0;
    if (exists == add || !pairs.insert({a, b}).second) return CUDA_ERROR_INVALID_VALUE;
  }
  for (auto [a, b] : pairs) {
    if (add) {
      b->dependencies.push_back(a);
      a->dependents.push_back(b);
    } else {
      b->dependencies.erase(std::find(b->dependencies.begin(), b->dependencies.end(), a));
      a->dependents.erase(std::find(a->dependents.begin(), a->dependents.end(), b));
    }
  }
  return CUDA_SUCCESS;
}

// Copies up to *count of `nodes` out (nulls after them), as the driver's list getters do.
CUresult listOut(const std::vector<GraphNodeObject*>& nodes, CUgraphNode* out,
                 CUgraphEdgeData* edges, size_t* count) {
  if (!count) return CUDA_ERROR_INVALID_VALUE;
  if (!out) {
    if (edges) return CUDA_ERROR_INVALID_VALUE;
    *count = nodes.size();
    return CUDA_SUCCESS;
  }
  for (size_t i = 0; i < *count; ++i) {
    out[i] = i < nodes.size() ? reinterpret_cast<CUgraphNode>(nodes[i]) : nullptr;
    if (edges) edges[i] = CUgraphEdgeData{};
  }
  *count = std::min(*count, nodes.size());
  return CUDA_SUCCESS;
}

CUresult edgesOut(CUgraph h, CUgraphNode* from, CUgraphNode* to, CUgraphEdgeData* edges,
                  size_t* count) {
  if (!count || (!from != !to) || (edges && !from)) return CUDA_ERROR_INVALID_VALUE;
  Locked lock;
  if (lock.init() != CUDA_SUCCESS) return lock.init();
  GraphObject* graph = asGraph(h);
  if (!graph) return CUDA_ERROR_INVALID_VALUE;
  std::vector<std::pair<GraphNodeObject*, GraphNodeObject*>> all;
  for (auto& n : graph->nodes) {
    for (GraphNodeObject* d : n->dependencies) all.push_back({d, n.get()});
  }
  if (!from) {
    *count = all.size();
    return CUDA_SUCCESS;
  }
  for (size_t i = 0; i < *count; ++i) {
    from[i] = i < all.size() ? reinterpret_cast<CUgraphNode>(all[i].first) : nullptr;
    to[i] = i < all.size() ? reinterpret_cast<CUgraphNode>(all[i].second) : nullptr;
    if (edges) edges[i] = CUgraphEdgeData{};
  }
  *count = std::min(*count, all.size());
  return CUDA_SUCCESS;
}

CUresult nodeEdges(CUgraphNode h, CUgraphNode* out, CUgraphEdgeData* edges, size_t* count,
                   bool dependencies) {
  Locked lock;
  if (lock.init() != CUDA_SUCCESS) return lock.init();
  GraphNodeObject* n = asGraphNode(h);
  if (!n) return CUDA_ERROR_INVALID_VALUE;
  return listOut(dependencies ? n->dependencies : n->dependents, out, edges, count);
}

CUresult instantiate(CUgraphExec* out, CUgraph h, unsigned long long flags) {
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  if (flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH) {
    return graphRefusal(CUDA_ERROR_NOT_SUPPORTED, "cuGraphInstantiate",
                        "graphs launched from the device are not served");
  }
  constexpr unsigned long long kKnown = CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH |
                                        CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |
                                        CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
  if (flags & ~kKnown) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  GraphObject* graph = nullptr;
  {
    std::lock_guard lock(graphMutex());
    graph = asGraph(h);
  }
  if (!graph) return CUDA_ERROR_INVALID_VALUE;
  GraphExecObject* exec = nullptr;
  if (CUresult r = instantiateGraph(graph, flags, &exec); r != CUDA_SUCCESS) return r;
  *out = reinterpret_cast<CUgraphExec>(exec);
  return CUDA_SUCCESS;
}

// The executable graph `h`, and the server stream of `stream` in its context.
CUresult execAndStream(CUgraphExec h, CUstream stream, GraphExecObject** exec, uint64_t* s) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  {
    std::lock_guard lock(graphMutex());
    *exec = asGraphExec(h);
  }
  if (!*exec) return CUDA_ERROR_INVALID_VALUE;
  ContextObject* ctx = nullptr;
  if (CUresult r = resolveStream(stream, &ctx, s); r != CUDA_SUCCESS) return r;
  if (ctx != (*exec)->context) {
    return graphRefusal(CUDA_ERROR_INVALID_VALUE, "cuGraphLaunch",
                        "the stream is not in the context the graph was instantiated in");
  }
  return CUDA_SUCCESS;
}

CUresult launchGraph(CUgraphExec h, CUstream stream) {
  GraphExecObject* exec = nullptr;
  uint64_t s = 0;
  if (CUresult r = execAndStream(h, stream, &exec, &s); r != CUDA_SUCCESS) return r;
  ContextObject* ctx = exec->context;
  std::vector<ExecPiece> pieces;
  {
    std::lock_guard lock(graphMutex());  // an update may replace them
    if (CUresult r = launchGraphMemory(exec, stream, s); r != CUDA_SUCCESS) return r;
    pieces = exec->pieces;
    exec->launchedOn.insert(stream);
  }
  // One posted message per piece: a graph without host nodes is one, however many nodes it has;
  // a host node is a host function placed in the stream, run by a client thread of its own.
  for (const ExecPiece& piece : pieces) {
    CUresult r = CUDA_SUCCESS;
    if (piece.fn) {
      r = enqueueHostFunction(stream, piece.fn, piece.data);
    } else {
      r = ctx->server->post("cuGraphLaunch", [&](wire::Request::Builder b) {
        auto l = b.initGraphLaunch();
        l.setContext(ctx->remote);
        l.setGraph(piece.remote);
        l.setStream(s);
      });
    }
    if (r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

// The graph is on the server from cuGraphInstantiate on, so an upload only checks its arguments.
CUresult uploadGraph(CUgraphExec h, CUstream stream) {
  GraphExecObject* exec = nullptr;
  uint64_t s = 0;
  return execAndStream(h, stream, &exec, &s);
}

const char* typeName(CUgraphNodeType t) {
  switch (t) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
      return "KERNEL";
    case CU_GRAPH_NODE_TYPE_MEMCPY:
      return "MEMCPY";
    case CU_GRAPH_NODE_TYPE_MEMSET:
      return "MEMSET";
    case CU_GRAPH_NODE_TYPE_GRAPH:
      return "GRAPH";
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
      return "EVENT_RECORD";
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
      return "WAIT_EVENT";
    case CU_GRAPH_NODE_TYPE_HOST:
      return "HOST";
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
      return "MEM_ALLOC";
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
      return "MEM_FREE";
    case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP:
      return "BATCH_MEM_OP";
    case CU_GRAPH_NODE_TYPE_CONDITIONAL:
      return "CONDITIONAL";
    default:
      return "EMPTY";
  }
}

void dotGraph(FILE* f, const GraphObject& g, const std::string& prefix) {
  for (const auto& n : g.nodes) {
    std::string label = typeName(n->type);
    if (n->function) label += "\\n" + n->function->name;
    std::fprintf(f, "  \"%s%p\" [label=\"%s\"];\n", prefix.c_str(), static_cast<void*>(n.get()),
                 label.c_str());
    for (GraphNodeObject* d : n->dependencies) {
      std::fprintf(f, "  \"%s%p\" -> \"%s%p\";\n", prefix.c_str(), static_cast<void*>(d),
                   prefix.c_str(), static_cast<void*>(n.get()));
    }
    if (n->child) {
      char inner[64];
      std::snprintf(inner, sizeof inner, "%p/", static_cast<void*>(n.get()));
      dotGraph(f, *n->child, prefix + inner);
    }
    for (size_t b = 0; b < n->bodies.size(); ++b) {
      char inner[80];
      std::snprintf(inner, sizeof inner, "%p/body%zu/", static_cast<void*>(n.get()), b);
      dotGraph(f, *n->bodies[b], prefix + inner);
    }
  }
}

}  // namespace

GPUPOOL_DRIVER_API CUresult cuGraphCreate(CUgraph* out, unsigned int flags) {
  if (!out || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  Locked lock;
  if (lock.init() != CUDA_SUCCESS) return lock.init();
  *out = reinterpret_cast<CUgraph>(newGraph());
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuGraphDestroy(CUgraph h) {
  Locked lock;
  if (lock.init() != CUDA_SUCCESS) return lock.init();
  GraphObject* graph = asGraph(h);
  if (!graph) return CUDA_ERROR_INVALID_VALUE;
  if (graph->owner) {
    return graphRefusal(CUDA_ERROR_INVALID_VALUE, "cuGraphDestroy",
                        "the graph belongs to a child graph or conditional node, and goes with it");
  }
  destroyGraph(graph);
  return CUDA_SUCCESS;
}

// ---- Kernel nodes ----

GPUPOOL_DRIVER_API CUresult cuGraphAddKernelNode_v2(CUgraphNode* out, CUgraph h,
                                                    const CUgraphNode* deps, size_t count,
                                                    const CUDA_KERNEL_NODE_PARAMS* p) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  return addNode(out, h, deps, count,
                 [&](GraphNodeObject* n) { return kernelFromParams(n, *p, p->kern, p->ctx); });
}
GPUPOOL_DRIVER_API CUresult cuGraphAddKernelNode(CUgraphNode* out, CUgraph h,
                                                 const CUgraphNode* deps, size_t count,
                                                 const CUDA_KERNEL_NODE_PARAMS_v1* p) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  return addNode(out, h, deps, count,
                 [&](GraphNodeObject* n) { return kernelFromParams(n, *p, nullptr, nullptr); });
}

GPUPOOL_DRIVER_API CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode h,
                                                          CUDA_KERNEL_NODE_PARAMS* p) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  return withNode(h, CU_GRAPH_NODE_TYPE_KERNEL, [&](GraphNodeObject* n) {
    kernelToParams(n, p);
    p->kern = nullptr;
    p->ctx = reinterpret_cast<CUcontext>(n->context);
    return CUDA_SUCCESS;
  });
}
GPUPOOL_DRIVER_API CUresult cuGraphKernelNodeGetParams(CUgraphNode h,
                                                       CUDA_KERNEL_NODE_PARAMS_v1* p) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  return withNode(h, CU_GRAPH_NODE_TYPE_KERNEL, [&](GraphNodeObject* n) {
    kernelToParams(n, p);
    return CUDA_SUCCESS;
  });
}

GPUPOOL_DRIVER_API CUresult cuGraphKernelNodeSetParams_v2(CUgraphNode h,
                                                          const CUDA_KERNEL_NODE_PARAMS* p) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  return withNode(h, CU_GRAPH_NODE_TYPE_KERNEL, [&](GraphNodeObject* n) {
    GraphNodeObject next;  // checked whole before the node changes
    if (CUresult r = kernelFromParams(&next, *p, p->kern, p->ctx); r != CUDA_SUCCESS) return r;
    setCapturedKernel(n, next.function, next.grid, next.block, next.sharedBytes,
                      std::move(next.params));
    return CUDA_SUCCESS;
  });
}
GPUPOOL_DRIVER_API CUresult cuGraphKernelNodeSetParams(CUgraphNode h,
                                                       const CUDA_KERNEL_NODE_PARAMS_v1* p) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  return withNode(h, CU_GRAPH_NODE_TYPE_KERNEL, [&](GraphNodeObject* n) {
    GraphNodeObject next;
    if (CUresult r = kernelFromParams(&next, *p, nullptr, nullptr); r != CUDA_SUCCESS) return r;
    setCapturedKernel(n, next.function, next.grid, next.block, next.sharedBytes,
                      std::move(next.params));
    return CUDA_SUCCESS;
  });
}

// Kernel node attributes: those valid for graph nodes that checkKernelAttribute accepts; an
// attribute never set reads as its zero value, as the driver's defaults are.
GPUPOOL_DRIVER_API CUresult cuGraphKernelNodeSetAttribute(CUgraphNode h, CUkernelNodeAttrID attr,
                                                          const CUkernelNodeAttrValue* value) {
  if (!value) return CUDA_ERROR_INVALID_VALUE;
  return withNode(h, CU_GRAPH_NODE_TYPE_KERNEL, [&](GraphNodeObject* n) {
    const int id = rawEnumValue(attr);
    if (id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
      // A cluster shape that does not divide the node's grid is the driver's
      // CUDA_ERROR_INVALID_CLUSTER_SIZE (observed on driver 580.159.04, H200: 2x1x1 on a grid of
      // 5); the shapes that fit but are larger than 1x1x1 are refused below.
      const auto& c = value->clusterDim;
      if (c.x && c.y && c.z &&
          (n->grid[0] % c.x != 0 || n->grid[1] % c.y != 0 || n->grid[2] % c.z != 0)) {
        return refuseCall(CUDA_ERROR_INVALID_CLUSTER_SIZE,
                          "cuGraphKernelNodeSetAttribute: the cluster shape does not divide the "
                          "node's grid");
      }
      // A device that runs clusters runs the node in them (GraphKernel.cluster).
      const ContextObject* owner = n->function ? n->function->module->context : nullptr;
      if (c.x && c.y && c.z && uint64_t{c.x} * c.y * c.z > 1 && owner &&
          DriverState::get().device(owner->device)->attribute(CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH)) {
        n->kernelAttributes[id] = *value;
        return CUDA_SUCCESS;
      }
    }
    // A preferred cluster on a device that runs clusters: kept (GetAttribute reads it), served as
    // the node's regular clusters (launch_api.cc, launchEx), which the driver may always fall
    // back to.
    if (id == CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION) {
      const auto& p = value->preferredClusterDim;
      const ContextObject* owner = n->function ? n->function->module->context : nullptr;
      if (p.x && p.y && p.z && owner &&
          DriverState::get().device(owner->device)->attribute(CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH)) {
        if (n->grid[0] % p.x != 0 || n->grid[1] % p.y != 0) {
          return refuseCall(CUDA_ERROR_INVALID_CLUSTER_SIZE,
                            "cuGraphKernelNodeSetAttribute: the preferred cluster shape does not "
                            "divide the node's grid");
        }
        n->kernelAttributes[id] = *value;
        return CUDA_SUCCESS;
      }
    }
    bool cooperative = false;
    if (CUresult r =
            checkKernelAttribute("cuGraphKernelNodeSetAttribute", id, *value, &cooperative);
        r != CUDA_SUCCESS) {
      return r;
    }
    if (id != CU_LAUNCH_ATTRIBUTE_IGNORE) n->kernelAttributes[id] = *value;
    return CUDA_SUCCESS;
  });
}

GPUPOOL_DRIVER_API CUresult cuGraphKernelNodeGetAttribute(CUgraphNode h, CUkernelNodeAttrID attr,
                                                          CUkernelNodeAttrValue* value) {
  if (!value) return CUDA_ERROR_INVALID_VALUE;
  return withNode(h, CU_GRAPH_NODE_TYPE_KERNEL, [&](GraphNodeObject* n) {
    const int id = rawEnumValue(attr);
    CUkernelNodeAttrValue zero{};
    bool cooperative = false;
    // Only attributes a node can carry are answered; the check accepts their zero values.
    if (id == CU_LAUNCH_ATTRIBUTE_IGNORE ||
        checkKernelAttribute("cuGraphKernelNodeGetAttribute", id, zero, &cooperative) !=
            CUDA_SUCCESS) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    auto it = n->kernelAttributes.find(id);
    *value = it == n->kernelAttributes.end() ? zero : it->second;
    return CUDA_SUCCESS;
  });
}

GPUPOOL_DRIVER_API CUresult cuGraphKernelNodeCopyAttributes(CUgraphNode dst, CUgraphNode src) {
  Locked lock;
  if (lock.init() != CUDA_SUCCESS) return lock.init();
  GraphNodeObject* to = nodeOf(dst, CU_GRAPH_NODE_TYPE_KERNEL);
  GraphNodeObject* from = nodeOf(src, CU_GRAPH_NODE_TYPE_KERNEL);
  if (!to || !from) return CUDA_ERROR_INVALID_VALUE;
  if (to->context != from->context) return CUDA_ERROR_INVALID_CONTEXT;
  to->kernelAttributes = from->kernelAttributes;
  return CUDA_SUCCESS;
}

// ---- Memset and memcpy nodes ----

GPUPOOL_DRIVER_API CUresult cuGraphAddMemsetNode(CUgraphNode* out, CUgraph h,
                                                 const CUgraphNode* deps, size_t count,
                                                 const CUDA_MEMSET_NODE_PARAMS* p, CUcontext ctx) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  return addNode(out, h, deps, count,
                 [&](GraphNodeObject* n) { return setMemsetNode(n, *p, ctx); });
}

GPUPOOL_DRIVER_API CUresult cuGraphMemsetNodeGetParams(CUgraphNode h, CUDA_MEMSET_NODE_PARAMS* p) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  return withNode(h, CU_GRAPH_NODE_TYPE_MEMSET, [&](GraphNodeObject* n) {
    *p = n->memset;
    return CUDA_SUCCESS;
  });
}

GPUPOOL_DRIVER_API CUresult cuGraphMemsetNodeSetParams(CUgraphNode h,
                                                       const CUDA_MEMSET_NODE_PARAMS* p) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  return withNode(h, CU_GRAPH_NODE_TYPE_MEMSET, [&](GraphNodeObject* n) {
    GraphNodeObject next;
    if (CUresult r = setMemsetNode(&next, *p, nullptr); r != CUDA_SUCCESS) return r;
    n->memset = next.memset;
    n->context = next.context;
    return CUDA_SUCCESS;
  });
}

GPUPOOL_DRIVER_API CUresult cuGraphAddMemcpyNode(CUgraphNode* out, CUgraph h,
                                                 const CUgraphNode* deps, size_t count,
                                                 const CUDA_MEMCPY3D* p, CUcontext ctx) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  return addNode(out, h, deps, count,
                 [&](GraphNodeObject* n) { return setMemcpyNode(n, *p, ctx); });
}

GPUPOOL_DRIVER_API CUresult cuGraphMemcpyNodeGetParams(CUgraphNode h, CUDA_MEMCPY3D* p) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  return withNode(h, CU_GRAPH_NODE_TYPE_MEMCPY, [&](GraphNodeObject* n) {
    *p = n->copy;
    return CUDA_SUCCESS;
  });
}

GPUPOOL_DRIVER_API CUresult cuGraphMemcpyNodeSetParams(CUgraphNode h, const CUDA_MEMCPY3D* p) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  return withNode(h, CU_GRAPH_NODE_TYPE_MEMCPY, [&](GraphNodeObject* n) {
    GraphNodeObject next;
    if (CUresult r = setMemcpyNode(&next, *p, nullptr); r != CUDA_SUCCESS) return r;
    n->copy = next.copy;
    n->context = next.context;
    return CUDA_SUCCESS;
  });
}

// ---- Empty, event and child graph nodes ----

GPUPOOL_DRIVER_API CUresult cuGraphAddEmptyNode(CUgraphNode* out, CUgraph h,
                                                const CUgraphNode* deps, size_t count) {
  return addNode(out, h, deps, count, [](GraphNodeObject*) { return CUDA_SUCCESS; });
}

namespace {

CUresult addEventNode(CUgraphNode* out, CUgraph h, const CUgraphNode* deps, size_t count,
                      CUevent event, CUgraphNodeType type) {
  return addNode(out, h, deps, count, [&](GraphNodeObject* n) {
    EventObject* e = asEvent(event);
    if (!e) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult r = DriverState::get().ensureRemote(e->context); r != CUDA_SUCCESS) return r;
    n->type = type;
    n->event = e;
    return CUDA_SUCCESS;
  });
}

CUresult eventOfNode(CUgraphNode h, CUgraphNodeType type, CUevent* out) {
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  return withNode(h, type, [&](GraphNodeObject* n) {
    *out = reinterpret_cast<CUevent>(n->event);
    return CUDA_SUCCESS;
  });
}

CUresult setEventOfNode(CUgraphNode h, CUgraphNodeType type, CUevent event) {
  Locked lock;
  if (lock.init() != CUDA_SUCCESS) return lock.init();
  GraphNodeObject* n = nodeOf(h, type);
  EventObject* e = asEvent(event);
  if (!n || !e) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = DriverState::get().ensureRemote(e->context); r != CUDA_SUCCESS) return r;
  n->event = e;
  return CUDA_SUCCESS;
}

}  // namespace

GPUPOOL_DRIVER_API CUresult cuGraphAddEventRecordNode(CUgraphNode* out, CUgraph h,
                                                      const CUgraphNode* deps, size_t count,
                                                      CUevent event) {
  return addEventNode(out, h, deps, count, event, CU_GRAPH_NODE_TYPE_EVENT_RECORD);
}
GPUPOOL_DRIVER_API CUresult cuGraphAddEventWaitNode(CUgraphNode* out, CUgraph h,
                                                    const CUgraphNode* deps, size_t count,
                                                    CUevent event) {
  return addEventNode(out, h, deps, count, event, CU_GRAPH_NODE_TYPE_WAIT_EVENT);
}
GPUPOOL_DRIVER_API CUresult cuGraphEventRecordNodeGetEvent(CUgraphNode h, CUevent* out) {
  return eventOfNode(h, CU_GRAPH_NODE_TYPE_EVENT_RECORD, out);
}
GPUPOOL_DRIVER_API CUresult cuGraphEventWaitNodeGetEvent(CUgraphNode h, CUevent* out) {
  return eventOfNode(h, CU_GRAPH_NODE_TYPE_WAIT_EVENT, out);
}
GPUPOOL_DRIVER_API CUresult cuGraphEventRecordNodeSetEvent(CUgraphNode h, CUevent event) {
  return setEventOfNode(h, CU_GRAPH_NODE_TYPE_EVENT_RECORD, event);
}
GPUPOOL_DRIVER_API CUresult cuGraphEventWaitNodeSetEvent(CUgraphNode h, CUevent event) {
  return setEventOfNode(h, CU_GRAPH_NODE_TYPE_WAIT_EVENT, event);
}

GPUPOOL_DRIVER_API CUresult cuGraphAddChildGraphNode(CUgraphNode* out, CUgraph h,
                                                     const CUgraphNode* deps, size_t count,
                                                     CUgraph child) {
  return addNode(out, h, deps, count, [&](GraphNodeObject* n) {
    GraphObject* c = asGraph(child);
    if (!c || c == asGraph(h)) return CUDA_ERROR_INVALID_VALUE;
    if (hasMemoryNodes(*c)) {
      return graphRefusal(CUDA_ERROR_INVALID_VALUE, "cuGraphAddChildGraphNode",
                          "a graph with memory alloc or free nodes can be a child graph only "
                          "when moved into it (ownership MOVE, not served)");
    }
    n->type = CU_GRAPH_NODE_TYPE_GRAPH;
    n->child = cloneGraph(*c, nullptr);  // the node embeds a copy, as the driver's does
    return CUDA_SUCCESS;
  });
}

GPUPOOL_DRIVER_API CUresult cuGraphChildGraphNodeGetGraph(CUgraphNode h, CUgraph* out) {
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  return withNode(h, CU_GRAPH_NODE_TYPE_GRAPH, [&](GraphNodeObject* n) {
    *out = reinterpret_cast<CUgraph>(n->child.get());
    return CUDA_SUCCESS;
  });
}

// ---- Host nodes ----

GPUPOOL_DRIVER_API CUresult cuGraphAddHostNode(CUgraphNode* out, CUgraph h, const CUgraphNode* deps,
                                               size_t count, const CUDA_HOST_NODE_PARAMS* p) {
  if (!p || !p->fn) return CUDA_ERROR_INVALID_VALUE;
  return addNode(out, h, deps, count, [&](GraphNodeObject* n) {
    n->type = CU_GRAPH_NODE_TYPE_HOST;
    n->host = *p;
    return CUDA_SUCCESS;
  });
}

GPUPOOL_DRIVER_API CUresult cuGraphHostNodeGetParams(CUgraphNode h, CUDA_HOST_NODE_PARAMS* p) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  return withNode(h, CU_GRAPH_NODE_TYPE_HOST, [&](GraphNodeObject* n) {
    *p = n->host;
    return CUDA_SUCCESS;
  });
}

GPUPOOL_DRIVER_API CUresult cuGraphHostNodeSetParams(CUgraphNode h,
                                                     const CUDA_HOST_NODE_PARAMS* p) {
  if (!p || !p->fn) return CUDA_ERROR_INVALID_VALUE;
  return withNode(h, CU_GRAPH_NODE_TYPE_HOST, [&](GraphNodeObject* n) {
    n->host = *p;
    return CUDA_SUCCESS;
  });
}

// ---- Batch memory operation nodes ----

GPUPOOL_DRIVER_API CUresult cuGraphAddBatchMemOpNode(CUgraphNode* out, CUgraph h,
                                                     const CUgraphNode* deps, size_t count,
                                                     const CUDA_BATCH_MEM_OP_NODE_PARAMS* p) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  return addNode(out, h, deps, count, [&](GraphNodeObject* n) {
    return setBatchMemOpNode(n, *p, "cuGraphAddBatchMemOpNode");
  });
}

// The array handed out is the node's own, valid until the node changes or goes.
GPUPOOL_DRIVER_API CUresult cuGraphBatchMemOpNodeGetParams(CUgraphNode h,
                                                           CUDA_BATCH_MEM_OP_NODE_PARAMS* p) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  return withNode(h, CU_GRAPH_NODE_TYPE_BATCH_MEM_OP, [&](GraphNodeObject* n) {
    p->ctx = reinterpret_cast<CUcontext>(n->context);
    p->count = static_cast<unsigned>(n->memOps.size());
    p->paramArray = n->memOps.data();
    p->flags = 0;
    return CUDA_SUCCESS;
  });
}

GPUPOOL_DRIVER_API CUresult cuGraphBatchMemOpNodeSetParams(CUgraphNode h,
                                                           const CUDA_BATCH_MEM_OP_NODE_PARAMS* p) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  return withNode(h, CU_GRAPH_NODE_TYPE_BATCH_MEM_OP, [&](GraphNodeObject* n) {
    GraphNodeObject next;  // checked whole before the node changes
    if (CUresult r = setBatchMemOpNode(&next, *p, "cuGraphBatchMemOpNodeSetParams");
        r != CUDA_SUCCESS) {
      return r;
    }
    n->context = next.context;
    n->memOps = std::move(next.memOps);
    return CUDA_SUCCESS;
  });
}

// ---- Generic node parameters ----

GPUPOOL_DRIVER_API CUresult cuGraphAddNode_v2(CUgraphNode* out, CUgraph h, const CUgraphNode* deps,
                                              const CUgraphEdgeData* edges, size_t count,
                                              CUgraphNodeParams* p) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = defaultEdges(edges, count, "cuGraphAddNode"); r != CUDA_SUCCESS) return r;
  return addNode(out, h, deps, count, [&](GraphNodeObject* n) {
    if (p->type == CU_GRAPH_NODE_TYPE_GRAPH && asGraph(p->graph.graph) == asGraph(h)) {
      return CUDA_ERROR_INVALID_VALUE;  // a graph cannot hold itself
    }
    if (p->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
      CUDA_MEM_ALLOC_NODE_PARAMS v1{};  // the same fields as the _v2 struct
      v1.poolProps = p->alloc.poolProps;
      v1.accessDescs = p->alloc.accessDescs;
      v1.accessDescCount = p->alloc.accessDescCount;
      v1.bytesize = p->alloc.bytesize;
      CUresult r = setAllocNode(n, asGraph(h), &v1, nullptr, "cuGraphAddNode");
      p->alloc.dptr = v1.dptr;
      return r;
    }
    if (p->type == CU_GRAPH_NODE_TYPE_MEM_FREE) {
      return setFreeNode(n, asGraph(h), p->free.dptr, "cuGraphAddNode");
    }
    if (p->type == CU_GRAPH_NODE_TYPE_CONDITIONAL) {
      if (p->reserved0[0] || p->reserved0[1] || p->reserved0[2] || p->reserved2) {
        return CUDA_ERROR_INVALID_VALUE;
      }
      return setConditionalNode(n, asGraph(h), p->conditional, "cuGraphAddNode");
    }
    return nodeFromParams(n, *p, "cuGraphAddNode");
  });
}

// ---- Conditional handles ----

GPUPOOL_DRIVER_API CUresult cuGraphConditionalHandleCreate(CUgraphConditionalHandle* out, CUgraph h,
                                                           CUcontext ctxHandle,
                                                           unsigned int defaultLaunchValue,
                                                           unsigned int flags) {
  constexpr const char* kCall = "cuGraphConditionalHandleCreate";
  if (!out || (flags & ~unsigned{CU_GRAPH_COND_ASSIGN_DEFAULT})) return CUDA_ERROR_INVALID_VALUE;
  ContextObject* ctx = nullptr;
  if (CUresult r = namedOrCurrentRemoteContext(ctxHandle, &ctx); r != CUDA_SUCCESS) return r;
  {
    std::lock_guard lock(graphMutex());
    if (!asGraph(h)) return CUDA_ERROR_INVALID_VALUE;
  }
  // The handle is the server's: kernels hand it to cudaGraphSetConditional, which the server's
  // device (or driver) resolves. The call holds the session's lock, so not the graph lock.
  uint64_t handle = 0;
  CUresult r = ctx->server->call(
      kCall,
      [&](wire::Request::Builder b) {
        auto c = b.initGraphConditionalHandle();
        c.setContext(ctx->remote);
        c.setDefaultValue(defaultLaunchValue);
        c.setAssignDefault((flags & CU_GRAPH_COND_ASSIGN_DEFAULT) != 0);
      },
      {},
      [&](wire::Response::Reader reply, ReplyBulk&) {
        handle = reply.getHandle();
        return CUDA_SUCCESS;
      });
  if (r != CUDA_SUCCESS) return r;
  std::lock_guard lock(graphMutex());
  GraphObject* graph = asGraph(h);
  if (!graph) return CUDA_ERROR_INVALID_VALUE;  // destroyed meanwhile
  graph->conditionHandles[handle] = ctx;
  *out = handle;
  return CUDA_SUCCESS;
}
GPUPOOL_DRIVER_API CUresult cuGraphAddNode(CUgraphNode* out, CUgraph h, const CUgraphNode* deps,
                                           size_t count, CUgraphNodeParams* p) {
  return cuGraphAddNode_v2(out, h, deps, nullptr, count, p);
}

GPUPOOL_DRIVER_API CUresult cuGraphNodeSetParams(CUgraphNode h, CUgraphNodeParams* p) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  constexpr const char* kCall = "cuGraphNodeSetParams";
  return withNode(h, p->type, [&](GraphNodeObject* n) {
    if (n->type == CU_GRAPH_NODE_TYPE_GRAPH) {
      return graphRefusal(CUDA_ERROR_NOT_SUPPORTED, kCall,
                          "replacing a child graph node's graph in a graph is not served");
    }
    GraphNodeObject next;  // checked whole before the node changes
    if (CUresult r = nodeFromParams(&next, *p, kCall); r != CUDA_SUCCESS) return r;
    if (n->type == CU_GRAPH_NODE_TYPE_KERNEL) {
      setCapturedKernel(n, next.function, next.grid, next.block, next.sharedBytes,
                        std::move(next.params));
    }
    n->context = next.context;
    n->memset = next.memset;
    n->copy = next.copy;
    n->event = next.event;
    n->host = next.host;
    n->memOps = std::move(next.memOps);
    return CUDA_SUCCESS;
  });
}

// ---- Structure ----

GPUPOOL_DRIVER_API CUresult cuGraphNodeGetType(CUgraphNode h, CUgraphNodeType* type) {
  if (!type) return CUDA_ERROR_INVALID_VALUE;
  Locked lock;
  if (lock.init() != CUDA_SUCCESS) return lock.init();
  GraphNodeObject* n = asGraphNode(h);
  if (!n) return CUDA_ERROR_INVALID_VALUE;
  *type = n->type;
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuGraphGetNodes(CUgraph h, CUgraphNode* nodes, size_t* count) {
  Locked lock;
  if (lock.init() != CUDA_SUCCESS) return lock.init();
  GraphObject* graph = asGraph(h);
  if (!graph) return CUDA_ERROR_INVALID_VALUE;
  std::vector<GraphNodeObject*> all;
  for (auto& n : graph->nodes) all.push_back(n.get());
  return listOut(all, nodes, nullptr, count);
}

GPUPOOL_DRIVER_API CUresult cuGraphGetRootNodes(CUgraph h, CUgraphNode* nodes, size_t* count) {
  Locked lock;
  if (lock.init() != CUDA_SUCCESS) return lock.init();
  GraphObject* graph = asGraph(h);
  if (!graph) return CUDA_ERROR_INVALID_VALUE;
  std::vector<GraphNodeObject*> roots;
  for (auto& n : graph->nodes) {
    if (n->dependencies.empty()) roots.push_back(n.get());
  }
  return listOut(roots, nodes, nullptr, count);
}

GPUPOOL_DRIVER_API CUresult cuGraphGetEdges(CUgraph h, CUgraphNode* from, CUgraphNode* to,
                                            size_t* count) {
  return edgesOut(h, from, to, nullptr, count);
}
GPUPOOL_DRIVER_API CUresult cuGraphGetEdges_v2(CUgraph h, CUgraphNode* from, CUgraphNode* to,
                                               CUgraphEdgeData* edges, size_t* count) {
  return edgesOut(h, from, to, edges, count);
}

GPUPOOL_DRIVER_API CUresult cuGraphNodeGetDependencies(CUgraphNode h, CUgraphNode* deps,
                                                       size_t* count) {
  return nodeEdges(h, deps, nullptr, count, true);
}
GPUPOOL_DRIVER_API CUresult cuGraphNodeGetDependencies_v2(CUgraphNode h, CUgraphNode* deps,
                                                          CUgraphEdgeData* edges, size_t* count) {
  return nodeEdges(h, deps, edges, count, true);
}
GPUPOOL_DRIVER_API CUresult cuGraphNodeGetDependentNodes(CUgraphNode h, CUgraphNode* nodes,
                                                         size_t* count) {
  return nodeEdges(h, nodes, nullptr, count, false);
}
GPUPOOL_DRIVER_API CUresult cuGraphNodeGetDependentNodes_v2(CUgraphNode h, CUgraphNode* nodes,
                                                            CUgraphEdgeData* edges, size_t* count) {
  return nodeEdges(h, nodes, edges, count, false);
}

GPUPOOL_DRIVER_API CUresult cuGraphAddDependencies(CUgraph h, const CUgraphNode* from,
                                                   const CUgraphNode* to, size_t count) {
  return changeDependencies(h, from, to, nullptr, count, true);
}
GPUPOOL_DRIVER_API CUresult cuGraphAddDependencies_v2(CUgraph h, const CUgraphNode* from,
                                                      const CUgraphNode* to,
                                                      const CUgraphEdgeData* edges, size_t count) {
  return changeDependencies(h, from, to, edges, count, true);
}
GPUPOOL_DRIVER_API CUresult cuGraphRemoveDependencies(CUgraph h, const CUgraphNode* from,
                                                      const CUgraphNode* to, size_t count) {
  return changeDependencies(h, from, to, nullptr, count, false);
}
GPUPOOL_DRIVER_API CUresult cuGraphRemoveDependencies_v2(CUgraph h, const CUgraphNode* from,
                                                         const CUgraphNode* to,
                                                         const CUgraphEdgeData* edges,
                                                         size_t count) {
  return changeDependencies(h, from, to, edges, count, false);
}

GPUPOOL_DRIVER_API CUresult cuGraphDestroyNode(CUgraphNode h) {
  Locked lock;
  if (lock.init() != CUDA_SUCCESS) return lock.init();
  GraphNodeObject* n = asGraphNode(h);
  if (!n) return CUDA_ERROR_INVALID_VALUE;
  if (hasMemoryNodes(*n->graph)) {
    return graphRefusal(CUDA_ERROR_INVALID_VALUE, "cuGraphDestroyNode",
                        "nodes of a graph with memory alloc or free nodes cannot be deleted");
  }
  removeNode(n);
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuGraphClone(CUgraph* out, CUgraph h) {
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  Locked lock;
  if (lock.init() != CUDA_SUCCESS) return lock.init();
  GraphObject* graph = asGraph(h);
  if (!graph) return CUDA_ERROR_INVALID_VALUE;
  if (hasMemoryNodes(*graph)) {
    return graphRefusal(CUDA_ERROR_INVALID_VALUE, "cuGraphClone",
                        "a graph with memory alloc or free nodes cannot be cloned");
  }
  std::map<const GraphNodeObject*, GraphNodeObject*> mapping;
  GraphObject* copy = cloneGraph(*graph, &mapping).release();
  copy->clonedFrom = std::move(mapping);
  *out = reinterpret_cast<CUgraph>(copy);
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuGraphNodeFindInClone(CUgraphNode* out, CUgraphNode original,
                                                   CUgraph clone) {
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  Locked lock;
  if (lock.init() != CUDA_SUCCESS) return lock.init();
  GraphObject* graph = asGraph(clone);
  if (!graph) return CUDA_ERROR_INVALID_VALUE;
  auto it = graph->clonedFrom.find(reinterpret_cast<const GraphNodeObject*>(original));
  // The copy may have been destroyed since (cuGraphDestroyNode).
  if (it == graph->clonedFrom.end() || !asGraphNode(reinterpret_cast<CUgraphNode>(it->second))) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *out = reinterpret_cast<CUgraphNode>(it->second);
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuGraphDebugDotPrint(CUgraph h, const char* path, unsigned int) {
  if (!path) return CUDA_ERROR_INVALID_VALUE;
  Locked lock;
  if (lock.init() != CUDA_SUCCESS) return lock.init();
  GraphObject* graph = asGraph(h);
  if (!graph) return CUDA_ERROR_INVALID_VALUE;
  FILE* f = std::fopen(path, "w");
  if (!f) return CUDA_ERROR_OPERATING_SYSTEM;
  std::fprintf(f, "digraph cudaGraph {\n");
  dotGraph(f, *graph, "");
  std::fprintf(f, "}\n");
  return std::fclose(f) == 0 ? CUDA_SUCCESS : CUDA_ERROR_OPERATING_SYSTEM;
}

// ---- Executable graphs ----

GPUPOOL_DRIVER_API CUresult cuGraphInstantiateWithFlags(CUgraphExec* out, CUgraph h,
                                                        unsigned long long flags) {
  return instantiate(out, h, flags);
}

// The pre-12.0 ABI: an error node and a log buffer, which stay empty.
GPUPOOL_DRIVER_API CUresult cuGraphInstantiate(CUgraphExec* out, CUgraph h, CUgraphNode* errorNode,
                                               char* log, size_t logBytes) {
  if (errorNode) *errorNode = nullptr;
  if (log && logBytes) log[0] = '\0';
  return instantiate(out, h, 0);
}
GPUPOOL_DRIVER_API CUresult cuGraphInstantiate_v2(CUgraphExec* out, CUgraph h,
                                                  CUgraphNode* errorNode, char* log,
                                                  size_t logBytes) {
  return cuGraphInstantiate(out, h, errorNode, log, logBytes);
}

GPUPOOL_DRIVER_API CUresult cuGraphInstantiateWithParams(CUgraphExec* out, CUgraph h,
                                                         CUDA_GRAPH_INSTANTIATE_PARAMS* p) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = instantiate(out, h, p->flags);
  if (r == CUDA_SUCCESS && (p->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD)) {
    r = uploadGraph(*out, p->hUploadStream);
  }
  p->hErrNode_out = nullptr;
  p->result_out = r == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS : CUDA_GRAPH_INSTANTIATE_ERROR;
  return r;
}
GPUPOOL_DRIVER_API CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec* out, CUgraph h,
                                                              CUDA_GRAPH_INSTANTIATE_PARAMS* p) {
  PerThreadDefaultStream perThread;
  return cuGraphInstantiateWithParams(out, h, p);
}

GPUPOOL_DRIVER_API CUresult cuGraphExecGetFlags(CUgraphExec h, cuuint64_t* flags) {
  if (!flags) return CUDA_ERROR_INVALID_VALUE;
  Locked lock;
  if (lock.init() != CUDA_SUCCESS) return lock.init();
  GraphExecObject* exec = asGraphExec(h);
  if (!exec) return CUDA_ERROR_INVALID_VALUE;
  *flags = exec->flags;
  return CUDA_SUCCESS;
}

namespace {

// Sets the parameters of the kernel node the executable graph made from `node` (see
// updateExecGraph: launches already made keep the old parameters).
template <typename Params>
CUresult setExecKernel(CUgraphExec h, CUgraphNode node, const Params& p, CUkernel kernel,
                       CUcontext ctx) {
  constexpr const char* kCall = "cuGraphExecKernelNodeSetParams";
  return updateExecGraph(h, kCall, [&](GraphObject&, NodeMap& nodes) {
    auto it = nodes.find(reinterpret_cast<const GraphNodeObject*>(node));
    if (it == nodes.end() || it->second->type != CU_GRAPH_NODE_TYPE_KERNEL) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    GraphNodeObject next;
    if (CUresult r = kernelFromParams(&next, p, kernel, ctx); r != CUDA_SUCCESS) return r;
    if (next.context != it->second->context) {
      return graphRefusal(CUDA_ERROR_INVALID_VALUE, kCall,
                          "a kernel node cannot move to another context");
    }
    setCapturedKernel(it->second, next.function, next.grid, next.block, next.sharedBytes,
                      std::move(next.params));
    return CUDA_SUCCESS;
  });
}

}  // namespace

GPUPOOL_DRIVER_API CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec h, CUgraphNode node,
                                                              const CUDA_KERNEL_NODE_PARAMS* p) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  return setExecKernel(h, node, *p, p->kern, p->ctx);
}
GPUPOOL_DRIVER_API CUresult cuGraphExecKernelNodeSetParams(CUgraphExec h, CUgraphNode node,
                                                           const CUDA_KERNEL_NODE_PARAMS_v1* p) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  return setExecKernel(h, node, *p, nullptr, nullptr);
}

GPUPOOL_DRIVER_API CUresult cuGraphExecDestroy(CUgraphExec h) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  GraphExecObject* exec = nullptr;
  std::map<UserObject*, unsigned> refs;  // dropped once the launches' work has run
  {
    std::lock_guard lock(graphMutex());
    exec = asGraphExec(h);
    if (!exec) return CUDA_ERROR_INVALID_VALUE;
    unregisterObject(exec);
    exec->tag = Tag::kDead;
    forgetMemoryExec(exec);
    refs.swap(exec->source->userRefs);
    destroyGraph(exec->source.release());
  }
  ContextObject* ctx = exec->context;
  CUresult r = CUDA_SUCCESS;
  if (ctx->remote) r = discardPieces(ctx, exec->pieces, "cuGraphExecDestroy");
  releaseUserObjectsAfter(exec->launchedOn, std::move(refs));
  delete exec;
  return r;
}

GPUPOOL_DRIVER_API CUresult cuGraphUpload(CUgraphExec h, CUstream stream) {
  return uploadGraph(h, stream);
}
GPUPOOL_DRIVER_API CUresult cuGraphUpload_ptsz(CUgraphExec h, CUstream stream) {
  PerThreadDefaultStream perThread;
  return uploadGraph(h, stream);
}
GPUPOOL_DRIVER_API CUresult cuGraphLaunch(CUgraphExec h, CUstream stream) {
  return launchGraph(h, stream);
}
GPUPOOL_DRIVER_API CUresult cuGraphLaunch_ptsz(CUgraphExec h, CUstream stream) {
  PerThreadDefaultStream perThread;
  return launchGraph(h, stream);
}
