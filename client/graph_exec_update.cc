// Changing executable graphs: cuGraphExecUpdate and the per-node exec setters (memset, memcpy,
// child graph, event record/wait, batch memory operations, enable/disable). The exec keeps its own
// copy of the graph on the client (graph_model.h); every change is made to a fresh copy of it,
// which is uploaded in place of the old one (updateExecGraph), so a change that cannot be applied
// changes nothing.
#include <algorithm>
#include <set>
#include <string>

#include "driver_export.h"
#include "graph_model.h"

namespace gpupool::client {

CUresult updateExecGraph(CUgraphExec h, const char* call,
                         const std::function<CUresult(GraphObject& copy, NodeMap& nodes)>& change) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  GraphExecObject* exec = nullptr;
  std::unique_ptr<GraphObject> copy;
  NodeMap nodes;
  {
    std::lock_guard lock(graphMutex());
    exec = asGraphExec(h);
    if (!exec) return CUDA_ERROR_INVALID_VALUE;
    NodeMap fromSource;
    copy = cloneGraph(*exec->source, &fromSource);
    for (auto& [key, node] : exec->nodeOf) nodes[key] = fromSource.at(node);
    if (CUresult r = change(*copy, nodes); r != CUDA_SUCCESS) {
      destroyGraph(copy.release());
      return r;
    }
  }
  GraphExecObject* fresh = nullptr;
  if (CUresult r = instantiateGraph(copy.get(), exec->flags, &fresh); r != CUDA_SUCCESS) {
    std::lock_guard lock(graphMutex());
    destroyGraph(copy.release());
    return r;
  }
  std::vector<ExecPiece> discard;
  CUresult result = CUDA_SUCCESS;
  {
    std::lock_guard lock(graphMutex());
    unregisterObject(fresh);
    fresh->tag = Tag::kDead;
    destroyGraph(fresh->source.release());
    if (fresh->context != exec->context) {
      // Every node moved to another context: the exec cannot follow.
      discard = fresh->pieces;
      destroyGraph(copy.release());
      result = graphRefusal(CUDA_ERROR_INVALID_VALUE, call,
                            "the change would move the graph to another context");
    } else {
      discard = std::move(exec->pieces);
      exec->pieces = fresh->pieces;
      destroyGraph(exec->source.release());
      exec->source = std::move(copy);
      exec->nodeOf = std::move(nodes);
    }
  }
  ContextObject* ctx = fresh->context;
  delete fresh;
  CUresult posted = discardPieces(ctx, discard, call);
  return result != CUDA_SUCCESS ? result : posted;
}

}  // namespace gpupool::client

using namespace gpupool::client;

