// Stream capture: capture sequences, the hooks that turn a capturing stream's calls into graph
// nodes, and the capture entry points (see stream_capture.h). Everything here runs on the client;
// the graph a capture ends with is instantiated and launched like any other (graph_model.cc).
#include "stream_capture.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "client_log.h"
#include "driver_export.h"
#include "graph_memory.h"
#include "graph_model.h"

using namespace gpupool::client;

namespace gpupool::client {
namespace {

thread_local bool inCaptureScope = false;
// The calling thread's capture interaction mode (cuThreadExchangeStreamCaptureMode).
thread_local CUstreamCaptureMode threadMode = CU_STREAM_CAPTURE_MODE_GLOBAL;

struct CaptureSequence {
  uint64_t id = 0;
  GraphObject* graph = nullptr;  // owned until cuStreamEndCapture hands it over
  bool ownsGraph = true;         // false: the caller's graph (cuStreamBeginCaptureToGraph)
  StreamObject* origin = nullptr;
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
  std::thread::id thread;
  bool invalidated = false;
  std::vector<StreamObject*> streams;  // the origin and every stream that joined
};

// Live capture sequences by id; under graphMutex().
std::map<uint64_t, std::unique_ptr<CaptureSequence>>& captures() {
  static auto* live = new std::map<uint64_t, std::unique_ptr<CaptureSequence>>();
  return *live;
}
uint64_t nextCaptureId = 1;
// How many captures are live (captures().size(), stored under graphMutex at each change), so that
// calls on streams while nothing captures, the usual case, skip the lock. A capture that begins on
// another thread while such a call reads 0 begins after that call, as it could under the lock.
std::atomic<size_t> liveCaptures{0};
bool nothingCaptures() { return liveCaptures.load(std::memory_order_acquire) == 0; }

CaptureSequence* findSequence(uint64_t id) {
  if (!id) return nullptr;
  auto it = captures().find(id);
  return it == captures().end() ? nullptr : it->second.get();
}

// The sequence stream `h` captures into (and the stream), or null; under graphMutex().
CaptureSequence* capturing(CUstream h, StreamObject** s) {
  *s = asStream(h);
  return *s ? findSequence((*s)->captureId) : nullptr;
}

// capturing() for a call that a capture takes as a node: takes graphMutex() into `lock` and keeps
// it while the answer is a sequence; null without touching the lock when nothing captures.
CaptureSequence* lockCapturing(CUstream h, StreamObject** s, std::unique_lock<std::mutex>& lock) {
  if (nothingCaptures()) return nullptr;
  lock = std::unique_lock(graphMutex());
  return capturing(h, s);
}

void setDeps(StreamObject* s, std::vector<GraphNodeObject*> deps) {
  s->captureDeps = std::move(deps);
  s->captureEdgeData.assign(s->captureDeps.size(), CUgraphEdgeData{});
}

// Adds `node` after the stream's current dependencies, which it then replaces.
bool addCaptured(StreamObject* s, CaptureSequence* c, std::unique_ptr<GraphNodeObject> node,
                 CUresult* result) {
  if (c->invalidated) {
    *result = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    return true;
  }
  GraphNodeObject* n = addNode(c->graph, std::move(node), s->captureDeps);
  setDeps(s, {n});
  *result = CUDA_SUCCESS;
  return true;
}

// Fails a call the capture cannot take, invalidating the capture, as the driver does.
bool refuseInCapture(CaptureSequence* c, CUresult code, const char* what, const char* why,
                     CUresult* result) {
  c->invalidated = true;
  *result = graphRefusal(code, what, why);
  return true;
}

void endSequence(CaptureSequence* c) {
  for (StreamObject* s : c->streams) {
    if (asStream(reinterpret_cast<CUstream>(s)) && s->captureId == c->id) {
      s->captureId = 0;
      setDeps(s, {});
    }
  }
  captures().erase(c->id);
  liveCaptures.store(captures().size(), std::memory_order_release);
}

// Whether every stream that joined the capture was joined back into its origin: each one's last
// work is the origin's current work or something before it.
bool allJoined(const CaptureSequence& c) {
  std::set<const GraphNodeObject*> before;
  std::vector<const GraphNodeObject*> todo(c.origin->captureDeps.begin(),
                                           c.origin->captureDeps.end());
  while (!todo.empty()) {
    const GraphNodeObject* n = todo.back();
    todo.pop_back();
    if (!before.insert(n).second) continue;
    todo.insert(todo.end(), n->dependencies.begin(), n->dependencies.end());
  }
  for (StreamObject* s : c.streams) {
    if (s == c.origin || !asStream(reinterpret_cast<CUstream>(s)) || s->captureId != c.id) {
      continue;
    }
    for (const GraphNodeObject* n : s->captureDeps) {
      if (!before.count(n)) return false;
    }
  }
  return true;
}

// Begins capture on `h`, into a new graph, or into `into` (cuStreamBeginCaptureToGraph) after its
// nodes `deps`.
CUresult beginCapture(CUstream h, CUstreamCaptureMode mode, CUgraph into = nullptr,
                      const CUgraphNode* deps = nullptr, const CUgraphEdgeData* edges = nullptr,
                      size_t numDeps = 0) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
      mode != CU_STREAM_CAPTURE_MODE_RELAXED) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (!h || h == CU_STREAM_LEGACY) {
    return graphRefusal(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "cuStreamBeginCapture",
                        "the legacy default stream cannot be captured");
  }
  if (h == CU_STREAM_PER_THREAD) {
    return graphRefusal(CUDA_ERROR_NOT_SUPPORTED, "cuStreamBeginCapture",
                        "capturing the per-thread default stream is not served; capture a "
                        "created stream");
  }
  std::lock_guard lock(graphMutex());
  StreamObject* s = asStream(h);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  if (findSequence(s->captureId)) return CUDA_ERROR_ILLEGAL_STATE;
  std::vector<GraphNodeObject*> start;
  GraphObject* target = nullptr;
  if (into) {
    target = asGraph(into);
    if (!target || (numDeps && !deps)) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < numDeps; ++i) {
      GraphNodeObject* d = asGraphNode(deps[i]);
      if (!d || d->graph != target || std::count(start.begin(), start.end(), d)) {
        return CUDA_ERROR_INVALID_VALUE;
      }
      if (edges && (edges[i].from_port || edges[i].to_port || edges[i].type)) {
        return graphRefusal(CUDA_ERROR_NOT_SUPPORTED, "cuStreamBeginCaptureToGraph",
                            "edges other than default ones (programmatic launches) are not served");
      }
      start.push_back(d);
    }
    for (const auto& [id, other] : captures()) {
      if (other->graph == target) {
        return graphRefusal(CUDA_ERROR_INVALID_VALUE, "cuStreamBeginCaptureToGraph",
                            "another capture is already capturing into the graph");
      }
    }
  }
  auto c = std::make_unique<CaptureSequence>();
  c->id = nextCaptureId++;
  c->graph = target ? target : newGraph();
  c->ownsGraph = !target;
  c->origin = s;
  c->mode = mode;
  c->thread = std::this_thread::get_id();
  c->streams.push_back(s);
  s->captureId = c->id;
  setDeps(s, std::move(start));
  captures()[c->id] = std::move(c);
  liveCaptures.store(captures().size(), std::memory_order_release);
  return CUDA_SUCCESS;
}

