// Executable graphs on the real driver: the nodes graph_handlers.cc checked become one CUgraph
// (cuGraphAdd*Node with the same dependencies), instantiated once, and each launch is one
// cuGraphLaunch, so the GPU sees the graph as a graph: independent branches overlap and the
// launch costs the driver one submission. Batch memory operation nodes are built too, waits
// included; each launch notes the graph's waits with the context's pending ones, which its
// teardown meets. Under the pool's scheduler a graph with a wait is replayed by the handler
// instead: there a graph launch is one admission, holding the device until the graph ends, so a
// wait that another kernel of the tenant is to meet would hold every tenant's kernels forever.
//
// The CUgraph names driver handles (functions, events) that the client may destroy later, which
// would leave the driver a dangling handle; so a launch first checks that every one the graph
// names is still this context's, by the ids the graph was built from.
//
// Conditional nodes are built as the driver's own (cuGraphAddNode, their bodies filled the same
// way), so the GPU evaluates them. A conditional handle belongs to the graph it was made in, and
// the client makes its handles before it instantiates: so each context keeps one CUgraph in which
// every handle is made, builds each graph with conditional nodes in it, instantiates it (the
// executable graph is a copy) and takes the nodes out again. Not yet run on a GPU.
#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "server/backends/cuda/cuda_context.h"

namespace gpupool::server {

class CudaGraph final : public BackendGraph {
 public:
  CudaGraph(CudaContext& owner, CUgraph graph) : owner_(owner), graph_(graph) {}
  ~CudaGraph() override { owner_.graphRelease(graph_, exec_); }
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  Status launch(uint64_t stream) override { return owner_.graphLaunch(*this, stream); }

