// User objects (cuUserObjectCreate/Retain/Release, cuGraphRetainUserObject/ReleaseUserObject):
// reference-counted client objects whose destructor runs when the last reference goes. Graphs
// hold references (graph_model.h: a clone or an instantiation takes its own), and an executable
// graph that was launched drops its references only once the work queued on each stream it was
// launched on has run, through a host function in each of those streams (host_func_api.h). As
// with the driver, a destructor must not call CUDA; here it runs on the thread that dropped the
// last reference (a client host-function thread for a launched executable graph).
#include <atomic>
#include <memory>

#include "driver_export.h"
#include "graph_model.h"
#include "host_func_api.h"

namespace gpupool::client {

struct UserObject {
  Tag tag = Tag::kUserObject;
  void* ptr = nullptr;
  CUhostFn destroy = nullptr;
  std::atomic<unsigned> refs{0};
};

void retainUserObject(UserObject* object, unsigned count) { object->refs += count; }

void releaseUserObject(UserObject* object, unsigned count) {
  if (object->refs.fetch_sub(count) != count) return;
  unregisterObject(object);
  object->tag = Tag::kDead;
  object->destroy(object->ptr);
  delete object;
}

namespace {

// References waiting for the host functions placed in several streams; the last one drops them.
struct PendingRelease {
  std::atomic<size_t> streamsLeft{0};
  std::map<UserObject*, unsigned> refs;
};

void streamReached(void* data) {
  auto* pending = static_cast<PendingRelease*>(data);
  if (--pending->streamsLeft != 0) return;
  for (auto [object, count] : pending->refs) releaseUserObject(object, count);
  delete pending;
}

UserObject* asUserObject(CUuserObject h) {
  if (!isRegistered(h)) return nullptr;
  auto* object = reinterpret_cast<UserObject*>(h);
  return object->tag == Tag::kUserObject ? object : nullptr;
}

}  // namespace

void releaseUserObjectsAfter(const std::set<CUstream>& streams,
                             std::map<UserObject*, unsigned> refs) {
  if (refs.empty()) return;
  auto* pending = new PendingRelease();
  pending->refs = std::move(refs);
  // One count for this call itself, so no host function drops the references before every
  // stream has its own.
  pending->streamsLeft = streams.size() + 1;
  for (CUstream stream : streams) {
    // A stream destroyed since has no work left to wait for.
    if (enqueueHostFunction(stream, streamReached, pending) != CUDA_SUCCESS) streamReached(pending);
  }
  streamReached(pending);
}

}  // namespace gpupool::client

using namespace gpupool::client;

GPUPOOL_DRIVER_API CUresult cuUserObjectCreate(CUuserObject* out, void* ptr, CUhostFn destroy,
                                               unsigned int initialRefcount, unsigned int flags) {
  if (!out || !destroy || initialRefcount == 0 || flags != CU_USER_OBJECT_NO_DESTRUCTOR_SYNC) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  auto* object = new UserObject();
  object->ptr = ptr;
  object->destroy = destroy;
  object->refs = initialRefcount;
  registerObject(object);
  *out = reinterpret_cast<CUuserObject>(object);
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuUserObjectRetain(CUuserObject h, unsigned int count) {
  if (count == 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(graphMutex());
  UserObject* object = asUserObject(h);
  if (!object) return CUDA_ERROR_INVALID_VALUE;
  retainUserObject(object, count);
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuUserObjectRelease(CUuserObject h, unsigned int count) {
  if (count == 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(graphMutex());
  UserObject* object = asUserObject(h);
  if (!object || count > object->refs) return CUDA_ERROR_INVALID_VALUE;
  releaseUserObject(object, count);
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuGraphRetainUserObject(CUgraph g, CUuserObject h, unsigned int count,
                                                    unsigned int flags) {
  if (count == 0 || (flags & ~CU_GRAPH_USER_OBJECT_MOVE)) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(graphMutex());
  GraphObject* graph = asGraph(g);
  UserObject* object = asUserObject(h);
  if (!graph || !object) return CUDA_ERROR_INVALID_VALUE;
  // MOVE hands over references the caller holds; otherwise the graph takes new ones.
  if (!(flags & CU_GRAPH_USER_OBJECT_MOVE)) retainUserObject(object, count);
  graph->userRefs[object] += count;
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuGraphReleaseUserObject(CUgraph g, CUuserObject h,
                                                     unsigned int count) {
  if (count == 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(graphMutex());
  GraphObject* graph = asGraph(g);
  UserObject* object = asUserObject(h);
  if (!graph || !object) return CUDA_ERROR_INVALID_VALUE;
  auto it = graph->userRefs.find(object);
  if (it == graph->userRefs.end() || it->second < count) return CUDA_ERROR_INVALID_VALUE;
  if ((it->second -= count) == 0) graph->userRefs.erase(it);
  releaseUserObject(object, count);
  return CUDA_SUCCESS;
}
