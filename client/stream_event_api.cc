// Streams and events: handles here, queues and timestamps on the server.
#include <mutex>
#include <vector>

#include "client_log.h"
#include "context_events.h"
#include "context_hooks.h"
#include "driver_export.h"
#include "driver_state.h"
#include "host_function_fence.h"
#include "stream_capture.h"

using namespace gpupool::client;

namespace {

CUresult createStream(CUstream* out, unsigned flags, int priority) {
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  ContextObject* ctx = nullptr;
  if (CUresult r = currentRemoteContext(&ctx); r != CUDA_SUCCESS) return r;
  return createStreamIn(ctx, flags, priority, out);
}

// Sends a stream-scoped request (synchronize, query, destroy).
template <typename Setter>
CUresult streamCall(const char* what, CUstream h, Setter set) {
  ContextObject* ctx = nullptr;
  uint64_t s = 0;
  if (CUresult r = resolveStream(h, &ctx, &s, what); r != CUDA_SUCCESS) return r;
  return ctx->server->call(what, [&](wire::Request::Builder b) { set(b, ctx->remote, s); });
}

CUresult eventObject(CUevent h, EventObject** e) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  *e = asEvent(h);
  if (!*e) return CUDA_ERROR_INVALID_HANDLE;
  return DriverState::get().ensureRemote((*e)->context);
}

CUresult synchronizeStream(CUstream h) {
  return streamCall("cuStreamSynchronize", h, [](wire::Request::Builder b, uint64_t c, uint64_t s) {
    auto r = b.initStreamSynchronize();
    r.setContext(c);
    r.setStream(s);
  });
}

CUresult queryStream(CUstream h) {
  return streamCall("cuStreamQuery", h, [](wire::Request::Builder b, uint64_t c, uint64_t s) {
    auto r = b.initStreamQuery();
    r.setContext(c);
    r.setStream(s);
  });
}

CUresult waitEvent(CUstream h, CUevent event, unsigned flags) {
  EventObject* e = nullptr;
  if (CUresult r = eventObject(event, &e); r != CUDA_SUCCESS) return r;
  // A wait in a capture, or on captured work (a fork), is graph structure, not a server call.
  if (CUresult r = CUDA_SUCCESS; captureEventWait(h, e, flags, &r)) return r;
  ContextObject* ctx = nullptr;
  uint64_t s = 0;
  if (CUresult r = resolveStream(h, &ctx, &s); r != CUDA_SUCCESS) return r;
  if (e->context != ctx) {
    // Cross-context waits: the event's stream work must be done before this stream goes on;
    // waiting for it here on the host keeps that order.
    uint64_t c = e->context->remote, id = e->remote;
    return e->context->server->call("cuEventSynchronize", [&](wire::Request::Builder b) {
      auto r = b.initEventSynchronize();
      r.setContext(c);
      r.setEvent(id);
    });
  }
  return ctx->server->post("cuStreamWaitEvent", [&](wire::Request::Builder b) {
    auto r = b.initStreamWaitEvent();
    r.setContext(ctx->remote);
    r.setStream(s);
    r.setEvent(e->remote);
  });
}

CUresult recordEvent(CUevent event, CUstream h, unsigned flags) {
  EventObject* e = nullptr;
  if (CUresult r = eventObject(event, &e); r != CUDA_SUCCESS) return r;
  CaptureScope capturing;  // a capturing stream notes the record instead
  ContextObject* ctx = nullptr;
  uint64_t s = 0;
  if (CUresult r = resolveStream(h, &ctx, &s); r != CUDA_SUCCESS) return r;
  if (e->context != ctx) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = CUDA_SUCCESS; captureEventRecord(h, e, flags, &r)) return r;
  eventRecordedOutsideCapture(e);
  auto build = [&](wire::Request::Builder b) {
    auto r = b.initEventRecord();
    r.setContext(ctx->remote);
    r.setEvent(e->remote);
    r.setStream(s);
  };
  // Another process may wait on an interprocess event as soon as this one tells it (a pipe, a
  // socket): the record must be on the server by then, so it is not left in a posted batch.
  if (e->flags & CU_EVENT_INTERPROCESS) return ctx->server->call("cuEventRecord", build);
  return ctx->server->post("cuEventRecord", build);
}