namespace {

// The exec's node for `node`, of kind `type`; null when it has none.
GraphNodeObject* execNode(NodeMap& nodes, CUgraphNode node, CUgraphNodeType type) {
  auto it = nodes.find(reinterpret_cast<const GraphNodeObject*>(node));
  return it != nodes.end() && it->second->type == type ? it->second : nullptr;
}

bool oneDimensional(const CUDA_MEMSET_NODE_PARAMS& p) { return p.height == 1; }
bool oneDimensional(const CUDA_MEMCPY3D& p) { return p.Height <= 1 && p.Depth <= 1; }

// Whether batch memory operations `next` may replace `now` in an executable graph: the context,
// the count, each operation's kind and a barrier's flags stay; addresses, values and the kind
// of a wait may change (cuGraphExecBatchMemOpNodeSetParams's rules).
bool memOpsUpdatable(const GraphNodeObject& now, const GraphNodeObject& next) {
  if (now.context != next.context || now.memOps.size() != next.memOps.size()) return false;
  for (size_t i = 0; i < now.memOps.size(); ++i) {
    const CUstreamBatchMemOpParams &a = now.memOps[i], &b = next.memOps[i];
    if (a.operation != b.operation) return false;
    if (a.operation == CU_STREAM_MEM_OP_BARRIER && a.memoryBarrier.flags != b.memoryBarrier.flags) {
      return false;
    }
  }
  return true;
}

// Why a graph cannot replace another in an executable graph (cuGraphExecUpdate's rules): the
// nodes pair up in the order they were added; the counts, the edges between paired nodes and
// each pair's type must match, and each pair's parameters may change only as the driver allows.
struct Mismatch {
  CUgraphExecUpdateResult result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
  const GraphNodeObject* node = nullptr;  // in the new graph
  const GraphNodeObject* from = nullptr;  // the other end of a mismatched edge
};

Mismatch compareGraphs(const GraphObject& now, const GraphObject& next);

Mismatch compareNodes(const GraphNodeObject& a, const GraphNodeObject& b) {
  auto fail = [&](CUgraphExecUpdateResult r) { return Mismatch{r, &b, nullptr}; };
  if (a.type != b.type) return fail(CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED);
  switch (a.type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
      // The function's owning context cannot change.
      if (a.context != b.context) {
        return fail(CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE);
      }
      // "A cooperative node cannot be updated to a non-cooperative node, and vice-versa."
      if (a.cooperative() != b.cooperative()) {
        return fail(CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED);
      }
      break;
    case CU_GRAPH_NODE_TYPE_MEMSET: {
      // Same context; a 2D memset may change its address and value only.
      const auto &p = a.memset, &q = b.memset;
      bool shape = p.width == q.width && p.height == q.height && p.pitch == q.pitch &&
                   p.elementSize == q.elementSize;
      if (a.context != b.context || ((!oneDimensional(p) || !oneDimensional(q)) && !shape)) {
        return fail(CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED);
      }
      break;
    }
    case CU_GRAPH_NODE_TYPE_MEMCPY:
      // Same context and the same memory types at both ends.
      if (a.context != b.context || a.copy.srcMemoryType != b.copy.srcMemoryType ||
          a.copy.dstMemoryType != b.copy.dstMemoryType) {
        return fail(CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED);
      }
      break;
    case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP:
      if (!memOpsUpdatable(a, b)) return fail(CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED);
      break;
    case CU_GRAPH_NODE_TYPE_GRAPH:
      if (Mismatch m = compareGraphs(*a.child, *b.child);
          m.result != CU_GRAPH_EXEC_UPDATE_SUCCESS) {
        return fail(m.result);  // reported against the child graph node itself
      }
      break;
    case CU_GRAPH_NODE_TYPE_CONDITIONAL:
      // The same handle and kind; the bodies pair up as graphs do.
      if (a.conditionHandle != b.conditionHandle || a.conditionType != b.conditionType ||
          a.bodies.size() != b.bodies.size()) {
        return fail(CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED);
      }
      for (size_t i = 0; i < a.bodies.size(); ++i) {
        if (Mismatch m = compareGraphs(*a.bodies[i], *b.bodies[i]);
            m.result != CU_GRAPH_EXEC_UPDATE_SUCCESS) {
          return fail(m.result);  // reported against the conditional node itself
        }
      }
      break;
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
      // Memory nodes cannot change: an allocation's address is fixed.
      if (a.memory != b.memory) return fail(CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED);
      break;
    default:  // empty and event nodes: any event may replace another
      break;
  }
  return {};
}

Mismatch compareGraphs(const GraphObject& now, const GraphObject& next) {
  if (now.nodes.size() != next.nodes.size()) return {CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED};
  std::map<const GraphNodeObject*, size_t> indexNow, indexNext;
  for (size_t i = 0; i < now.nodes.size(); ++i) {
    indexNow[now.nodes[i].get()] = i;
    indexNext[next.nodes[i].get()] = i;
  }
  // More exit nodes in the new graph is checked before the edges, and names one of its exit
  // nodes: the first whose partner in the exec is not one (as NVIDIA does: driver 580.159.04, H200,
  // named the first of two exit nodes where the second's dependency also differed).
  std::vector<bool> exitNow(now.nodes.size(), true), exitNext(next.nodes.size(), true);
  for (size_t i = 0; i < now.nodes.size(); ++i) {
    for (const GraphNodeObject* d : now.nodes[i]->dependencies) exitNow[indexNow.at(d)] = false;
    for (const GraphNodeObject* d : next.nodes[i]->dependencies) exitNext[indexNext.at(d)] = false;
  }
  if (std::count(exitNext.begin(), exitNext.end(), true) >
      std::count(exitNow.begin(), exitNow.end(), true)) {
    for (size_t i = 0; i < next.nodes.size(); ++i) {
      if (exitNext[i] && !exitNow[i]) {
        return {CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, next.nodes[i].get()};
      }
    }
  }
  for (size_t i = 0; i < now.nodes.size(); ++i) {
    std::set<size_t> depsNow, depsNext;
    for (const GraphNodeObject* d : now.nodes[i]->dependencies) depsNow.insert(indexNow.at(d));
    for (const GraphNodeObject* d : next.nodes[i]->dependencies) depsNext.insert(indexNext.at(d));
    if (depsNow != depsNext) {
      // The first edge one graph has and the other lacks, named by its ends in the new graph.
      std::vector<size_t> differ;
      std::set_symmetric_difference(depsNow.begin(), depsNow.end(), depsNext.begin(),
                                    depsNext.end(), std::back_inserter(differ));
      return {CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, next.nodes[i].get(),
              next.nodes[differ.front()].get()};
    }
  }
  for (size_t i = 0; i < now.nodes.size(); ++i) {
    if (Mismatch m = compareNodes(*now.nodes[i], *next.nodes[i]);
        m.result != CU_GRAPH_EXEC_UPDATE_SUCCESS) {
      return m;
    }
  }
  return {};
}

// Gives `to` the parameters of `from` (same kind, already compared); the enabled state is the
// exec's own and stays.
void copyParameters(GraphNodeObject* to, const GraphNodeObject& from) {
  if (from.type == CU_GRAPH_NODE_TYPE_KERNEL) {
    setCapturedKernel(to, from.function, from.grid, from.block, from.sharedBytes, from.params);
    to->kernelAttributes = from.kernelAttributes;  // its cluster and hints with it
  }
  to->context = from.context;
  to->memset = from.memset;
  to->copy = from.copy;
  to->event = from.event;
  to->host = from.host;
  to->memOps = from.memOps;
  if (from.child) {
    destroyGraph(to->child.release());
    to->child = cloneGraph(*from.child, nullptr);
  }
  // Body nodes change in place: the exec's node map names them (compareNodes paired them up).
  for (size_t b = 0; b < from.bodies.size(); ++b) {
    for (size_t i = 0; i < from.bodies[b]->nodes.size(); ++i) {
      copyParameters(to->bodies[b]->nodes[i].get(), *from.bodies[b]->nodes[i]);
    }
  }
}

CUresult execUpdate(CUgraphExec h, CUgraph g, CUgraphExecUpdateResult* result,
                    CUgraphNode* errorNode, CUgraphNode* errorFrom) {
  Mismatch found;
  bool checked = false;
  // The lambda leaves the node map alone: the exec's nodes keep being named by the nodes of the
  // graph it was made from only; a node of the update's graph is CUDA_ERROR_INVALID_VALUE to the
  // per-node setters (observed on driver 580.159.04, H200, for cuGraphExecKernelNodeSetParams).
  CUresult r = updateExecGraph(h, "cuGraphExecUpdate", [&](GraphObject& copy, NodeMap&) {
    const GraphObject* next = asGraph(g);
    if (!next) return CUDA_ERROR_INVALID_VALUE;
    checked = true;
    found = compareGraphs(copy, *next);
    if (found.result != CU_GRAPH_EXEC_UPDATE_SUCCESS) {
      return graphRefusal(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, "cuGraphExecUpdate",
                          "the graph does not match the executable graph's (see the result)");
    }
    for (size_t i = 0; i < copy.nodes.size(); ++i) {
      copyParameters(copy.nodes[i].get(), *next->nodes[i]);
    }
    return CUDA_SUCCESS;
  });
  if (!checked) return r;  // an invalid handle: nothing to report
  if (r != CUDA_SUCCESS && found.result == CU_GRAPH_EXEC_UPDATE_SUCCESS) {
    found.result = CU_GRAPH_EXEC_UPDATE_ERROR;  // the upload failed: nothing changed
  }
  *result = found.result;
  *errorNode = reinterpret_cast<CUgraphNode>(const_cast<GraphNodeObject*>(found.node));
  if (errorFrom)
    *errorFrom = reinterpret_cast<CUgraphNode>(const_cast<GraphNodeObject*>(found.from));
  return r;
}

// Gives the exec's node `n` the parameters of `next` (a node of the same kind, already checked as
// a new node), under the rules the driver's exec setters keep.
CUresult applyToExec(GraphNodeObject* n, GraphNodeObject& next, const char* call) {
  if (n->type != next.type) return CUDA_ERROR_INVALID_VALUE;
  switch (n->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
      if (next.context != n->context) {
        return graphRefusal(CUDA_ERROR_INVALID_VALUE, call,
                            "a kernel node cannot move to another context");
      }
      setCapturedKernel(n, next.function, next.grid, next.block, next.sharedBytes,
                        std::move(next.params));
      return CUDA_SUCCESS;
    case CU_GRAPH_NODE_TYPE_MEMSET:
    case CU_GRAPH_NODE_TYPE_MEMCPY: {
      bool memset = n->type == CU_GRAPH_NODE_TYPE_MEMSET;
      if (next.context != n->context) {
        return graphRefusal(CUDA_ERROR_INVALID_VALUE, call,
                            "the memory is not in the context of the original memory");
      }
      bool flat = memset ? oneDimensional(n->memset) && oneDimensional(next.memset)
                         : oneDimensional(n->copy) && oneDimensional(next.copy);
      if (!flat) {
        return graphRefusal(CUDA_ERROR_INVALID_VALUE, call,
                            "only one-dimensional memsets and copies can be changed in an "
                            "executable graph");
      }
      if (memset) {
        n->memset = next.memset;
      } else {
        n->copy = next.copy;
      }
      return CUDA_SUCCESS;
    }
    case CU_GRAPH_NODE_TYPE_GRAPH:
      if (compareGraphs(*n->child, *next.child).result != CU_GRAPH_EXEC_UPDATE_SUCCESS) {
        return graphRefusal(CUDA_ERROR_INVALID_VALUE, call,
                            "the graph's topology, node order or node kinds differ from the "
                            "child graph the node holds");
      }
      for (size_t i = 0; i < next.child->nodes.size(); ++i) {
        copyParameters(n->child->nodes[i].get(), *next.child->nodes[i]);
      }
      return CUDA_SUCCESS;
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
      n->event = next.event;
      return CUDA_SUCCESS;
    case CU_GRAPH_NODE_TYPE_HOST:
      n->host = next.host;
      return CUDA_SUCCESS;
    case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP:
      if (!memOpsUpdatable(*n, next)) {
        return graphRefusal(CUDA_ERROR_INVALID_VALUE, call,
                            "only the addresses, values and wait kinds of the operations may "
                            "change, in the same context");
      }
      n->memOps = std::move(next.memOps);
      return CUDA_SUCCESS;
    default:
      return CUDA_SUCCESS;  // an empty node has nothing to set
  }
}

// Builds a node with `fill` and gives its parameters to the exec's node for `node`, of kind `type`.
template <typename Fill>
CUresult setExecNode(CUgraphExec h, CUgraphNode node, CUgraphNodeType type, const char* call,
                     Fill fill) {
  return updateExecGraph(h, call, [&](GraphObject&, NodeMap& nodes) {
    GraphNodeObject* n = execNode(nodes, node, type);
    if (!n) return CUDA_ERROR_INVALID_VALUE;
    GraphNodeObject next;
    next.type = type;
    if (CUresult r = fill(&next); r != CUDA_SUCCESS) return r;
    CUresult r = applyToExec(n, next, call);
    if (next.child) destroyGraph(next.child.release());
    return r;
  });
}

CUresult setExecEvent(CUgraphExec h, CUgraphNode node, CUevent event, CUgraphNodeType type,
                      const char* call) {
  return setExecNode(h, node, type, call, [&](GraphNodeObject* next) {
    EventObject* e = asEvent(event);
    if (!e) return CUDA_ERROR_INVALID_VALUE;
    next->event = e;
    return DriverState::get().ensureRemote(e->context);
  });
}

}  // namespace