CUresult endCapture(CUstream h, CUgraph* out) {
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  std::lock_guard lock(graphMutex());
  StreamObject* s = nullptr;
  CaptureSequence* c = capturing(h, &s);
  if (!s && h && h != CU_STREAM_LEGACY && h != CU_STREAM_PER_THREAD) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  if (!c) return CUDA_ERROR_ILLEGAL_STATE;
  if (c->origin != s) return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
  if (c->mode != CU_STREAM_CAPTURE_MODE_RELAXED && c->thread != std::this_thread::get_id()) {
    return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
  }
  CUresult result = CUDA_SUCCESS;
  if (c->invalidated) {
    result = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  } else if (!allJoined(*c)) {
    result = graphRefusal(CUDA_ERROR_STREAM_CAPTURE_UNJOINED, "cuStreamEndCapture",
                          "a stream forked from the capture was not joined back into its origin");
  }
  GraphObject* graph = c->graph;
  bool owned = c->ownsGraph;
  endSequence(c);
  if (!owned && !asGraph(reinterpret_cast<CUgraph>(graph))) {
    result = graphRefusal(CUDA_ERROR_INVALID_VALUE, "cuStreamEndCapture",
                          "the graph captured into was destroyed during the capture");
    owned = false;
  }
  if (result != CUDA_SUCCESS) {
    // A graph the caller gave keeps what was captured into it, and stays the caller's.
    if (owned) destroyGraph(graph);
    *out = nullptr;
    return result;
  }
  *out = reinterpret_cast<CUgraph>(graph);
  return CUDA_SUCCESS;
}