// The attribute table of stream `h` (its own, or its context's for the default streams) and the
// stream's priority.
CUresult streamAttributes(CUstream h, std::map<int, CUstreamAttrValue>** table, int* priority) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (StreamObject* s = asStream(h)) {
    *table = &s->attributes;
    *priority = s->priority;
    return CUDA_SUCCESS;
  }
  if (h && h != CU_STREAM_LEGACY && h != CU_STREAM_PER_THREAD) return CUDA_ERROR_INVALID_HANDLE;
  ContextObject* c = DriverState::get().current();
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  *table = &c->defaultStreamAttributes;
  *priority = 0;
  return CUDA_SUCCESS;
}

CUresult checkAccessPolicy(const CUaccessPolicyWindow& w) {
  auto validProperty = [](CUaccessProperty p) {
    return p == CU_ACCESS_PROPERTY_NORMAL || p == CU_ACCESS_PROPERTY_STREAMING ||
           p == CU_ACCESS_PROPERTY_PERSISTING;
  };
  if (!(w.hitRatio >= 0.0f && w.hitRatio <= 1.0f) || !validProperty(w.hitProp) ||
      !validProperty(w.missProp) || w.missProp == CU_ACCESS_PROPERTY_PERSISTING) {
    return refuseCall(CUDA_ERROR_INVALID_VALUE,
                      "cuStreamSetAttribute: invalid access-policy window");
  }
  return CUDA_SUCCESS;
}

// Stream attributes: the hints a stream may carry are kept and answered back (they change how fast
// work runs, never what it computes: L2 residency, how a host thread waits, memory-fence domains).
// The priority is the stream's creation priority, which cannot change afterwards here.
CUresult setStreamAttribute(CUstream h, CUstreamAttrID id, const CUstreamAttrValue* value) {
  if (!value) return CUDA_ERROR_INVALID_VALUE;
  std::map<int, CUstreamAttrValue>* table = nullptr;
  int priority = 0;
  if (CUresult r = streamAttributes(h, &table, &priority); r != CUDA_SUCCESS) return r;
  switch (id) {
    case CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW:
      if (CUresult r = checkAccessPolicy(value->accessPolicyWindow); r != CUDA_SUCCESS) return r;
      break;
    case CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY:
      if (value->syncPolicy < CU_SYNC_POLICY_AUTO ||
          value->syncPolicy > CU_SYNC_POLICY_BLOCKING_SYNC) {
        return refuseCall(CUDA_ERROR_INVALID_VALUE,
                          "cuStreamSetAttribute: unknown synchronization policy");
      }
      break;
    case CU_STREAM_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
      break;
    case CU_STREAM_ATTRIBUTE_MEM_SYNC_DOMAIN:
      if (value->memSyncDomain != CU_LAUNCH_MEM_SYNC_DOMAIN_DEFAULT &&
          value->memSyncDomain != CU_LAUNCH_MEM_SYNC_DOMAIN_REMOTE) {
        return refuseCall(CUDA_ERROR_INVALID_VALUE,
                          "cuStreamSetAttribute: unknown memory sync domain");
      }
      break;
    case CU_STREAM_ATTRIBUTE_PRIORITY:
      if (clampStreamPriority(value->priority) == priority) return CUDA_SUCCESS;
      return refuseCall(
          CUDA_ERROR_INVALID_VALUE,
          "cuStreamSetAttribute: a stream's priority is fixed when it is created here "
          "(use cuStreamCreateWithPriority)");
    default:
      return refuseCall(CUDA_ERROR_INVALID_VALUE, "cuStreamSetAttribute: attribute " +
                                                      std::to_string(id) + " is not supported");
  }
  (*table)[id] = *value;
  return CUDA_SUCCESS;
}

