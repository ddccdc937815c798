// CUDA graphs: an executable graph arrives once (graphCreate, answered with its handle) and each
// cuGraphLaunch is then one posted graphLaunch naming it, whatever the graph's size. A launch
// replays the nodes, in the topological order the client sent, on the launch's stream through the
// backend's own stream operations (launches, memsets, copies, event records and waits, batches of
// stream memory operations), so it runs on every backend. (Serial replay is one valid
// schedule of the graph; building a real CUgraph on the cuda backend, which would let independent
// branches overlap on the GPU, is left for later: docs/architecture.md, "CUDA graphs".)
//
// A graph belongs to the session and the context it was created in: it is freed with the session,
// and every handle and index in it is checked when it arrives and again when it runs.
#include <capnp/message.h>

#include <memory>
#include <string>
#include <vector>

#include "server/handlers/request_table.h"

namespace gpupool::server {

// The stored copy of a graphCreate's node list.
struct ExecutableGraph {
  uint64_t context = 0;
  capnp::MallocMessageBuilder message;
  wire::Request::GraphCreate::Reader nodes() {
    return message.getRoot<wire::Request::GraphCreate>().asReader();
  }
};

namespace {

using wire::Request;

// Executable graphs one session may hold at once: a bound on what a client can make us keep.
constexpr size_t kMaxGraphsPerSession = 4096;
constexpr uint32_t kMaxNodesPerGraph = 1u << 20;

Status checkNodes(Request::GraphCreate::Reader g) {
  auto nodes = g.getNodes();
  if (nodes.size() > kMaxNodesPerGraph) {
    return Status::error(CUDA_ERROR_INVALID_VALUE, "graph has too many nodes");
  }
  for (uint32_t i = 0; i < nodes.size(); ++i) {
    for (uint32_t d : nodes[i].getDependencies()) {
      if (d >= i) {
        return Status::error(
            CUDA_ERROR_INVALID_VALUE,
            "graph node " + std::to_string(i) + " depends on a node that does not come before it");
      }
    }
    auto n = nodes[i];
    if (n.isMemOps()) {
      std::vector<StreamMemOp> ops;
      if (Status st = readStreamMemOps(n.getMemOps(), &ops); !st.ok()) {
        return Status::error(st.code, "graph node " + std::to_string(i) + ": " + st.message);
      }
    }
    if (n.isMemset()) {
      unsigned e = n.getMemset().getElementSize();
      if (e != 1 && e != 2 && e != 4) {
        return Status::error(CUDA_ERROR_INVALID_VALUE, "graph memset element size must be 1, 2, 4");
      }
    }
  }
  return Status::success();
}

Status replayCopy(BackendContext& context, Request::GraphCopy::Reader c, uint64_t stream) {
  for (uint64_t z = 0; z < c.getDepth(); ++z) {
    uint64_t src = c.getSrc() + z * c.getSrcSlice();
    uint64_t dst = c.getDst() + z * c.getDstSlice();
    if (Status st = checkDeviceRange(context, src, c.getWidthBytes(), "graph copy source",
                                     c.getSrcPitch(), c.getHeight());
        !st.ok())
      return st;
    if (Status st = checkDeviceRange(context, dst, c.getWidthBytes(), "graph copy destination",
                                     c.getDstPitch(), c.getHeight());
        !st.ok())
      return st;
    if (c.getHeight() == 1) {
      if (Status st = context.copyDeviceToDevice(dst, src, c.getWidthBytes(), stream, true);
          !st.ok())
        return st;
      continue;
    }
    Copy2D copy;
    copy.srcDevice = src;
    copy.dstDevice = dst;
    copy.srcPitch = c.getSrcPitch();
    copy.dstPitch = c.getDstPitch();
    copy.widthBytes = c.getWidthBytes();
    copy.height = c.getHeight();
    if (Status st = context.copy2D(copy, stream, true); !st.ok()) return st;
  }
  return Status::success();
}

Status replayNode(BackendContext& context, Request::GraphNode::Reader n, uint64_t stream) {
  switch (n.which()) {
    case Request::GraphNode::EMPTY:
      return Status::success();
    case Request::GraphNode::KERNEL: {
      auto k = n.getKernel();
      LaunchShape shape;
      shape.grid = {k.getGrid().getX(), k.getGrid().getY(), k.getGrid().getZ()};
      shape.block = {k.getBlock().getX(), k.getBlock().getY(), k.getBlock().getZ()};
      shape.sharedBytes = k.getSharedBytes();
      shape.cooperative = k.getCooperative();
      auto params = k.getParams();
      return context.launch(k.getFunction(), shape, stream,
                            std::span<const uint8_t>(params.begin(), params.size()));
    }
    case Request::GraphNode::MEMSET: {
      auto m = n.getMemset();
      uint64_t rowBytes = m.getWidth() * m.getElementSize();
      if (Status st = checkDeviceRange(context, m.getDst(), rowBytes, "graph memset", m.getPitch(),
                                       m.getHeight());
          !st.ok())
        return st;
      return context.memset(m.getDst(), m.getValue(), m.getElementSize(), m.getWidth(),
                            m.getHeight(), m.getPitch(), stream, true);
    }
    case Request::GraphNode::COPY:
      return replayCopy(context, n.getCopy(), stream);
    case Request::GraphNode::EVENT_RECORD:
      return context.eventRecord(n.getEventRecord(), stream);
    case Request::GraphNode::EVENT_WAIT:
      return context.streamWaitEvent(stream, n.getEventWait());
    case Request::GraphNode::MEM_OPS: {
      // A batch memory operation node is the stream's batch, queued like cuStreamBatchMemOp's.
      std::vector<StreamMemOp> ops;
      if (Status st = readStreamMemOps(n.getMemOps(), &ops); !st.ok()) return st;
      return context.streamMemOps(stream, ops);
    }
  }
  return Status::error(CUDA_ERROR_INVALID_VALUE, "graph node of an unknown kind");
}

Status graphCreate(RequestContext& request, Request::Reader r) {
  auto g = r.getGraphCreate();
  return request.withContext(g.getContext(), [&](BackendContext&) {
    if (Status st = checkNodes(g); !st.ok()) return st;
    SessionState& session = request.session;
    if (session.graphs.size() >= kMaxGraphsPerSession) {
      return Status::error(CUDA_ERROR_OUT_OF_MEMORY, "too many executable graphs in this session");
    }
    auto graph = std::make_shared<ExecutableGraph>();
    graph->context = g.getContext();
    graph->message.setRoot(g);
    uint64_t handle = session.nextGraph++;
    session.graphs.emplace(handle, std::move(graph));
    request.reply.setHandle(handle);
    return Status::success();
  });
}

// The session's graph `id`, created in context `contextId`; null when there is none.
ExecutableGraph* findGraph(RequestContext& request, uint64_t contextId, uint64_t id) {
  auto it = request.session.graphs.find(id);
  if (it == request.session.graphs.end() || it->second->context != contextId) return nullptr;
  return it->second.get();
}

Status graphLaunch(RequestContext& request, Request::Reader r) {
  auto l = r.getGraphLaunch();
  return request.withContext(l.getContext(), [&](BackendContext& context) {
    ExecutableGraph* graph = findGraph(request, l.getContext(), l.getGraph());
    if (!graph) return Status::error(CUDA_ERROR_INVALID_HANDLE, "no such executable graph");
    uint32_t index = 0;
    for (auto node : graph->nodes().getNodes()) {
      if (Status st = replayNode(context, node, l.getStream()); !st.ok()) {
        return Status::error(st.code, "graph node " + std::to_string(index) + ": " + st.message);
      }
      ++index;
    }
    return Status::success();
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
};

}  // namespace

std::span<const RequestHandlerRow> graphHandlers() { return kRows; }

}  // namespace gpupool::server