CUresult isCapturing(CUstream h, CUstreamCaptureStatus* status) {
  if (!status) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!h || h == CU_STREAM_LEGACY) {
    ContextObject* ctx = DriverState::get().current();
    if (ctx) {
      if (CUresult r = legacyStreamUse(ctx); r != CUDA_SUCCESS) return r;
    }
    *status = CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
  }
  if (h == CU_STREAM_PER_THREAD) {
    *status = CU_STREAM_CAPTURE_STATUS_NONE;  // never captured here (see beginCapture)
    return CUDA_SUCCESS;
  }
  std::lock_guard lock(graphMutex());
  StreamObject* s = nullptr;
  CaptureSequence* c = capturing(h, &s);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  *status = !c               ? CU_STREAM_CAPTURE_STATUS_NONE
            : c->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                             : CU_STREAM_CAPTURE_STATUS_ACTIVE;
  return CUDA_SUCCESS;
}

CUresult captureInfo(CUstream h, CUstreamCaptureStatus* status, cuuint64_t* id, CUgraph* graph,
                     const CUgraphNode** deps, const CUgraphEdgeData** edges, size_t* numDeps) {
  if (!status) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = isCapturing(h, status); r != CUDA_SUCCESS) return r;
  if (graph) *graph = nullptr;
  if (deps) *deps = nullptr;
  if (edges) *edges = nullptr;
  if (numDeps) *numDeps = 0;
  if (*status == CU_STREAM_CAPTURE_STATUS_NONE) return CUDA_SUCCESS;
  std::lock_guard lock(graphMutex());
  StreamObject* s = nullptr;
  CaptureSequence* c = capturing(h, &s);
  if (!c) {
    *status = CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
  }
  if (id) *id = c->id;
  if (*status != CU_STREAM_CAPTURE_STATUS_ACTIVE) return CUDA_SUCCESS;
  if (graph) *graph = reinterpret_cast<CUgraph>(c->graph);
  // Valid until the stream's next captured call, as the driver documents.
  if (deps) *deps = reinterpret_cast<const CUgraphNode*>(s->captureDeps.data());
  if (edges) *edges = s->captureEdgeData.data();
  if (numDeps) *numDeps = s->captureDeps.size();
  return CUDA_SUCCESS;
}