 private:
  friend class CudaContext;
  CudaContext& owner_;  // outlives the graph (server/backend.h)
  CUgraph graph_;
  CUgraphExec exec_ = nullptr;
  std::vector<uint64_t> functions_, events_;  // ids the nodes name, checked at each launch
  // What memory operation nodes write (address, bytes), checked at each launch too: the handler
  // checks only the memset and copy nodes' ranges.
  std::vector<std::pair<uint64_t, uint64_t>> memOpRanges_;
  std::vector<StreamMemOp> waits_;  // of its memory operation nodes, in node order
};

namespace {

using NodeKind = GraphNodeDescription::Kind;

// One slice of a device-to-device copy node as the driver's 3D copy of depth 1.
CUDA_MEMCPY3D copySlice(const GraphNodeDescription& n, uint64_t z) {
  CUDA_MEMCPY3D copy{};
  copy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  copy.srcDevice = n.src + z * n.srcSlice;
  copy.srcPitch = n.height > 1 ? n.srcPitch : std::max(n.srcPitch, n.width);
  copy.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  copy.dstDevice = n.dst + z * n.dstSlice;
  copy.dstPitch = n.height > 1 ? n.dstPitch : std::max(n.dstPitch, n.width);
  copy.WidthInBytes = n.width;
  copy.Height = n.height;
  copy.Depth = 1;
  return copy;
}

}  // namespace

namespace {

bool hasConditional(std::span<const GraphNodeDescription> nodes) {
  return std::any_of(nodes.begin(), nodes.end(), [](const GraphNodeDescription& n) {
    return n.kind == NodeKind::kConditional;
  });
}

}  // namespace

Status CudaContext::graphConditionalCreate(uint32_t defaultValue, bool assignDefault,
                                           uint64_t* handle) {
  if (driver_->graphConditionalHandleCreate.fn == nullptr || driver_->graphAddNode.fn == nullptr) {
    return Status::error(CUDA_ERROR_NOT_SUPPORTED,
                         "the server's driver has no conditional graph nodes (CUDA 12.3 on)");
  }
  if (Status s = makeCurrent(); !s.ok()) return s;
  if (conditionalHome_ == nullptr) {
    if (Status s = driver_->call(driver_->graphCreate, &conditionalHome_, 0u); !s.ok()) {
      conditionalHome_ = nullptr;
      return s;
    }
  }
  CUgraphConditionalHandle h = 0;
  if (Status s =
          driver_->call(driver_->graphConditionalHandleCreate, &h, conditionalHome_, context_,
                        defaultValue, assignDefault ? unsigned{CU_GRAPH_COND_ASSIGN_DEFAULT} : 0u);
      !s.ok()) {
    return s;
  }
  conditionalHandles_.insert(h);
  *handle = h;
  return Status::success();
}

Status CudaContext::graphBuild(std::span<const GraphNodeDescription> nodes,
                               std::unique_ptr<BackendGraph>* built) {
  built->reset();
  bool memOps = false;
  bool replay = false;
  std::vector<StreamMemOp> waits;
  for (const GraphNodeDescription& n : nodes) {
    if (n.kind != NodeKind::kMemOps) continue;
    memOps = true;
    for (const StreamMemOp& op : n.memOps) {
      if (!op.isWait()) continue;
      if (gated_) replay = true;  // replayed (above)
      waits.push_back(op);
    }
  }
  const bool conditional = hasConditional(nodes);
  if (replay) {
    if (!conditional) return Status::success();
    // A replayed conditional node reads its condition on the host, which a real handle's
    // condition cannot be.
    return Status::error(CUDA_ERROR_NOT_SUPPORTED,
                         "a graph with conditional nodes and stream memory waits is not served "
                         "under the pool's scheduler");
  }
  // A driver without graphs (none since CUDA 10 lacks them) gets the graph replayed too, as does
  // one without memory operation nodes (before CUDA 11.7) a graph that has them.
  if (driver_->graphCreate.fn == nullptr || driver_->graphInstantiateWithFlags.fn == nullptr ||
      driver_->graphLaunch.fn == nullptr ||
      (memOps && driver_->graphAddBatchMemOpNode.fn == nullptr)) {
    if (!conditional) return Status::success();
    return Status::error(CUDA_ERROR_NOT_SUPPORTED,
                         "the server's driver cannot build this graph's conditional nodes");
  }
  if (Status s = makeCurrent(); !s.ok()) return s;
  // A graph with conditional nodes is built in the graph its handles were made in (a handle
  // belongs to a graph), then taken out of it again once instantiated.
  CUgraph cuGraph = nullptr;
  if (conditional) {
    if (conditionalHome_ == nullptr) {
      return Status::error(CUDA_ERROR_INVALID_VALUE,
                           "a conditional node names a handle this context did not make");
    }
    cuGraph = conditionalHome_;
  } else if (Status s = driver_->call(driver_->graphCreate, &cuGraph, 0u); !s.ok()) {
    return s;
  }
  auto graph = std::make_unique<CudaGraph>(*this, conditional ? nullptr : cuGraph);
  graph->waits_ = std::move(waits);
  std::vector<std::vector<CUgraphNode>> made;
  Status s = graphAddNodes(cuGraph, nodes, *graph, &made);
  if (s.ok()) {
    s = driver_->call(driver_->graphInstantiateWithFlags, &graph->exec_, cuGraph, 0ull);
    if (!s.ok()) graph->exec_ = nullptr;
  }
  if (conditional) {
    // Destroying a conditional node destroys its bodies.
    for (const auto& list : made) {
      for (CUgraphNode node : list) (void)driver_->call(driver_->graphDestroyNode, node);
    }
  }
  if (!s.ok()) return s;
  *built = std::move(graph);
  return Status::success();
}

Status CudaContext::graphAddNodes(CUgraph cuGraph, std::span<const GraphNodeDescription> nodes,
                                  CudaGraph& graph, std::vector<std::vector<CUgraphNode>>* made) {
  // The driver nodes each description became (a copy of several slices is several nodes), which
  // its dependents all wait for.
  made->assign(nodes.size(), {});
  std::vector<CUgraphNode> after;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const GraphNodeDescription& n = nodes[i];
    after.clear();
    for (uint32_t d : n.dependencies) {
      after.insert(after.end(), (*made)[d].begin(), (*made)[d].end());
    }
    auto failed = [&](const Status& s) {
      return Status::error(s.code, "graph node " + std::to_string(i) + ": " + s.message);
    };
    CUgraphNode node = nullptr;
    Status s = Status::success();
    switch (n.kind) {
      case NodeKind::kEmpty:
        s = driver_->call(driver_->graphAddEmptyNode, &node, cuGraph, after.data(), after.size());
        break;
      case NodeKind::kKernel: {
        const Function* f = nullptr;
        if (s = findFunction(n.function, &f); !s.ok()) break;
        std::vector<void*> arguments;
        if (s = kernelArguments(*f, n.params, &arguments); !s.ok()) break;
        CUDA_KERNEL_NODE_PARAMS params{};
        params.func = f->handle;
        params.gridDimX = n.shape.grid[0];
        params.gridDimY = n.shape.grid[1];
        params.gridDimZ = n.shape.grid[2];
        params.blockDimX = n.shape.block[0];
        params.blockDimY = n.shape.block[1];
        params.blockDimZ = n.shape.block[2];
        params.sharedMemBytes = n.shape.sharedBytes;
        params.kernelParams = arguments.empty() ? nullptr : arguments.data();
        // The driver copies the parameters into the node.
        s = driver_->call(driver_->graphAddKernelNode, &node, cuGraph, after.data(), after.size(),
                          static_cast<const CUDA_KERNEL_NODE_PARAMS*>(&params));
        if (s.ok() && n.shape.cooperative) {
          CUkernelNodeAttrValue value{};
          value.cooperative = 1;
          s = driver_->call(driver_->graphKernelNodeSetAttribute, node,
                            CU_KERNEL_NODE_ATTRIBUTE_COOPERATIVE,
                            static_cast<const CUkernelNodeAttrValue*>(&value));
        }
        if (s.ok() && n.shape.clustered()) {
          CUkernelNodeAttrValue value{};
          value.clusterDim.x = n.shape.cluster[0];
          value.clusterDim.y = n.shape.cluster[1];
          value.clusterDim.z = n.shape.cluster[2];
          s = driver_->call(driver_->graphKernelNodeSetAttribute, node,
                            CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
                            static_cast<const CUkernelNodeAttrValue*>(&value));
        }
        graph.functions_.push_back(n.function);
        break;
      }
      case NodeKind::kMemset: {
        CUDA_MEMSET_NODE_PARAMS params{};
        params.dst = n.dst;
        params.pitch = n.height > 1 ? n.dstPitch : n.width * n.elementSize;
        params.value = n.value;
        params.elementSize = n.elementSize;
        params.width = n.width;
        params.height = n.height;
        s = driver_->call(driver_->graphAddMemsetNode, &node, cuGraph, after.data(), after.size(),
                          static_cast<const CUDA_MEMSET_NODE_PARAMS*>(&params), context_);
        break;
      }
      case NodeKind::kCopy:
        // Slices are independent of each other: each a node after the same dependencies.
        for (uint64_t z = 0; z < n.depth && s.ok(); ++z) {
          CUDA_MEMCPY3D copy = copySlice(n, z);
          s = driver_->call(driver_->graphAddMemcpyNode, &node, cuGraph, after.data(), after.size(),
                            static_cast<const CUDA_MEMCPY3D*>(&copy), context_);
          if (s.ok()) (*made)[i].push_back(node);
        }
        node = nullptr;
        if (s.ok() && n.depth == 0) {
          s = driver_->call(driver_->graphAddEmptyNode, &node, cuGraph, after.data(), after.size());
        }
        break;
      case NodeKind::kEventRecord:
      case NodeKind::kEventWait: {
        CUevent event = nullptr;
        if (s = findEvent(n.event, &event); !s.ok()) break;
        s = n.kind == NodeKind::kEventRecord
                ? driver_->call(driver_->graphAddEventRecordNode, &node, cuGraph, after.data(),
                                after.size(), event)
                : driver_->call(driver_->graphAddEventWaitNode, &node, cuGraph, after.data(),
                                after.size(), event);
        graph.events_.push_back(n.event);
        break;
      }
      case NodeKind::kMemOps: {
        // The driver copies the array.
        std::vector<CUstreamBatchMemOpParams> ops;
        if (s = driverMemOps(n.memOps, &ops); !s.ok()) break;
        CUDA_BATCH_MEM_OP_NODE_PARAMS params{};
        params.ctx = context_;
        params.count = static_cast<unsigned>(ops.size());
        params.paramArray = ops.data();
        s = driver_->call(driver_->graphAddBatchMemOpNode, &node, cuGraph, after.data(),
                          after.size(), static_cast<const CUDA_BATCH_MEM_OP_NODE_PARAMS*>(&params));
        for (const StreamMemOp& op : n.memOps) {
          if (op.kind != CU_STREAM_MEM_OP_BARRIER) {
            graph.memOpRanges_.emplace_back(op.address, op.wide() ? 8 : 4);
          }
        }
        break;
      }
      case NodeKind::kConditional: {
        // Only this context's handles: another context's (another tenant's) are not the
        // client's to name.
        if (!conditionalHandles_.count(n.conditionHandle)) {
          s = Status::error(CUDA_ERROR_INVALID_VALUE,
                            "a conditional node names a handle this context did not make");
          break;
        }
        CUgraphNodeParams params{};
        params.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
        params.conditional.handle = n.conditionHandle;
        params.conditional.type = static_cast<CUgraphConditionalNodeType>(n.conditionType);
        params.conditional.size = static_cast<unsigned>(n.bodies.size());
        params.conditional.ctx = context_;
        s = driver_->call(driver_->graphAddNode, &node, cuGraph, after.data(), after.size(),
                          &params);
        // The bodies are the node's: they go with it, also when filling one fails.
        for (size_t b = 0; s.ok() && b < n.bodies.size(); ++b) {
          std::vector<std::vector<CUgraphNode>> bodyMade;
          s = graphAddNodes(params.conditional.phGraph_out[b], n.bodies[b], graph, &bodyMade);
          if (!s.ok()) s = Status::error(s.code, "body " + std::to_string(b) + ": " + s.message);
        }
        break;
      }
    }
    if (node != nullptr) (*made)[i].push_back(node);
    if (!s.ok()) return failed(s);
  }
  return Status::success();
}

