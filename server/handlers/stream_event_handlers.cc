// Streams and events: creation, ordering (waits, records) and the calls that wait for or ask
// about the device's progress.
#include "server/handlers/request_table.h"
#include "server/pool_server.h"

namespace gpupool::server {
namespace {

using wire::Request;

Status streamCreate(RequestContext& request, Request::Reader r) {
  auto s = r.getStreamCreate();
  return request.withContext(s.getContext(), [&](BackendContext& context) {
    uint64_t stream = 0;
    Status st = context.streamCreate(s.getFlags(), s.getPriority(), &stream);
    if (st.ok()) request.reply.setHandle(stream);
    return st;
  });
}

Status streamDestroy(RequestContext& request, Request::Reader r) {
  auto s = r.getStreamDestroy();
  return request.withContext(s.getContext(), [&](BackendContext& context) {
    return context.streamDestroy(s.getStream());
  });
}

Status streamSynchronize(RequestContext& request, Request::Reader r) {
  auto s = r.getStreamSynchronize();
  return request.withContext(s.getContext(), [&](BackendContext& context) {
    return context.streamSynchronize(s.getStream());
  });
}

// The ready checks of the two waits: whether the stream has drained, or the event been reached.
Status streamSynchronizeReady(RequestContext& request, Request::Reader r) {
  auto s = r.getStreamSynchronize();
  return request.withContext(s.getContext(), [&](BackendContext& context) {
    return streamDrained(context, s.getStream());
  });
}

Status eventReached(RequestContext& request, Request::Reader r) {
  auto e = r.getEventSynchronize();
  return request.withContext(
      e.getContext(), [&](BackendContext& context) { return context.eventQuery(e.getEvent()); });
}

Status streamQuery(RequestContext& request, Request::Reader r) {
  auto s = r.getStreamQuery();
  return request.withContext(
      s.getContext(), [&](BackendContext& context) { return context.streamQuery(s.getStream()); });
}

Status streamWaitEvent(RequestContext& request, Request::Reader r) {
  auto s = r.getStreamWaitEvent();
  return request.withContext(s.getContext(), [&](BackendContext& context) {
    return context.streamWaitEvent(s.getStream(), s.getEvent());
  });
}

Status eventCreate(RequestContext& request, Request::Reader r) {
  auto e = r.getEventCreate();
  return request.withContext(e.getContext(), [&](BackendContext& context) {
    uint64_t event = 0;
    Status st = context.eventCreate(e.getFlags(), &event);
    if (st.ok()) request.reply.setHandle(event);
    return st;
  });
}

Status eventDestroy(RequestContext& request, Request::Reader r) {
  auto e = r.getEventDestroy();
  // An IPC handle of the event opens nothing any more (events already opened elsewhere live on).
  request.session.server.ipcMemory().withdrawEvent(request.session.id, e.getContext(),
                                                   e.getEvent());
  return request.withContext(
      e.getContext(), [&](BackendContext& context) { return context.eventDestroy(e.getEvent()); });
}

Status eventRecord(RequestContext& request, Request::Reader r) {
  auto e = r.getEventRecord();
  return request.withContext(e.getContext(), [&](BackendContext& context) {
    return context.eventRecord(e.getEvent(), e.getStream());
  });
}

Status eventSynchronize(RequestContext& request, Request::Reader r) {
  auto e = r.getEventSynchronize();
  return request.withContext(e.getContext(), [&](BackendContext& context) {
    return context.eventSynchronize(e.getEvent());
  });
}

Status eventQuery(RequestContext& request, Request::Reader r) {
  auto e = r.getEventQuery();
  return request.withContext(
      e.getContext(), [&](BackendContext& context) { return context.eventQuery(e.getEvent()); });
}

Status eventElapsedTime(RequestContext& request, Request::Reader r) {
  auto e = r.getEventElapsedTime();
  return request.withContext(e.getContext(), [&](BackendContext& context) {
    float ms = 0;
    Status st = context.eventElapsedTime(e.getStart(), e.getEnd(), &ms);
    if (st.ok()) request.reply.setElapsedMs(ms);
    return st;
  });
}

constexpr RequestHandlerRow kRows[] = {
    {Request::STREAM_CREATE, streamCreate},
    {Request::STREAM_DESTROY, streamDestroy},
    {Request::STREAM_SYNCHRONIZE, streamSynchronize, streamSynchronize, streamSynchronizeReady},
    {Request::STREAM_QUERY, streamQuery},
    {Request::STREAM_WAIT_EVENT, streamWaitEvent},
    {Request::EVENT_CREATE, eventCreate},
    {Request::EVENT_DESTROY, eventDestroy},
    {Request::EVENT_RECORD, eventRecord},
    {Request::EVENT_SYNCHRONIZE, eventSynchronize, eventSynchronize, eventReached},
    {Request::EVENT_QUERY, eventQuery},
    {Request::EVENT_ELAPSED_TIME, eventElapsedTime},
};

}  // namespace

std::span<const RequestHandlerRow> streamEventHandlers() { return kRows; }

}  // namespace gpupool::server