// cuStreamUpdateCaptureDependencies(_v2): adds `deps` to the capturing stream's dependency set
// (flags 0, CU_STREAM_ADD_CAPTURE_DEPENDENCIES) or replaces the set with them
// (CU_STREAM_SET_CAPTURE_DEPENDENCIES). Nodes dropped from a set no longer count for
// cuStreamEndCapture's join check, which looks at current sets only.
CUresult updateCaptureDependencies(CUstream h, CUgraphNode* deps, const CUgraphEdgeData* edges,
                                   size_t numDeps, unsigned flags) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (flags != CU_STREAM_ADD_CAPTURE_DEPENDENCIES && flags != CU_STREAM_SET_CAPTURE_DEPENDENCIES) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (numDeps && !deps) return CUDA_ERROR_INVALID_VALUE;
  // The default streams never capture here (cuStreamBeginCapture refuses them).
  if (!h || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) return CUDA_ERROR_ILLEGAL_STATE;
  std::lock_guard lock(graphMutex());
  StreamObject* s = nullptr;
  CaptureSequence* c = capturing(h, &s);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  if (!c) return CUDA_ERROR_ILLEGAL_STATE;
  if (c->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  std::vector<GraphNodeObject*> chosen;
  for (size_t i = 0; i < numDeps; ++i) {
    GraphNodeObject* d = asGraphNode(deps[i]);
    if (!d || d->graph != c->graph) return CUDA_ERROR_INVALID_VALUE;
    if (edges && (edges[i].from_port || edges[i].to_port || edges[i].type)) {
      return graphRefusal(CUDA_ERROR_NOT_SUPPORTED, "cuStreamUpdateCaptureDependencies_v2",
                          "edges other than default ones (programmatic launches) are not served");
    }
    chosen.push_back(d);
  }
  std::vector<GraphNodeObject*> next = flags == CU_STREAM_SET_CAPTURE_DEPENDENCIES
                                           ? std::vector<GraphNodeObject*>{}
                                           : s->captureDeps;
  for (GraphNodeObject* d : chosen) {
    if (!std::count(next.begin(), next.end(), d)) next.push_back(d);
  }
  setDeps(s, std::move(next));
  return CUDA_SUCCESS;
}

}  // namespace

CaptureScope::CaptureScope() : outer_(inCaptureScope) { inCaptureScope = true; }
CaptureScope::~CaptureScope() { inCaptureScope = outer_; }

CUresult capturingStreamUse(StreamObject* stream, const char* what) {
  if (inCaptureScope || nothingCaptures()) return CUDA_SUCCESS;
  std::lock_guard lock(graphMutex());
  CaptureSequence* c = findSequence(stream->captureId);
  if (!c) return CUDA_SUCCESS;
  c->invalidated = true;
  const std::string why = std::string(what ? what : "a call") +
                          " cannot be captured and was made on a capturing stream; the capture "
                          "is invalidated";
  return graphRefusal(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, what ? what : "stream capture",
                      why.c_str());
}

CUresult legacyStreamUse(ContextObject* ctx) {
  if (nothingCaptures()) return CUDA_SUCCESS;
  std::lock_guard lock(graphMutex());
  bool implicit = false;
  for (auto& [id, c] : captures()) {
    for (StreamObject* s : c->streams) {
      if (asStream(reinterpret_cast<CUstream>(s)) && s->captureId == id && s->context == ctx &&
          !(s->flags & CU_STREAM_NON_BLOCKING)) {
        c->invalidated = true;
        implicit = true;
      }
    }
  }
  if (!implicit) return CUDA_SUCCESS;
  return graphRefusal(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, "stream capture",
                      "the legacy default stream was used while a blocking stream captures; the "
                      "capture is invalidated");
}

CUresult contextCaptureUse(ContextObject* ctx, EventObject* event, const char* what) {
  std::lock_guard lock(graphMutex());
  bool conflict = false;
  for (auto& [id, c] : captures()) {
    bool involved = event && event->captureId == id;
    for (StreamObject* s : c->streams) {
      involved |=
          asStream(reinterpret_cast<CUstream>(s)) && s->captureId == id && s->context == ctx;
    }
    if (involved) {
      c->invalidated = true;
      conflict = true;
    }
  }
  if (!conflict) return CUDA_SUCCESS;
  return graphRefusal(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, what,
                      "a stream of the context captures (or the event is part of a capture); the "
                      "capture is invalidated");
}