GPUPOOL_DRIVER_API CUresult cuGraphExecUpdate_v2(CUgraphExec h, CUgraph g,
                                                 CUgraphExecUpdateResultInfo* info) {
  if (!info) return CUDA_ERROR_INVALID_VALUE;
  return execUpdate(h, g, &info->result, &info->errorNode, &info->errorFromNode);
}
GPUPOOL_DRIVER_API CUresult cuGraphExecUpdate(CUgraphExec h, CUgraph g, CUgraphNode* errorNode,
                                              CUgraphExecUpdateResult* result) {
  if (!errorNode || !result) return CUDA_ERROR_INVALID_VALUE;
  return execUpdate(h, g, result, errorNode, nullptr);
}

GPUPOOL_DRIVER_API CUresult cuGraphExecMemsetNodeSetParams(CUgraphExec h, CUgraphNode node,
                                                           const CUDA_MEMSET_NODE_PARAMS* p,
                                                           CUcontext ctx) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  return setExecNode(h, node, CU_GRAPH_NODE_TYPE_MEMSET, "cuGraphExecMemsetNodeSetParams",
                     [&](GraphNodeObject* next) { return setMemsetNode(next, *p, ctx); });
}

GPUPOOL_DRIVER_API CUresult cuGraphExecMemcpyNodeSetParams(CUgraphExec h, CUgraphNode node,
                                                           const CUDA_MEMCPY3D* p, CUcontext ctx) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  return setExecNode(h, node, CU_GRAPH_NODE_TYPE_MEMCPY, "cuGraphExecMemcpyNodeSetParams",
                     [&](GraphNodeObject* next) { return setMemcpyNode(next, *p, ctx); });
}