CUresult getStreamAttribute(CUstream h, CUstreamAttrID id, CUstreamAttrValue* value) {
  if (!value) return CUDA_ERROR_INVALID_VALUE;
  std::map<int, CUstreamAttrValue>* table = nullptr;
  int priority = 0;
  if (CUresult r = streamAttributes(h, &table, &priority); r != CUDA_SUCCESS) return r;
  switch (id) {
    case CU_STREAM_ATTRIBUTE_PRIORITY:
      *value = CUstreamAttrValue{};
      value->priority = priority;
      return CUDA_SUCCESS;
    case CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW:
    case CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY:
    case CU_STREAM_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
    case CU_STREAM_ATTRIBUTE_MEM_SYNC_DOMAIN: {
      auto it = table->find(id);
      *value = CUstreamAttrValue{};
      if (it != table->end()) {
        *value = it->second;
      } else if (id == CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY) {
        value->syncPolicy = CU_SYNC_POLICY_AUTO;
      } else if (id == CU_STREAM_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP) {
        value->memSyncDomainMap.default_ = 0;
        value->memSyncDomainMap.remote = 1;
      }
      return CUDA_SUCCESS;
    }
    default:
      return refuseCall(CUDA_ERROR_INVALID_VALUE, "cuStreamGetAttribute: attribute " +
                                                      std::to_string(id) + " is not supported");
  }
}

CUresult copyStreamAttributes(CUstream dst, CUstream src) {
  std::map<int, CUstreamAttrValue>* to = nullptr;
  std::map<int, CUstreamAttrValue>* from = nullptr;
  int ignored = 0;
  if (CUresult r = streamAttributes(dst, &to, &ignored); r != CUDA_SUCCESS) return r;
  if (CUresult r = streamAttributes(src, &from, &ignored); r != CUDA_SUCCESS) return r;
  *to = *from;
  return CUDA_SUCCESS;
}

CUresult elapsed(float* ms, CUevent start, CUevent end) {
  if (!ms) return CUDA_ERROR_INVALID_VALUE;
  EventObject* a = nullptr;
  EventObject* b = nullptr;
  if (CUresult r = eventObject(start, &a); r != CUDA_SUCCESS) return r;
  if (CUresult r = eventObject(end, &b); r != CUDA_SUCCESS) return r;
  if (a->context != b->context) return CUDA_ERROR_INVALID_HANDLE;
  return a->context->server->call(
      "cuEventElapsedTime",
      [&](wire::Request::Builder req) {
        auto r = req.initEventElapsedTime();
        r.setContext(a->context->remote);
        r.setStart(a->remote);
        r.setEnd(b->remote);
      },
      {},
      [&](wire::Response::Reader reply, ReplyBulk&) {
        *ms = reply.getElapsedMs();
        return CUDA_SUCCESS;
      });
}

}  // namespace

namespace gpupool::client {

CUresult createStreamIn(ContextObject* ctx, unsigned flags, int priority, CUstream* out) {
  // As the driver does, a priority outside the range is clamped to it.
  priority = clampStreamPriority(priority);
  uint64_t id = 0;
  if (CUresult r = createRemoteStream(ctx, flags, priority, &id); r != CUDA_SUCCESS) return r;
  // Known to cuCtxRecordEvent/cuCtxWaitEvent, and waiting for what the context waits for.
  if (CUresult r = contextStreamCreated(ctx, id); r != CUDA_SUCCESS) return r;
  auto* s = new StreamObject();
  s->context = ctx;
  s->remote = id;
  s->flags = flags;
  s->priority = priority;
  registerObject(s);
  noteContextChild(ctx, s, Tag::kStream);
  *out = reinterpret_cast<CUstream>(s);
  return CUDA_SUCCESS;
}

namespace {

// Unregistered, not freed: a capture sequence may still name a stream, and a stale handle must
// find no object at its address. Kept here (never destroyed), so they are not leaks.
template <typename Object>
void forgetChildren(ContextObject* ctx, Tag kind) {
  static auto* ended = new std::vector<const void*>();
  static std::mutex endedMutex;
  std::lock_guard lock(endedMutex);
  for (const void* child : contextChildren(ctx, kind)) {
    auto* object = static_cast<Object*>(const_cast<void*>(child));
    dropContextChild(ctx, object);
    unregisterObject(object);
    object->tag = Tag::kDead;
    ended->push_back(object);
  }
}

}  // namespace

void forgetContextStreamsAndEvents(CUcontext handle) {
  auto* ctx = reinterpret_cast<ContextObject*>(handle);
  forgetChildren<StreamObject>(ctx, Tag::kStream);
  forgetChildren<EventObject>(ctx, Tag::kEvent);
}

}  // namespace gpupool::client