Status CudaContext::graphLaunch(const CudaGraph& graph, uint64_t stream) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  for (uint64_t id : graph.functions_) {
    const Function* f = nullptr;
    if (Status s = findFunction(id, &f); !s.ok()) {
      return Status::error(
          CUDA_ERROR_INVALID_HANDLE,
          "a kernel of this graph is gone (its module was unloaded): " + s.message);
    }
  }
  for (uint64_t id : graph.events_) {
    CUevent event = nullptr;
    if (Status s = findEvent(id, &event); !s.ok()) {
      return Status::error(CUDA_ERROR_INVALID_HANDLE,
                           "an event of this graph was destroyed: " + s.message);
    }
  }
  for (auto [address, bytes] : graph.memOpRanges_) {
    if (Status s = checkRange("graph memory operation", address, bytes); !s.ok()) return s;
  }
  CUstream cuStream = nullptr;
  if (Status s = findStream(stream, &cuStream); !s.ok()) return s;
  auto start = [&] { return driver_->call(driver_->graphLaunch, graph.exec_, cuStream); };
  // Under the pool's scheduler the whole graph is one admission, metered as one kernel.
  Status s = gated_ ? gated_->launch(cuStream, start) : start();
  if (s.ok()) notePendingWaits(cuStream, graph.waits_);
  return s;
}

void CudaContext::graphRelease(CUgraph graph, CUgraphExec exec) {
  // Errors have no one to go to: the graph is forgotten either way.
  (void)makeCurrent();
  if (exec != nullptr) (void)driver_->call(driver_->graphExecDestroy, exec);
  if (graph != nullptr) (void)driver_->call(driver_->graphDestroy, graph);
}

}  // namespace gpupool::server
