// CUDA graphs on the client: the objects behind CUgraph, CUgraphNode and CUgraphExec, and the
// operations the graph API (graph_api.cc) and stream capture (stream_capture.cc) share.
//
// A graph lives here until it is instantiated; cuGraphInstantiate flattens it (child graphs
// inlined, nodes in a topological order) and uploads it to the server once, which then runs it
// for each cuGraphLaunch from one posted message (server/handlers/graph_handlers.cc); host nodes
// cut it into runs uploaded separately, the host functions running on the client between them.
// Every graph structure is guarded by graphMutex(): graphs are built by one thread at a time in
// practice, and one lock keeps capture (which touches streams, events and graphs together) simple.
#pragma once

#include <cuda.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "driver_state.h"

namespace gpupool::client {

struct GraphObject;
struct GraphAllocation;  // client/graph_memory.h

struct GraphNodeObject {
  Tag tag = Tag::kGraphNode;
  GraphObject* graph = nullptr;
  CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
  std::vector<GraphNodeObject*> dependencies;  // edges into this node, in the order added
  std::vector<GraphNodeObject*> dependents;    // edges out of it

  // Kernel: the function, its shape and its parameters, copied when the node was set (as the
  // driver does), with pointers to each parameter for cuGraphKernelNodeGetParams.
  FunctionObject* function = nullptr;
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned sharedBytes = 0;
  std::vector<uint8_t> params;
  std::vector<void*> paramPointers;
  // cuGraphKernelNodeSetAttribute values by CUlaunchAttributeID (graph_api.cc): COOPERATIVE and
  // CLUSTER_DIMENSION are served (GraphKernel.cooperative, .cluster); the others accepted are
  // hints.
  std::map<int, CUlaunchAttributeValue> kernelAttributes;
  bool cooperative() const {
    auto it = kernelAttributes.find(CU_LAUNCH_ATTRIBUTE_COOPERATIVE);
    return it != kernelAttributes.end() && it->second.cooperative;
  }
  // The node's thread-block cluster when larger than 1x1x1, else null.
  const CUlaunchAttributeValue* cluster() const {
    auto it = kernelAttributes.find(CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
    if (it == kernelAttributes.end()) return nullptr;
    const auto& c = it->second.clusterDim;
    return uint64_t{c.x} * c.y * c.z > 1 ? &it->second : nullptr;
  }

  ContextObject* context = nullptr;    // memset and memcpy nodes: the context they run in
  CUDA_MEMSET_NODE_PARAMS memset{};    // memset
  CUDA_MEMCPY3D copy{};                // memcpy (device to device only)
  EventObject* event = nullptr;        // event record / wait
  CUDA_HOST_NODE_PARAMS host{};        // host: run on the client (host_func_api.h)
  std::unique_ptr<GraphObject> child;  // child graph: the node's own copy
  // Memory alloc and free nodes: the allocation (shared by the exec's copies of the node), and an
  // alloc node's parameters as given, with its own copy of the access descriptors.
  std::shared_ptr<GraphAllocation> memory;
  CUDA_MEM_ALLOC_NODE_PARAMS alloc{};
  std::vector<CUmemAccessDesc> accessDescs;
  // Batch memory operation node: its operations, checked and copied when set (its context is
  // `context`); cuGraphBatchMemOpNodeGetParams hands out this array.
  std::vector<CUstreamBatchMemOpParams> memOps;
  // Conditional node: its handle, kind and bodies (graphs the node owns, handed out by
  // cuGraphAddNode as phGraph_out, which points at bodyHandles).
  CUgraphConditionalHandle conditionHandle = 0;
  CUgraphConditionalNodeType conditionType = CU_GRAPH_COND_TYPE_IF;
  std::vector<std::unique_ptr<GraphObject>> bodies;
  std::vector<CUgraph> bodyHandles;
  // An executable graph's kernel, memset or memcpy node switched off by cuGraphNodeSetEnabled:
  // it runs as an empty node, its edges kept.
  bool enabled = true;
};

struct UserObject;  // client/user_object_api.cc

// Takes `count` more references to `object`.
void retainUserObject(UserObject* object, unsigned count);
// Drops `count` references to `object`; the last one runs its destructor and frees it.
void releaseUserObject(UserObject* object, unsigned count);
// Drops `refs` once the work already queued on every stream of `streams` has run (at once when
// there is none), so a destructor never runs under a launch that still uses what it frees.
void releaseUserObjectsAfter(const std::set<CUstream>& streams,
                             std::map<UserObject*, unsigned> refs);

struct GraphObject {
  GraphObject() = default;
  GraphObject(const GraphObject&) = delete;
  GraphObject& operator=(const GraphObject&) = delete;
  ~GraphObject();  // drops its user object references
  Tag tag = Tag::kGraph;
  // The references the graph holds to user objects (cuGraphRetainUserObject); clones and
  // instantiations take references of their own.
  std::map<UserObject*, unsigned> userRefs;
  std::vector<std::unique_ptr<GraphNodeObject>> nodes;  // in the order they were added
  // A clone's nodes by the original's (cuGraphNodeFindInClone).
  std::map<const GraphNodeObject*, GraphNodeObject*> clonedFrom;
  // The child graph or conditional node that owns this graph (null: the application's own, which
  // only it may destroy).
  GraphNodeObject* owner = nullptr;
  // The conditional handles made for this graph (cuGraphConditionalHandleCreate), with the
  // context each was made in: a conditional node here or in a graph nested in it may use them.
  std::map<CUgraphConditionalHandle, ContextObject*> conditionHandles;
};

// One run of an executable graph's nodes between host nodes (a graph on the server, by its
// handle), or one host node (`fn`, run on the client at that place in the stream).
struct ExecPiece {
  uint64_t remote = 0;
  CUhostFn fn = nullptr;
  void* data = nullptr;
};

// An instantiated graph, in the context it runs in. A launch runs its pieces in order on the
// stream: a graph without host nodes is one piece, so one posted message.
struct GraphExecObject {
  Tag tag = Tag::kGraphExec;
  ContextObject* context = nullptr;
  std::vector<ExecPiece> pieces;
  unsigned long long flags = 0;
  // What was instantiated (a copy, since the graph may change or go after instantiation) and the
  // copy's node for each node of the graph: the per-node exec setters change the copy and upload
  // it again.
  std::unique_ptr<GraphObject> source;
  std::map<const GraphNodeObject*, GraphNodeObject*> nodeOf;
  std::set<CUstream> launchedOn;  // for releasing user objects after the launches' work
};

std::mutex& graphMutex();

// Validating casts (see driver_state.h); call under graphMutex().
GraphObject* asGraph(CUgraph h);
GraphNodeObject* asGraphNode(CUgraphNode h);
GraphExecObject* asGraphExec(CUgraphExec h);

// A new, registered, empty graph (released by destroyGraph).
GraphObject* newGraph();
// Unregisters and frees `graph`, its nodes and their child graphs.
void destroyGraph(GraphObject* graph);

// Adds `node` to `graph` after `deps` (which must be distinct nodes of `graph`), registers it and
// returns it; null with *error set when a dependency is not acceptable.
GraphNodeObject* addNode(GraphObject* graph, std::unique_ptr<GraphNodeObject> node,
                         const CUgraphNode* deps, size_t count, CUresult* error);
// The same, for dependencies already known to be nodes of `graph` (capture).
GraphNodeObject* addNode(GraphObject* graph, std::unique_ptr<GraphNodeObject> node,
                         const std::vector<GraphNodeObject*>& deps);
// Removes `node` and its edges from its graph, and frees it.
void removeNode(GraphNodeObject* node);

// A deep copy of `graph`, registered; `mapping` (when given) receives original -> copy for every
// node of `graph` itself.
std::unique_ptr<GraphObject> cloneGraph(
    const GraphObject& graph, std::map<const GraphNodeObject*, GraphNodeObject*>* mapping);

// Fills a kernel node's function, shape and copied parameters from the driver's parameter
// struct; checks the shape and parameters as cuLaunchKernel does.
CUresult setKernelNode(GraphNodeObject* node, CUfunction f, CUkernel kernel, CUcontext ctx,
                       const unsigned grid[3], const unsigned block[3], unsigned sharedBytes,
                       void** kernelParams, void** extra);
// Fills a kernel node from a launch already checked and packed (capture).
void setCapturedKernel(GraphNodeObject* node, FunctionObject* f, const unsigned grid[3],
                       const unsigned block[3], unsigned sharedBytes, std::vector<uint8_t> params);
// Checks and fills a memset node (the context is the allocation's; `ctx`, when given, must be it).
CUresult setMemsetNode(GraphNodeObject* node, const CUDA_MEMSET_NODE_PARAMS& p, CUcontext ctx);
// Checks and fills a memcpy node: device-to-device copies only (a host end: NOT_SUPPORTED).
CUresult setMemcpyNode(GraphNodeObject* node, const CUDA_MEMCPY3D& p, CUcontext ctx);

// Checks and fills a batch memory operation node: the operations follow cuStreamBatchMemOp_v2's
// rules in the context the parameters name (the current one when null); `flags` must be 0.
CUresult setBatchMemOpNode(GraphNodeObject* node, const CUDA_BATCH_MEM_OP_NODE_PARAMS& p,
                           const char* call);

// Fills `node` (a fresh one) from the generic parameters of cuGraphAddNode and the generic
// setters: kernel, memcpy, memset, child graph (cloned), event record/wait, batch memory operation
// and empty nodes; other kinds are refused (CUDA_ERROR_NOT_SUPPORTED, named under GPU_POOL_LOG=1 as
// `call`).
CUresult nodeFromParams(GraphNodeObject* node, const CUgraphNodeParams& p, const char* call);

// Checks and fills a conditional node of `graph` from cuGraphAddNode's parameters, making its
// bodies (returned through p.phGraph_out).
CUresult setConditionalNode(GraphNodeObject* node, GraphObject* graph,
                            CUDA_CONDITIONAL_NODE_PARAMS& p, const char* call);
// Whether a node of kind `type` may be in a conditional node's body (a graph nested in one).
bool allowedInConditionalBody(CUgraphNodeType type);
// Whether `graph` is a conditional node's body, or nested in one.
bool insideConditionalBody(const GraphObject* graph);

// Creates the executable form of `graph` on the server. Call without graphMutex() held.
CUresult instantiateGraph(GraphObject* graph, unsigned long long flags, GraphExecObject** out);
// Posts the destruction of the server's graphs among `pieces` (after the launches already posted).
CUresult discardPieces(ContextObject* ctx, const std::vector<ExecPiece>& pieces, const char* call);

using NodeMap = std::map<const GraphNodeObject*, GraphNodeObject*>;
// Changes an executable graph: `change` runs under graphMutex() on a copy of its graph, with
// `nodes` mapping every node handle the exec answers for to its node in the copy (it may add
// more); the copy is then uploaded, and only when both succeed does it replace the exec's graph
// (the old one leaves the server after the launches already posted). Launches made before keep
// what they had; the next one runs the change. Call without graphMutex() held.
CUresult updateExecGraph(CUgraphExec h, const char* call,
                         const std::function<CUresult(GraphObject& copy, NodeMap& nodes)>& change);

// Logs (under GPU_POOL_LOG=1) why a graph call fails and returns `code`.
CUresult graphRefusal(CUresult code, const char* call, const char* why);

}  // namespace gpupool::client
