// CUDA graphs: an executable graph arrives once (graphCreate, answered with its handle) and each
// cuGraphLaunch is then one posted graphLaunch naming it, whatever the graph's size. At creation
// the backend may build it as a graph of the device's own (a real CUgraphExec on the cuda backend,
// so independent branches overlap on the GPU); a launch then queues that, once its memory ranges
// are checked. Otherwise (the emu, or a node kind the backend does not build) a launch replays the
// nodes, in the topological order the client sent, on the launch's stream through the backend's
// own stream operations: one valid schedule of the graph, on every backend.
//
// A conditional node (if, while, switch) carries its bodies as graphs of their own. Replayed, it is
// a step queued at its place in the stream (BackendContext::streamConditionalStep): when the
// stream reaches it, the kernels before it have set its condition, and the step queues the body
// it chose on a helper stream of its nesting level and waits for it (a while node then looks
// again). The cuda backend builds conditional nodes into its CUgraph, where the GPU decides.
//
// A graph belongs to the session and the context it was created in: it is freed with the session
// or the context, and every handle and address in it is checked when it arrives and again when it
// runs.
#include <capnp/message.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/graph_conditional.h"
#include "server/handlers/request_table.h"

namespace gpupool::server {

// An executable graph: its nodes, and the backend's build of them (null: replayed).
struct ExecutableGraph {
  uint64_t context = 0;
  std::vector<GraphNodeDescription> nodes;
  std::unique_ptr<BackendGraph> built;
  std::vector<uint64_t> conditionHandles;  // every conditional node's, once each
};

namespace {

using wire::Request;
using NodeKind = GraphNodeDescription::Kind;

// Executable graphs one session may hold at once: a bound on what a client can make us keep.
constexpr size_t kMaxGraphsPerSession = 4096;
constexpr uint32_t kMaxNodesPerGraph = 1u << 20;

// `st` said of node `index` of a graph.
Status atNode(uint32_t index, const Status& st) {
  return Status::error(st.code, "graph node " + std::to_string(index) + ": " + st.message);
}

// What a graph's description has used of its limits so far: nodes and bodies at every level.
struct DescribeBudget {
  uint64_t items = 0;
  std::vector<uint64_t>* handles = nullptr;
};

Status describeNodes(capnp::List<Request::GraphNode>::Reader list, unsigned depth,
                     DescribeBudget& budget, std::vector<GraphNodeDescription>* nodes);

Status describeConditional(Request::GraphConditional::Reader c, unsigned depth,
                           DescribeBudget& budget, GraphNodeDescription* node) {
  node->kind = NodeKind::kConditional;
  node->conditionHandle = c.getHandle();
  node->conditionType = c.getType();
  auto bodies = c.getBodies();
  if (const char* why = conditionalNodeRefusal(node->conditionType, bodies.size())) {
    return Status::error(CUDA_ERROR_INVALID_VALUE, why);
  }
  if (depth + 1 >= BackendContext::kMaxConditionalDepth) {
    return Status::error(CUDA_ERROR_INVALID_VALUE,
                         "conditional nodes nested more than " +
                             std::to_string(BackendContext::kMaxConditionalDepth - 1) + " deep");
  }
  budget.items += bodies.size();
  if (budget.items > kMaxNodesPerGraph) {
    return Status::error(CUDA_ERROR_INVALID_VALUE, "graph has too many nodes");
  }
  if (std::find(budget.handles->begin(), budget.handles->end(), node->conditionHandle) ==
      budget.handles->end()) {
    budget.handles->push_back(node->conditionHandle);
  }
  node->bodies.resize(bodies.size());
  for (uint32_t b = 0; b < bodies.size(); ++b) {
    if (Status st = describeNodes(bodies[b].getNodes(), depth + 1, budget, &node->bodies[b]);
        !st.ok()) {
      return Status::error(st.code, "body " + std::to_string(b) + ": " + st.message);
    }
  }
  return Status::success();
}

Status describeNode(Request::GraphNode::Reader n, uint32_t index, unsigned depth,
                    DescribeBudget& budget, GraphNodeDescription* node) {
  for (uint32_t d : n.getDependencies()) {
    if (d >= index) {
      return Status::error(CUDA_ERROR_INVALID_VALUE,
                           "depends on a node that does not come before it");
    }
    node->dependencies.push_back(d);
  }
  switch (n.which()) {
    case Request::GraphNode::EMPTY:
      node->kind = NodeKind::kEmpty;
      return Status::success();
    case Request::GraphNode::KERNEL: {
      auto k = n.getKernel();
      node->kind = NodeKind::kKernel;
      node->function = k.getFunction();
      node->shape.grid = {k.getGrid().getX(), k.getGrid().getY(), k.getGrid().getZ()};
      node->shape.block = {k.getBlock().getX(), k.getBlock().getY(), k.getBlock().getZ()};
      node->shape.sharedBytes = k.getSharedBytes();
      node->shape.cooperative = k.getCooperative();
      if (k.hasCluster()) {
        // 0 (unset) is 1, as the driver takes a cluster dimension.
        auto c = k.getCluster();
        node->shape.cluster = {std::max(c.getX(), 1u), std::max(c.getY(), 1u),
                               std::max(c.getZ(), 1u)};
      }
      node->params.assign(k.getParams().begin(), k.getParams().end());
      return Status::success();
    }
    case Request::GraphNode::MEMSET: {
      auto m = n.getMemset();
      node->kind = NodeKind::kMemset;
      node->elementSize = m.getElementSize();
      if (node->elementSize != 1 && node->elementSize != 2 && node->elementSize != 4) {
        return Status::error(CUDA_ERROR_INVALID_VALUE, "memset element size must be 1, 2, 4");
      }
      if (m.getWidth() > UINT64_MAX / node->elementSize) {
        return Status::error(CUDA_ERROR_INVALID_VALUE, "memset row is too wide");
      }
      node->dst = m.getDst();
      node->value = m.getValue();
      node->width = m.getWidth();
      node->height = m.getHeight();
      node->dstPitch = m.getPitch();
      return Status::success();
    }
    case Request::GraphNode::COPY: {
      auto c = n.getCopy();
      node->kind = NodeKind::kCopy;
      node->src = c.getSrc();
      node->srcPitch = c.getSrcPitch();
      node->srcSlice = c.getSrcSlice();
      node->dst = c.getDst();
      node->dstPitch = c.getDstPitch();
      node->dstSlice = c.getDstSlice();
      node->width = c.getWidthBytes();
      node->height = c.getHeight();
      node->depth = c.getDepth();
      return Status::success();
    }
    case Request::GraphNode::EVENT_RECORD:
      node->kind = NodeKind::kEventRecord;
      node->event = n.getEventRecord();
      return Status::success();
    case Request::GraphNode::EVENT_WAIT:
      node->kind = NodeKind::kEventWait;
      node->event = n.getEventWait();
      return Status::success();
    case Request::GraphNode::MEM_OPS:
      node->kind = NodeKind::kMemOps;
      return readStreamMemOps(n.getMemOps(), &node->memOps);
    case Request::GraphNode::CONDITIONAL:
      return describeConditional(n.getConditional(), depth, budget, node);
  }
  return Status::error(CUDA_ERROR_INVALID_VALUE, "a node of an unknown kind");
}

Status describeNodes(capnp::List<Request::GraphNode>::Reader list, unsigned depth,
                     DescribeBudget& budget, std::vector<GraphNodeDescription>* nodes) {
  budget.items += list.size();
  if (budget.items > kMaxNodesPerGraph) {
    return Status::error(CUDA_ERROR_INVALID_VALUE, "graph has too many nodes");
  }
  nodes->resize(list.size());
  for (uint32_t i = 0; i < list.size(); ++i) {
    if (Status st = describeNode(list[i], i, depth, budget, &(*nodes)[i]); !st.ok())
      return atNode(i, st);
  }
  return Status::success();
}

// The device ranges a memset or copy node touches lie in the context's memory (now: memory may
// have been freed since the graph was made).
Status checkNodeRanges(BackendContext& context, const GraphNodeDescription& n) {
  if (n.kind == NodeKind::kMemset) {
    return checkDeviceRange(context, n.dst, n.width * n.elementSize, "graph memset", n.dstPitch,
                            n.height);
  }
  if (n.kind != NodeKind::kCopy) return Status::success();
  for (uint64_t z = 0; z < n.depth; ++z) {
    if (Status st = checkDeviceRange(context, n.src + z * n.srcSlice, n.width, "graph copy source",
                                     n.srcPitch, n.height);
        !st.ok())
      return st;
    if (Status st = checkDeviceRange(context, n.dst + z * n.dstSlice, n.width,
                                     "graph copy destination", n.dstPitch, n.height);
        !st.ok())
      return st;
  }
  return Status::success();
}

Status replayCopy(BackendContext& context, const GraphNodeDescription& c, uint64_t stream) {
  for (uint64_t z = 0; z < c.depth; ++z) {
    uint64_t src = c.src + z * c.srcSlice;
    uint64_t dst = c.dst + z * c.dstSlice;
    if (c.height == 1) {
      if (Status st = context.copyDeviceToDevice(dst, src, c.width, stream, true); !st.ok())
        return st;
      continue;
    }
    Copy2D copy;
    copy.srcDevice = src;
    copy.dstDevice = dst;
    copy.srcPitch = c.srcPitch;
    copy.dstPitch = c.dstPitch;
    copy.widthBytes = c.width;
    copy.height = c.height;
    if (Status st = context.copy2D(copy, stream, true); !st.ok()) return st;
  }
  return Status::success();
}

// Every node's ranges, bodies included.
Status checkGraphRanges(BackendContext& context, const std::vector<GraphNodeDescription>& nodes) {
  for (uint32_t i = 0; i < nodes.size(); ++i) {
    if (Status st = checkNodeRanges(context, nodes[i]); !st.ok()) return atNode(i, st);
    for (const auto& body : nodes[i].bodies) {
      if (Status st = checkGraphRanges(context, body); !st.ok()) return atNode(i, st);
    }
  }
  return Status::success();
}

Status replayNodes(BackendContext& context, const std::shared_ptr<const ExecutableGraph>& graph,
                   const std::vector<GraphNodeDescription>& nodes, uint64_t stream, unsigned depth);

// The body a conditional node runs for `value` (null: none), and whether it looks again after.
const std::vector<GraphNodeDescription>* chosenBody(const GraphNodeDescription& n, uint32_t value,
                                                    bool* again) {
  *again = false;
  switch (n.conditionType) {
    case CU_GRAPH_COND_TYPE_IF:
      if (value) return &n.bodies[0];
      return n.bodies.size() > 1 ? &n.bodies[1] : nullptr;
    case CU_GRAPH_COND_TYPE_WHILE:
      *again = value != 0;
      return value ? &n.bodies[0] : nullptr;
    case CU_GRAPH_COND_TYPE_SWITCH:
      return value < n.bodies.size() ? &n.bodies[value] : nullptr;
    default:
      return nullptr;
  }
}

// Queues conditional node `n` at its place on `stream`: a step that decides when the stream gets
// there. `graph` keeps `n` alive until then, whatever the client destroys meanwhile.
Status replayConditional(BackendContext& context,
                         const std::shared_ptr<const ExecutableGraph>& graph,
                         const GraphNodeDescription& n, uint64_t stream, unsigned depth) {
  return context.streamConditionalStep(
      stream, depth, [&context, graph, &n, depth](uint64_t helper, bool* again) {
        uint32_t value = 0;
        if (Status st = context.graphConditionalValue(n.conditionHandle, &value); !st.ok()) {
          return st;
        }
        const std::vector<GraphNodeDescription>* body = chosenBody(n, value, again);
        return body ? replayNodes(context, graph, *body, helper, depth + 1) : Status::success();
      });
}

Status replayNode(BackendContext& context, const std::shared_ptr<const ExecutableGraph>& graph,
                  const GraphNodeDescription& n, uint64_t stream, unsigned depth) {
  if (Status st = checkNodeRanges(context, n); !st.ok()) return st;
  switch (n.kind) {
    case NodeKind::kEmpty:
      return Status::success();
    case NodeKind::kKernel:
      return context.launch(n.function, n.shape, stream, n.params);
    case NodeKind::kMemset:
      return context.memset(n.dst, n.value, n.elementSize, n.width, n.height, n.dstPitch, stream,
                            true);
    case NodeKind::kCopy:
      return replayCopy(context, n, stream);
    case NodeKind::kEventRecord:
      return context.eventRecord(n.event, stream);
    case NodeKind::kEventWait:
      return context.streamWaitEvent(stream, n.event);
    case NodeKind::kMemOps:
      // A batch memory operation node is the stream's batch, queued like cuStreamBatchMemOp's.
      return context.streamMemOps(stream, n.memOps);
    case NodeKind::kConditional:
      return replayConditional(context, graph, n, stream, depth);
  }
  return Status::error(CUDA_ERROR_INVALID_VALUE, "graph node of an unknown kind");
}

Status replayNodes(BackendContext& context, const std::shared_ptr<const ExecutableGraph>& graph,
                   const std::vector<GraphNodeDescription>& nodes, uint64_t stream,
                   unsigned depth) {
  for (uint32_t i = 0; i < nodes.size(); ++i) {
    if (Status st = replayNode(context, graph, nodes[i], stream, depth); !st.ok())
      return atNode(i, st);
  }
  return Status::success();
}

Status graphCreate(RequestContext& request, Request::Reader r) {
  auto g = r.getGraphCreate();
  return request.withContext(g.getContext(), [&](BackendContext& context) {
    SessionState& session = request.session;
    if (session.graphs.size() >= kMaxGraphsPerSession) {
      return Status::error(CUDA_ERROR_OUT_OF_MEMORY, "too many executable graphs in this session");
    }
    auto graph = std::make_shared<ExecutableGraph>();
    graph->context = g.getContext();
    DescribeBudget budget;
    budget.handles = &graph->conditionHandles;
    if (Status st = describeNodes(g.getNodes(), 0, budget, &graph->nodes); !st.ok()) return st;
    if (Status st = context.graphBuild(graph->nodes, &graph->built); !st.ok()) return st;
    if (!graph->built) {
      // Replayed: a handle this context never made is refused now, not at the first launch.
      for (uint64_t handle : graph->conditionHandles) {
        uint32_t value = 0;
        if (Status st = context.graphConditionalValue(handle, &value); !st.ok()) return st;
      }
    }
    uint64_t handle = session.nextGraph++;
    session.graphs.emplace(handle, std::move(graph));
    request.reply.setHandle(handle);
    return Status::success();
  });
}

// The session's graph `id`, created in context `contextId`; null when there is none.
std::shared_ptr<ExecutableGraph> findGraph(RequestContext& request, uint64_t contextId,
                                           uint64_t id) {
  auto it = request.session.graphs.find(id);
  if (it == request.session.graphs.end() || it->second->context != contextId) return nullptr;
  return it->second;
}

Status graphLaunch(RequestContext& request, Request::Reader r) {
  auto l = r.getGraphLaunch();
  return request.withContext(l.getContext(), [&](BackendContext& context) {
    std::shared_ptr<const ExecutableGraph> graph = findGraph(request, l.getContext(), l.getGraph());
    if (!graph) return Status::error(CUDA_ERROR_INVALID_HANDLE, "no such executable graph");
    if (graph->built) {
      // Nothing is queued unless every node's memory is still this context's.
      if (Status st = checkGraphRanges(context, graph->nodes); !st.ok()) return st;
      return graph->built->launch(l.getStream());
    }
    if (!graph->conditionHandles.empty()) {
      // Bodies are queued when the stream reaches them, where a bad range can only break the
      // context: so every range is checked now too.
      if (Status st = checkGraphRanges(context, graph->nodes); !st.ok()) return st;
      // Defaults apply at the start of each launch, in stream order.
      Status st =
          context.streamConditionalStep(l.getStream(), 0, [&context, graph](uint64_t, bool* again) {
            *again = false;
            return context.graphConditionalAssignDefaults(graph->conditionHandles);
          });
      if (!st.ok()) return st;
    }
    return replayNodes(context, graph, graph->nodes, l.getStream(), 0);
  });
}

Status graphConditionalHandle(RequestContext& request, Request::Reader r) {
  auto c = r.getGraphConditionalHandle();
  return request.withContext(c.getContext(), [&](BackendContext& context) {
    uint64_t handle = 0;
    Status st = context.graphConditionalCreate(c.getDefaultValue(), c.getAssignDefault(), &handle);
    if (st.ok()) request.reply.setHandle(handle);
    return st;
  });
}

Status graphDestroy(RequestContext& request, Request::Reader r) {
  auto d = r.getGraphDestroy();
  return request.withContext(d.getContext(), [&](BackendContext&) {
    if (!findGraph(request, d.getContext(), d.getGraph())) {
      return Status::error(CUDA_ERROR_INVALID_HANDLE, "no such executable graph");
    }
    request.session.graphs.erase(d.getGraph());
    return Status::success();
  });
}

constexpr RequestHandlerRow kRows[] = {
    {Request::GRAPH_CREATE, graphCreate},
    {Request::GRAPH_LAUNCH, graphLaunch},
    {Request::GRAPH_DESTROY, graphDestroy},
    {Request::GRAPH_CONDITIONAL_HANDLE, graphConditionalHandle},
};

}  // namespace

void forgetContextGraphs(SessionState& session, uint64_t context) {
  std::erase_if(session.graphs,
                [&](const auto& entry) { return entry.second->context == context; });
}

std::span<const RequestHandlerRow> graphHandlers() { return kRows; }

}  // namespace gpupool::server