GPUPOOL_DRIVER_API CUresult cuStreamCreate(CUstream* out, unsigned int flags) {
  return createStream(out, flags, 0);
}

GPUPOOL_DRIVER_API CUresult cuStreamCreateWithPriority(CUstream* out, unsigned int flags,
                                                       int priority) {
  return createStream(out, flags, priority);
}

GPUPOOL_DRIVER_API CUresult cuStreamDestroy_v2(CUstream h) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  StreamObject* s = asStream(h);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  CUresult r = CUDA_SUCCESS;
  if (s->context->remote) {
    uint64_t c = s->context->remote, id = s->remote;
    // The server may drain the stream.
    auto fence = HostFunctionFence::hold(HostFunctionFence::Work::kCall, fenceScopeOf(s->context));
    r = s->context->server->post("cuStreamDestroy", [&](wire::Request::Builder b) {
      auto d = b.initStreamDestroy();
      d.setContext(c);
      d.setStream(id);
    });
    contextStreamDestroyed(s->context, id);
  }
  dropContextChild(s->context, s);
  unregisterObject(s);
  s->tag = Tag::kDead;
  delete s;
  return r;
}

GPUPOOL_DRIVER_API CUresult cuStreamDestroy(CUstream h) { return cuStreamDestroy_v2(h); }

GPUPOOL_DRIVER_API CUresult cuStreamSynchronize(CUstream h) { return synchronizeStream(h); }
GPUPOOL_DRIVER_API CUresult cuStreamSynchronize_ptsz(CUstream h) {
  PerThreadDefaultStream perThread;
  return synchronizeStream(h);
}
GPUPOOL_DRIVER_API CUresult cuStreamQuery(CUstream h) { return queryStream(h); }
GPUPOOL_DRIVER_API CUresult cuStreamQuery_ptsz(CUstream h) {
  PerThreadDefaultStream perThread;
  return queryStream(h);
}

GPUPOOL_DRIVER_API CUresult cuStreamWaitEvent(CUstream h, CUevent e, unsigned int flags) {
  return waitEvent(h, e, flags);
}
GPUPOOL_DRIVER_API CUresult cuStreamWaitEvent_ptsz(CUstream h, CUevent e, unsigned int flags) {
  PerThreadDefaultStream perThread;
  return waitEvent(h, e, flags);
}

GPUPOOL_DRIVER_API CUresult cuStreamGetPriority(CUstream h, int* priority) {
  if (!priority) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  StreamObject* s = asStream(h);
  *priority = s ? s->priority : 0;
  return s || !h || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD ? CUDA_SUCCESS
                                                                       : CUDA_ERROR_INVALID_HANDLE;
}
GPUPOOL_DRIVER_API CUresult cuStreamGetPriority_ptsz(CUstream h, int* priority) {
  PerThreadDefaultStream perThread;
  return cuStreamGetPriority(h, priority);
}

GPUPOOL_DRIVER_API CUresult cuStreamGetFlags(CUstream h, unsigned int* flags) {
  if (!flags) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  StreamObject* s = asStream(h);
  *flags = s ? s->flags : 0;
  return s || !h || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD ? CUDA_SUCCESS
                                                                       : CUDA_ERROR_INVALID_HANDLE;
}
GPUPOOL_DRIVER_API CUresult cuStreamGetFlags_ptsz(CUstream h, unsigned int* flags) {
  PerThreadDefaultStream perThread;
  return cuStreamGetFlags(h, flags);
}