GPUPOOL_DRIVER_API CUresult cuGraphExecChildGraphNodeSetParams(CUgraphExec h, CUgraphNode node,
                                                               CUgraph child) {
  return setExecNode(h, node, CU_GRAPH_NODE_TYPE_GRAPH, "cuGraphExecChildGraphNodeSetParams",
                     [&](GraphNodeObject* next) {
                       GraphObject* c = asGraph(child);
                       if (!c) return CUDA_ERROR_INVALID_VALUE;
                       next->child = cloneGraph(*c, nullptr);
                       return CUDA_SUCCESS;
                     });
}

GPUPOOL_DRIVER_API CUresult cuGraphExecNodeSetParams(CUgraphExec h, CUgraphNode node,
                                                     CUgraphNodeParams* p) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  constexpr const char* kCall = "cuGraphExecNodeSetParams";
  return setExecNode(h, node, p->type, kCall,
                     [&](GraphNodeObject* next) { return nodeFromParams(next, *p, kCall); });
}

GPUPOOL_DRIVER_API CUresult cuGraphExecBatchMemOpNodeSetParams(
    CUgraphExec h, CUgraphNode node, const CUDA_BATCH_MEM_OP_NODE_PARAMS* p) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  constexpr const char* kCall = "cuGraphExecBatchMemOpNodeSetParams";
  return setExecNode(h, node, CU_GRAPH_NODE_TYPE_BATCH_MEM_OP, kCall,
                     [&](GraphNodeObject* next) { return setBatchMemOpNode(next, *p, kCall); });
}