CUresult checkUnsafeDuringCapture(const char* what) {
  if (threadMode == CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_SUCCESS;
  std::lock_guard lock(graphMutex());
  bool prohibited = false;
  auto self = std::this_thread::get_id();
  for (auto& [id, c] : captures()) {
    bool mine = c->thread == self && c->mode != CU_STREAM_CAPTURE_MODE_RELAXED;
    bool others = threadMode == CU_STREAM_CAPTURE_MODE_GLOBAL && c->thread != self &&
                  c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL;
    if (mine || others) {
      c->invalidated = true;
      prohibited = true;
    }
  }
  if (!prohibited) return CUDA_SUCCESS;
  return graphRefusal(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, what,
                      "not permitted while a stream captures (capture mode); the capture is "
                      "invalidated");
}

bool captureKernel(CUstream stream, FunctionObject* f, const unsigned grid[3],
                   const unsigned block[3], unsigned sharedBytes,
                   const std::vector<uint8_t>& params, bool cooperative,
                   const CUlaunchAttributeValue* cluster, const CUlaunchAttributeValue* preferred,
                   CUresult* result) {
  std::unique_lock<std::mutex> lock;
  StreamObject* s = nullptr;
  CaptureSequence* c = lockCapturing(stream, &s, lock);
  if (!c) return false;
  if (cluster && (grid[0] % cluster->clusterDim.x != 0 || grid[1] % cluster->clusterDim.y != 0 ||
                  grid[2] % cluster->clusterDim.z != 0)) {
    // As cuGraphKernelNodeSetAttribute refuses it (graph_api.cc).
    *result = refuseCall(CUDA_ERROR_INVALID_CLUSTER_SIZE,
                         "cuLaunchKernelEx: the cluster shape does not divide the grid");
    return true;
  }
  auto node = std::make_unique<GraphNodeObject>();
  setCapturedKernel(node.get(), f, grid, block, sharedBytes, params);
  if (cooperative) node->kernelAttributes[CU_LAUNCH_ATTRIBUTE_COOPERATIVE].cooperative = 1;
  if (cluster) node->kernelAttributes[CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION] = *cluster;
  if (preferred)
    node->kernelAttributes[CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION] = *preferred;
  return addCaptured(s, c, std::move(node), result);
}

bool captureHostFunction(CUstream stream, CUhostFn fn, void* data, CUresult* result) {
  std::unique_lock<std::mutex> lock;
  StreamObject* s = nullptr;
  CaptureSequence* c = lockCapturing(stream, &s, lock);
  if (!c) return false;
  auto node = std::make_unique<GraphNodeObject>();
  node->type = CU_GRAPH_NODE_TYPE_HOST;
  node->host.fn = fn;
  node->host.userData = data;
  return addCaptured(s, c, std::move(node), result);
}

bool captureMemAlloc(CUstream stream, size_t bytes, CUdeviceptr* dptr, CUresult* result) {
  std::unique_lock<std::mutex> lock;
  StreamObject* s = nullptr;
  CaptureSequence* c = lockCapturing(stream, &s, lock);
  if (!c) return false;
  if (c->invalidated) {
    *result = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    return true;
  }
  CUDA_MEM_ALLOC_NODE_PARAMS p{};
  p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.poolProps.location.id = s->context->device;
  p.bytesize = bytes;
  auto node = std::make_unique<GraphNodeObject>();
  if (CUresult r = setAllocNode(node.get(), c->graph, &p, s->context, "cuMemAllocAsync");
      r != CUDA_SUCCESS) {
    return refuseInCapture(c, r, "cuMemAllocAsync", "the allocation could not be made", result);
  }
  *dptr = p.dptr;
  return addCaptured(s, c, std::move(node), result);
}

bool captureMemFree(CUstream stream, CUdeviceptr dptr, CUresult* result) {
  std::unique_lock<std::mutex> lock;
  StreamObject* s = nullptr;
  CaptureSequence* c = lockCapturing(stream, &s, lock);
  if (!c) return false;
  if (c->invalidated) {
    *result = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    return true;
  }
  auto node = std::make_unique<GraphNodeObject>();
  if (CUresult r = setFreeNode(node.get(), c->graph, dptr, "cuMemFreeAsync"); r != CUDA_SUCCESS) {
    return refuseInCapture(c, r, "cuMemFreeAsync",
                           "only memory allocated in a graph can be freed during capture", result);
  }
  return addCaptured(s, c, std::move(node), result);
}

bool captureMemset(CUstream stream, CUdeviceptr dst, uint32_t value, unsigned elementSize,
                   size_t width, size_t height, size_t pitch, CUresult* result) {
  std::unique_lock<std::mutex> lock;
  StreamObject* s = nullptr;
  CaptureSequence* c = lockCapturing(stream, &s, lock);
  if (!c) return false;
  DeviceAllocation info;
  if (!DriverState::get().findDevice(dst, 0, nullptr, &info) || info.context != s->context) {
    return refuseInCapture(c, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "memset",
                           "memory of another context cannot be captured", result);
  }
  auto node = std::make_unique<GraphNodeObject>();
  node->type = CU_GRAPH_NODE_TYPE_MEMSET;
  node->context = s->context;
  node->memset.dst = dst;
  node->memset.value = value;
  node->memset.elementSize = elementSize;
  node->memset.width = width;
  node->memset.height = height;
  node->memset.pitch = pitch;
  return addCaptured(s, c, std::move(node), result);
}

bool captureMemOps(CUstream stream, const std::vector<CUstreamBatchMemOpParams>& ops,
                   CUresult* result) {
  std::unique_lock<std::mutex> lock;
  StreamObject* s = nullptr;
  CaptureSequence* c = lockCapturing(stream, &s, lock);
  if (!c) return false;
  auto node = std::make_unique<GraphNodeObject>();
  node->type = CU_GRAPH_NODE_TYPE_BATCH_MEM_OP;
  node->context = s->context;
  node->memOps = ops;
  return addCaptured(s, c, std::move(node), result);
}

bool captureCopy(CUstream stream, CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                 CUresult* result) {
  std::unique_lock<std::mutex> lock;
  StreamObject* s = nullptr;
  CaptureSequence* c = lockCapturing(stream, &s, lock);
  if (!c) return false;
  DeviceAllocation dstInfo, srcInfo;
  auto& state = DriverState::get();
  if (!state.findDevice(dst, bytes, nullptr, &dstInfo) ||
      !state.findDevice(src, bytes, nullptr, &srcInfo) || dstInfo.context != s->context ||
      srcInfo.context != s->context) {
    return refuseInCapture(c, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "memcpy",
                           "only copies within the capturing stream's device are captured", result);
  }
  auto node = std::make_unique<GraphNodeObject>();
  node->type = CU_GRAPH_NODE_TYPE_MEMCPY;
  node->context = s->context;
  node->copy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  node->copy.srcDevice = src;
  node->copy.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  node->copy.dstDevice = dst;
  node->copy.WidthInBytes = bytes;
  node->copy.Height = 1;
  node->copy.Depth = 1;
  return addCaptured(s, c, std::move(node), result);
}

bool captureEventRecord(CUstream stream, EventObject* event, unsigned flags, CUresult* result) {
  std::unique_lock<std::mutex> lock;
  StreamObject* s = nullptr;
  CaptureSequence* c = lockCapturing(stream, &s, lock);
  if (!c) return false;
  if (event->context != s->context) {
    *result = CUDA_ERROR_INVALID_HANDLE;
    return true;
  }
  if (flags & CU_EVENT_RECORD_EXTERNAL) {
    auto node = std::make_unique<GraphNodeObject>();
    node->type = CU_GRAPH_NODE_TYPE_EVENT_RECORD;
    node->event = event;
    return addCaptured(s, c, std::move(node), result);
  }
  if (c->invalidated) {
    *result = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    return true;
  }
  // An internal record: the event now stands for the stream's captured work so far, which a
  // wait on it (in this or another stream) depends on.
  event->captureId = c->id;
  event->captureNodes = s->captureDeps;
  *result = CUDA_SUCCESS;
  return true;
}

bool captureEventWait(CUstream stream, EventObject* event, unsigned flags, CUresult* result) {
  std::lock_guard lock(graphMutex());
  StreamObject* s = nullptr;
  CaptureSequence* c = capturing(stream, &s);
  CaptureSequence* recorded = findSequence(event->captureId);
  if (!c && !recorded) return false;
  if (!c) {
    // Fork: a stream that waits for captured work joins the capture.
    if (!s) {
      *result = graphRefusal(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, "cuStreamWaitEvent",
                             "a default stream cannot join a capture");
      return true;
    }
    if (recorded->invalidated) {
      *result = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
      return true;
    }
    if (s->context != event->context) {
      *result = CUDA_ERROR_INVALID_HANDLE;
      return true;
    }
    s->captureId = recorded->id;
    setDeps(s, event->captureNodes);
    recorded->streams.push_back(s);
    *result = CUDA_SUCCESS;
    return true;
  }
  if (recorded == c) {
    if (c->invalidated) {
      *result = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
      return true;
    }
    std::vector<GraphNodeObject*> deps = s->captureDeps;
    for (GraphNodeObject* n : event->captureNodes) {
      if (!std::count(deps.begin(), deps.end(), n)) deps.push_back(n);
    }
    setDeps(s, std::move(deps));
    *result = CUDA_SUCCESS;
    return true;
  }
  if (recorded) {
    return refuseInCapture(c, CUDA_ERROR_STREAM_CAPTURE_MERGE, "cuStreamWaitEvent",
                           "the event belongs to another capture", result);
  }
  if ((flags & CU_EVENT_WAIT_EXTERNAL) && event->context == s->context) {
    auto node = std::make_unique<GraphNodeObject>();
    node->type = CU_GRAPH_NODE_TYPE_WAIT_EVENT;
    node->event = event;
    return addCaptured(s, c, std::move(node), result);
  }
  return refuseInCapture(c, CUDA_ERROR_STREAM_CAPTURE_ISOLATION, "cuStreamWaitEvent",
                         "a capturing stream waited for an event recorded outside the capture "
                         "(CU_EVENT_WAIT_EXTERNAL makes it a wait node)",
                         result);
}

void eventRecordedOutsideCapture(EventObject* event) {
  std::lock_guard lock(graphMutex());
  event->captureId = 0;
  event->captureNodes.clear();
}

}  // namespace gpupool::client

