// The calls that act on every stream of a context (cuCtxRecordEvent, cuCtxWaitEvent, in
// context_events.cc) need the context's streams: the stream code reports each server stream it
// makes or destroys here.
#pragma once

#include <cstdint>

#include "driver_state.h"

namespace gpupool::client {

// A stream of `ctx` (created, or a thread's per-thread default stream) now exists on the server.
// Work on it waits for what earlier cuCtxWaitEvent calls on `ctx` made the context wait for.
CUresult contextStreamCreated(ContextObject* ctx, uint64_t stream);
// The stream is destroyed.
void contextStreamDestroyed(ContextObject* ctx, uint64_t stream);

}  // namespace gpupool::client
