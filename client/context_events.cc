// cuCtxRecordEvent and cuCtxWaitEvent: an event that stands for all of a context's work, and a
// context that waits for an event with all of its work to come. Both are made of the stream
// operations every backend has, on the client: the context's streams (the legacy stream, the
// per-thread default streams and the created ones, reported by the stream code through
// context_events.h) are each marked with an event of their own, and a hidden stream waits for all
// marks before recording the caller's event; a context wait is a wait on every stream, and on a
// hidden stream whose recorded snapshot every stream made later waits for first.
#include "context_events.h"

#include <map>
#include <mutex>
#include <set>
#include <vector>

#include "client_log.h"
#include "driver_export.h"
#include "host_function_fence.h"
#include "stream_capture.h"

namespace gpupool::client {
namespace {

// What one context needs, on its server (reset when the context's server side is new).
struct ContextStreams {
  uint64_t remoteContext = 0;
  std::set<uint64_t> streams;          // the context's streams besides the legacy one (0)
  std::map<uint64_t, uint64_t> marks;  // stream -> the event marking its work so far
  uint64_t recordStream = 0;           // waits for every mark, then records the caller's event
  uint64_t waitStream = 0;             // waits for every event the context was made to wait for
  uint64_t waitSnapshot = 0;           // recorded on waitStream after each context wait
};

std::mutex& contextStreamsMutex() {
  static auto* mutex = new std::mutex();  // never destroyed: atexit handlers may still use it
  return *mutex;
}

std::map<ContextObject*, ContextStreams>& contextStreamsRegistry() {
  static auto* map = new std::map<ContextObject*, ContextStreams>();
  return *map;
}

// The state of `ctx`, under contextStreamsMutex().
ContextStreams& streamsOf(ContextObject* ctx) {
  ContextStreams& state = contextStreamsRegistry()[ctx];
  if (state.remoteContext != ctx->remote) {
    state = ContextStreams();
    state.remoteContext = ctx->remote;
  }
  return state;
}

CUresult createEvent(ContextObject* ctx, uint64_t* id) {
  return ctx->server->call(
      "cuEventCreate",
      [&](wire::Request::Builder b) {
        auto e = b.initEventCreate();
        e.setContext(ctx->remote);
        e.setFlags(CU_EVENT_DISABLE_TIMING);
      },
      {},
      [&](wire::Response::Reader reply, ReplyBulk&) {
        *id = reply.getHandle();
        return CUDA_SUCCESS;
      });
}

CUresult postRecord(ContextObject* ctx, uint64_t event, uint64_t stream, const char* what) {
  return ctx->server->post(what, [&](wire::Request::Builder b) {
    auto r = b.initEventRecord();
    r.setContext(ctx->remote);
    r.setEvent(event);
    r.setStream(stream);
  });
}

CUresult postWait(ContextObject* ctx, uint64_t stream, uint64_t event, const char* what) {
  return ctx->server->post(what, [&](wire::Request::Builder b) {
    auto r = b.initStreamWaitEvent();
    r.setContext(ctx->remote);
    r.setStream(stream);
    r.setEvent(event);
  });
}

// The context and event of a call, checked as the driver does.
CUresult contextAndEvent(CUcontext hCtx, CUevent hEvent, const char* what, ContextObject** ctx,
                         EventObject** event) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  *ctx = asContext(hCtx);
  if (!*ctx) return CUDA_ERROR_INVALID_CONTEXT;
  *event = asEvent(hEvent);
  if (!*event) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = DriverState::get().ensureRemote(*ctx); r != CUDA_SUCCESS) return r;
  if (CUresult r = DriverState::get().ensureRemote((*event)->context); r != CUDA_SUCCESS) return r;
  if (CUresult r = contextCaptureUse(*ctx, *event, what); r != CUDA_SUCCESS) return r;
  // Work goes to the legacy stream too, and the hidden objects are made by calls.
  HostFunctionFence::await(HostFunctionFence::Work::kCall, fenceScopeOf(*ctx));
  return CUDA_SUCCESS;
}