GPUPOOL_DRIVER_API CUresult cuStreamBeginCapture(CUstream h) {
  return beginCapture(h, CU_STREAM_CAPTURE_MODE_GLOBAL);
}
GPUPOOL_DRIVER_API CUresult cuStreamBeginCapture_ptsz(CUstream h) {
  return beginCapture(h ? h : CU_STREAM_PER_THREAD, CU_STREAM_CAPTURE_MODE_GLOBAL);
}
GPUPOOL_DRIVER_API CUresult cuStreamBeginCapture_v2(CUstream h, CUstreamCaptureMode mode) {
  return beginCapture(h, mode);
}
GPUPOOL_DRIVER_API CUresult cuStreamBeginCapture_v2_ptsz(CUstream h, CUstreamCaptureMode mode) {
  return beginCapture(h ? h : CU_STREAM_PER_THREAD, mode);
}
GPUPOOL_DRIVER_API CUresult cuStreamBeginCaptureToGraph(CUstream h, CUgraph graph,
                                                        const CUgraphNode* deps,
                                                        const CUgraphEdgeData* edges,
                                                        size_t numDeps, CUstreamCaptureMode mode) {
  if (!graph) return CUDA_ERROR_INVALID_VALUE;
  return beginCapture(h, mode, graph, deps, edges, numDeps);
}
GPUPOOL_DRIVER_API CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream h, CUgraph graph,
                                                             const CUgraphNode* deps,
                                                             const CUgraphEdgeData* edges,
                                                             size_t numDeps,
                                                             CUstreamCaptureMode mode) {
  if (!graph) return CUDA_ERROR_INVALID_VALUE;
  return beginCapture(h ? h : CU_STREAM_PER_THREAD, mode, graph, deps, edges, numDeps);
}
GPUPOOL_DRIVER_API CUresult cuStreamEndCapture(CUstream h, CUgraph* graph) {
  return endCapture(h, graph);
}
GPUPOOL_DRIVER_API CUresult cuStreamEndCapture_ptsz(CUstream h, CUgraph* graph) {
  return endCapture(h ? h : CU_STREAM_PER_THREAD, graph);
}