GPUPOOL_DRIVER_API CUresult cuStreamGetCtx(CUstream h, CUcontext* pctx) {
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (StreamObject* s = asStream(h)) {
    *pctx = reinterpret_cast<CUcontext>(s->context);
    return CUDA_SUCCESS;
  }
  if (h && h != CU_STREAM_LEGACY && h != CU_STREAM_PER_THREAD) return CUDA_ERROR_INVALID_HANDLE;
  ContextObject* c = DriverState::get().current();
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  *pctx = reinterpret_cast<CUcontext>(c);
  return CUDA_SUCCESS;
}
GPUPOOL_DRIVER_API CUresult cuStreamGetCtx_ptsz(CUstream h, CUcontext* pctx) {
  PerThreadDefaultStream perThread;
  return cuStreamGetCtx(h, pctx);
}

// The 12050+ ABI: a green context's stream answers its green context, and the device's primary
// context; any other stream its context and no green context.
GPUPOOL_DRIVER_API CUresult cuStreamGetCtx_v2(CUstream h, CUcontext* pctx, CUgreenCtx* pgreen) {
  if (!pgreen) return CUDA_ERROR_INVALID_VALUE;
  CUcontext ctx = nullptr;
  if (CUresult r = cuStreamGetCtx(h, &ctx); r != CUDA_SUCCESS) return r;
  auto* c = reinterpret_cast<ContextObject*>(ctx);
  // As documented: the per-thread stream names no stream of a green context.
  if (h == CU_STREAM_PER_THREAD && c->green) return CUDA_ERROR_INVALID_HANDLE;
  *pgreen = reinterpret_cast<CUgreenCtx>(c->green);
  *pctx =
      c->green ? reinterpret_cast<CUcontext>(DriverState::get().primaryContext(c->device)) : ctx;
  return CUDA_SUCCESS;
}
GPUPOOL_DRIVER_API CUresult cuStreamGetCtx_v2_ptsz(CUstream h, CUcontext* pctx,
                                                   CUgreenCtx* pgreen) {
  PerThreadDefaultStream perThread;
  return cuStreamGetCtx_v2(h, pctx, pgreen);
}