GPUPOOL_DRIVER_API CUresult cuGraphExecHostNodeSetParams(CUgraphExec h, CUgraphNode node,
                                                         const CUDA_HOST_NODE_PARAMS* p) {
  if (!p || !p->fn) return CUDA_ERROR_INVALID_VALUE;
  return setExecNode(h, node, CU_GRAPH_NODE_TYPE_HOST, "cuGraphExecHostNodeSetParams",
                     [&](GraphNodeObject* next) {
                       next->host = *p;
                       return CUDA_SUCCESS;
                     });
}

GPUPOOL_DRIVER_API CUresult cuGraphExecEventRecordNodeSetEvent(CUgraphExec h, CUgraphNode node,
                                                               CUevent event) {
  return setExecEvent(h, node, event, CU_GRAPH_NODE_TYPE_EVENT_RECORD,
                      "cuGraphExecEventRecordNodeSetEvent");
}
GPUPOOL_DRIVER_API CUresult cuGraphExecEventWaitNodeSetEvent(CUgraphExec h, CUgraphNode node,
                                                             CUevent event) {
  return setExecEvent(h, node, event, CU_GRAPH_NODE_TYPE_WAIT_EVENT,
                      "cuGraphExecEventWaitNodeSetEvent");
}

GPUPOOL_DRIVER_API CUresult cuGraphNodeSetEnabled(CUgraphExec h, CUgraphNode node,
                                                  unsigned int isEnabled) {
  return updateExecGraph(h, "cuGraphNodeSetEnabled", [&](GraphObject&, NodeMap& nodes) {
    auto it = nodes.find(reinterpret_cast<const GraphNodeObject*>(node));
    if (it == nodes.end()) return CUDA_ERROR_INVALID_VALUE;
    CUgraphNodeType t = it->second->type;
    // The driver switches kernel, memset and memcpy nodes only.
    if (t != CU_GRAPH_NODE_TYPE_KERNEL && t != CU_GRAPH_NODE_TYPE_MEMSET &&
        t != CU_GRAPH_NODE_TYPE_MEMCPY) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    it->second->enabled = isEnabled != 0;
    return CUDA_SUCCESS;
  });
}

GPUPOOL_DRIVER_API CUresult cuGraphNodeGetEnabled(CUgraphExec h, CUgraphNode node,
                                                  unsigned int* isEnabled) {
  if (!isEnabled) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  std::lock_guard lock(graphMutex());
  GraphExecObject* exec = asGraphExec(h);
  if (!exec) return CUDA_ERROR_INVALID_VALUE;
  auto it = exec->nodeOf.find(reinterpret_cast<const GraphNodeObject*>(node));
  if (it == exec->nodeOf.end()) return CUDA_ERROR_INVALID_VALUE;
  CUgraphNodeType t = it->second->type;
  if (t != CU_GRAPH_NODE_TYPE_KERNEL && t != CU_GRAPH_NODE_TYPE_MEMSET &&
      t != CU_GRAPH_NODE_TYPE_MEMCPY) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *isEnabled = it->second->enabled ? 1 : 0;
  return CUDA_SUCCESS;
}