GPUPOOL_DRIVER_API CUresult cuStreamIsCapturing(CUstream h, CUstreamCaptureStatus* status) {
  return isCapturing(h, status);
}
GPUPOOL_DRIVER_API CUresult cuStreamIsCapturing_ptsz(CUstream h, CUstreamCaptureStatus* status) {
  return isCapturing(h ? h : CU_STREAM_PER_THREAD, status);
}
GPUPOOL_DRIVER_API CUresult cuStreamGetCaptureInfo(CUstream h, CUstreamCaptureStatus* status,
                                                   cuuint64_t* id) {
  return captureInfo(h, status, id, nullptr, nullptr, nullptr, nullptr);
}
GPUPOOL_DRIVER_API CUresult cuStreamGetCaptureInfo_ptsz(CUstream h, CUstreamCaptureStatus* status,
                                                        cuuint64_t* id) {
  return captureInfo(h ? h : CU_STREAM_PER_THREAD, status, id, nullptr, nullptr, nullptr, nullptr);
}
GPUPOOL_DRIVER_API CUresult cuStreamGetCaptureInfo_v2(CUstream h, CUstreamCaptureStatus* status,
                                                      cuuint64_t* id, CUgraph* graph,
                                                      const CUgraphNode** deps, size_t* numDeps) {
  return captureInfo(h, status, id, graph, deps, nullptr, numDeps);
}
GPUPOOL_DRIVER_API CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream h,
                                                           CUstreamCaptureStatus* status,
                                                           cuuint64_t* id, CUgraph* graph,
                                                           const CUgraphNode** deps,
                                                           size_t* numDeps) {
  return captureInfo(h ? h : CU_STREAM_PER_THREAD, status, id, graph, deps, nullptr, numDeps);
}
GPUPOOL_DRIVER_API CUresult cuStreamGetCaptureInfo_v3(CUstream h, CUstreamCaptureStatus* status,
                                                      cuuint64_t* id, CUgraph* graph,
                                                      const CUgraphNode** deps,
                                                      const CUgraphEdgeData** edges,
                                                      size_t* numDeps) {
  if (edges && !deps) return CUDA_ERROR_INVALID_VALUE;
  return captureInfo(h, status, id, graph, deps, edges, numDeps);
}
GPUPOOL_DRIVER_API CUresult cuStreamGetCaptureInfo_v3_ptsz(
    CUstream h, CUstreamCaptureStatus* status, cuuint64_t* id, CUgraph* graph,
    const CUgraphNode** deps, const CUgraphEdgeData** edges, size_t* numDeps) {
  if (edges && !deps) return CUDA_ERROR_INVALID_VALUE;
  return captureInfo(h ? h : CU_STREAM_PER_THREAD, status, id, graph, deps, edges, numDeps);
}