// The green context of the stream's context (client/green_context_api.cc), or NULL.
GPUPOOL_DRIVER_API CUresult cuStreamGetGreenCtx(CUstream h, CUgreenCtx* phCtx) {
  if (!phCtx) return CUDA_ERROR_INVALID_VALUE;
  CUcontext ctx = nullptr;
  if (CUresult r = cuStreamGetCtx(h, &ctx); r != CUDA_SUCCESS) return r;
  *phCtx = reinterpret_cast<CUgreenCtx>(reinterpret_cast<ContextObject*>(ctx)->green);
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuStreamGetDevice(CUstream h, CUdevice* device) {
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  CUcontext ctx = nullptr;
  if (CUresult r = cuStreamGetCtx(h, &ctx); r != CUDA_SUCCESS) return r;
  *device = reinterpret_cast<ContextObject*>(ctx)->device;
  return CUDA_SUCCESS;
}
GPUPOOL_DRIVER_API CUresult cuStreamGetDevice_ptsz(CUstream h, CUdevice* device) {
  PerThreadDefaultStream perThread;
  return cuStreamGetDevice(h, device);
}

GPUPOOL_DRIVER_API CUresult cuStreamGetId(CUstream h, unsigned long long* id) {
  if (!id) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  StreamObject* s = asStream(h);
  if (!s && h && h != CU_STREAM_LEGACY && h != CU_STREAM_PER_THREAD) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  *id = s ? s->remote : 0;
  return CUDA_SUCCESS;
}
GPUPOOL_DRIVER_API CUresult cuStreamGetId_ptsz(CUstream h, unsigned long long* id) {
  PerThreadDefaultStream perThread;
  return cuStreamGetId(h, id);
}

GPUPOOL_DRIVER_API CUresult cuStreamSetAttribute(CUstream h, CUstreamAttrID id,
                                                 const CUstreamAttrValue* value) {
  return setStreamAttribute(h, id, value);
}
GPUPOOL_DRIVER_API CUresult cuStreamSetAttribute_ptsz(CUstream h, CUstreamAttrID id,
                                                      const CUstreamAttrValue* value) {
  PerThreadDefaultStream perThread;
  return setStreamAttribute(h, id, value);
}
GPUPOOL_DRIVER_API CUresult cuStreamGetAttribute(CUstream h, CUstreamAttrID id,
                                                 CUstreamAttrValue* value) {
  return getStreamAttribute(h, id, value);
}
GPUPOOL_DRIVER_API CUresult cuStreamGetAttribute_ptsz(CUstream h, CUstreamAttrID id,
                                                      CUstreamAttrValue* value) {
  PerThreadDefaultStream perThread;
  return getStreamAttribute(h, id, value);
}
GPUPOOL_DRIVER_API CUresult cuStreamCopyAttributes(CUstream dst, CUstream src) {
  return copyStreamAttributes(dst, src);
}
GPUPOOL_DRIVER_API CUresult cuStreamCopyAttributes_ptsz(CUstream dst, CUstream src) {
  PerThreadDefaultStream perThread;
  return copyStreamAttributes(dst, src);
}

// ---- Events ----

GPUPOOL_DRIVER_API CUresult cuEventCreate(CUevent* out, unsigned int flags) {
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  ContextObject* ctx = nullptr;
  if (CUresult r = currentRemoteContext(&ctx); r != CUDA_SUCCESS) return r;
  uint64_t id = 0;
  CUresult r = ctx->server->call(
      "cuEventCreate",
      [&](wire::Request::Builder b) {
        auto e = b.initEventCreate();
        e.setContext(ctx->remote);
        e.setFlags(flags);
      },
      {},
      [&](wire::Response::Reader reply, ReplyBulk&) {
        id = reply.getHandle();
        return CUDA_SUCCESS;
      });
  if (r != CUDA_SUCCESS) return r;
  *out = registerEvent(ctx, id, flags);
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuEventDestroy_v2(CUevent h) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  EventObject* e = asEvent(h);
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  CUresult r = CUDA_SUCCESS;
  if (e->context->remote) {
    uint64_t c = e->context->remote, id = e->remote;
    r = e->context->server->post("cuEventDestroy", [&](wire::Request::Builder b) {
      auto d = b.initEventDestroy();
      d.setContext(c);
      d.setEvent(id);
    });
  }
  dropContextChild(e->context, e);
  unregisterObject(e);
  e->tag = Tag::kDead;
  delete e;
  return r;
}

GPUPOOL_DRIVER_API CUresult cuEventDestroy(CUevent h) { return cuEventDestroy_v2(h); }

GPUPOOL_DRIVER_API CUresult cuEventRecord(CUevent e, CUstream s) { return recordEvent(e, s, 0); }
GPUPOOL_DRIVER_API CUresult cuEventRecord_ptsz(CUevent e, CUstream s) {
  PerThreadDefaultStream perThread;
  return recordEvent(e, s, 0);
}
GPUPOOL_DRIVER_API CUresult cuEventRecordWithFlags(CUevent e, CUstream s, unsigned int flags) {
  return recordEvent(e, s, flags);
}
GPUPOOL_DRIVER_API CUresult cuEventRecordWithFlags_ptsz(CUevent e, CUstream s, unsigned int flags) {
  PerThreadDefaultStream perThread;
  return recordEvent(e, s, flags);
}

GPUPOOL_DRIVER_API CUresult cuEventSynchronize(CUevent h) {
  EventObject* e = nullptr;
  if (CUresult r = eventObject(h, &e); r != CUDA_SUCCESS) return r;
  return e->context->server->call("cuEventSynchronize", [&](wire::Request::Builder b) {
    auto r = b.initEventSynchronize();
    r.setContext(e->context->remote);
    r.setEvent(e->remote);
  });
}

GPUPOOL_DRIVER_API CUresult cuEventQuery(CUevent h) {
  EventObject* e = nullptr;
  if (CUresult r = eventObject(h, &e); r != CUDA_SUCCESS) return r;
  return e->context->server->call("cuEventQuery", [&](wire::Request::Builder b) {
    auto r = b.initEventQuery();
    r.setContext(e->context->remote);
    r.setEvent(e->remote);
  });
}

GPUPOOL_DRIVER_API CUresult cuEventElapsedTime(float* ms, CUevent start, CUevent end) {
  return elapsed(ms, start, end);
}

GPUPOOL_DRIVER_API CUresult cuEventElapsedTime_v2(float* ms, CUevent start, CUevent end) {
  return elapsed(ms, start, end);
}