CUresult recordContext(CUcontext hCtx, CUevent hEvent) {
  constexpr const char* kWhat = "cuCtxRecordEvent";
  ContextObject* ctx = nullptr;
  EventObject* event = nullptr;
  if (CUresult r = contextAndEvent(hCtx, hEvent, kWhat, &ctx, &event); r != CUDA_SUCCESS) return r;
  if (event->context != ctx) return CUDA_ERROR_INVALID_HANDLE;
  std::lock_guard lock(contextStreamsMutex());
  ContextStreams& state = streamsOf(ctx);
  if (!state.recordStream) {
    if (CUresult r = createRemoteStream(ctx, CU_STREAM_NON_BLOCKING, 0, &state.recordStream);
        r != CUDA_SUCCESS) {
      return r;
    }
  }
  std::vector<uint64_t> streams(state.streams.begin(), state.streams.end());
  streams.push_back(0);
  // Each stream's mark is recorded on that stream only, so its records complete in order.
  for (uint64_t s : streams) {
    uint64_t& mark = state.marks[s];
    if (!mark) {
      if (CUresult r = createEvent(ctx, &mark); r != CUDA_SUCCESS) return r;
    }
    if (CUresult r = postRecord(ctx, mark, s, kWhat); r != CUDA_SUCCESS) return r;
    if (CUresult r = postWait(ctx, state.recordStream, mark, kWhat); r != CUDA_SUCCESS) return r;
  }
  eventRecordedOutsideCapture(event);
  return postRecord(ctx, event->remote, state.recordStream, kWhat);
}

CUresult waitContext(CUcontext hCtx, CUevent hEvent) {
  constexpr const char* kWhat = "cuCtxWaitEvent";
  ContextObject* ctx = nullptr;
  EventObject* event = nullptr;
  if (CUresult r = contextAndEvent(hCtx, hEvent, kWhat, &ctx, &event); r != CUDA_SUCCESS) return r;
  if (event->context != ctx) {
    // Another context's event: as cuStreamWaitEvent across contexts, the work it stands for is
    // waited for here, on the host, so everything the context does later comes after it.
    uint64_t c = event->context->remote, id = event->remote;
    return event->context->server->call(kWhat, [&](wire::Request::Builder b) {
      auto r = b.initEventSynchronize();
      r.setContext(c);
      r.setEvent(id);
    });
  }
  std::lock_guard lock(contextStreamsMutex());
  ContextStreams& state = streamsOf(ctx);
  if (!state.waitStream) {
    if (CUresult r = createRemoteStream(ctx, CU_STREAM_NON_BLOCKING, 0, &state.waitStream);
        r != CUDA_SUCCESS) {
      return r;
    }
    if (CUresult r = createEvent(ctx, &state.waitSnapshot); r != CUDA_SUCCESS) {
      state.waitStream = 0;
      return r;
    }
  }
  // Streams made later wait for the snapshot, which holds every event the context waited for.
  if (CUresult r = postWait(ctx, state.waitStream, event->remote, kWhat); r != CUDA_SUCCESS) {
    return r;
  }
  if (CUresult r = postRecord(ctx, state.waitSnapshot, state.waitStream, kWhat);
      r != CUDA_SUCCESS) {
    return r;
  }
  std::vector<uint64_t> streams(state.streams.begin(), state.streams.end());
  streams.push_back(0);
  for (uint64_t s : streams) {
    if (CUresult r = postWait(ctx, s, event->remote, kWhat); r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

}  // namespace

CUresult contextStreamCreated(ContextObject* ctx, uint64_t stream) {
  std::lock_guard lock(contextStreamsMutex());
  ContextStreams& state = streamsOf(ctx);
  state.streams.insert(stream);
  if (!state.waitSnapshot) return CUDA_SUCCESS;
  return postWait(ctx, stream, state.waitSnapshot, "cuStreamCreate");
}

void contextStreamDestroyed(ContextObject* ctx, uint64_t stream) {
  std::lock_guard lock(contextStreamsMutex());
  ContextStreams& state = streamsOf(ctx);
  state.streams.erase(stream);
  auto mark = state.marks.find(stream);
  if (mark == state.marks.end()) return;
  uint64_t event = mark->second;
  state.marks.erase(mark);
  (void)ctx->server->post("cuStreamDestroy", [&](wire::Request::Builder b) {
    auto d = b.initEventDestroy();
    d.setContext(ctx->remote);
    d.setEvent(event);
  });
}

}  // namespace gpupool::client

using namespace gpupool::client;

GPUPOOL_DRIVER_API CUresult cuCtxRecordEvent(CUcontext hCtx, CUevent hEvent) {
  return recordContext(hCtx, hEvent);
}

GPUPOOL_DRIVER_API CUresult cuCtxWaitEvent(CUcontext hCtx, CUevent hEvent) {
  return waitContext(hCtx, hEvent);
}