GPUPOOL_DRIVER_API CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode* mode) {
  if (!mode) return CUDA_ERROR_INVALID_VALUE;
  if (*mode != CU_STREAM_CAPTURE_MODE_GLOBAL && *mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
      *mode != CU_STREAM_CAPTURE_MODE_RELAXED) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::swap(threadMode, *mode);
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuStreamUpdateCaptureDependencies(CUstream h, CUgraphNode* deps,
                                                              size_t numDeps, unsigned flags) {
  return updateCaptureDependencies(h, deps, nullptr, numDeps, flags);
}
GPUPOOL_DRIVER_API CUresult cuStreamUpdateCaptureDependencies_ptsz(CUstream h, CUgraphNode* deps,
                                                                   size_t numDeps, unsigned flags) {
  return updateCaptureDependencies(h ? h : CU_STREAM_PER_THREAD, deps, nullptr, numDeps, flags);
}
GPUPOOL_DRIVER_API CUresult cuStreamUpdateCaptureDependencies_v2(CUstream h, CUgraphNode* deps,
                                                                 const CUgraphEdgeData* edges,
                                                                 size_t numDeps, unsigned flags) {
  return updateCaptureDependencies(h, deps, edges, numDeps, flags);
}
GPUPOOL_DRIVER_API CUresult cuStreamUpdateCaptureDependencies_v2_ptsz(CUstream h, CUgraphNode* deps,
                                                                      const CUgraphEdgeData* edges,
                                                                      size_t numDeps,
                                                                      unsigned flags) {
  return updateCaptureDependencies(h ? h : CU_STREAM_PER_THREAD, deps, edges, numDeps, flags);
}
