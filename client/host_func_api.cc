// Host functions in stream order (cuLaunchHostFunc, cuStreamAddCallback).
//
// The call places a gate in the stream on the server (a post, so the caller does not wait) and
// queues the function to its stream's thread here (client/host_function_runners.h). That thread
// asks the server to answer once the stream reaches the gate, runs the function, and releases the
// gate, after which the stream's later work runs. Work that could stop the server's session thread
// behind a pending gate waits for the function first (client/host_function_fence.h). As with
// NVIDIA's driver, a host function must not call CUDA: it would wait for itself.
#include "host_func_api.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "driver_export.h"
#include "driver_state.h"
#include "host_function_fence.h"
#include "host_function_runners.h"
#include "stream_capture.h"

using namespace gpupool::client;

namespace {

struct HostCall {
  RemoteSession* server = nullptr;
  uint64_t context = 0;  // remote
  uint64_t gate = 0;
  bool legacy = false;
  CUhostFn fn = nullptr;                // cuLaunchHostFunc
  CUstreamCallback callback = nullptr;  // cuStreamAddCallback
  CUstream stream = nullptr;
  void* data = nullptr;
};

CUresult gateCall(const HostCall& c, const char* what, bool release) {
  return c.server->call(what, [&](wire::Request::Builder b) {
    auto g = release ? b.initHostGateRelease() : b.initHostGateWait();
    g.setContext(c.context);
    g.setGate(c.gate);
  });
}

void runHostCall(const HostCall& c) {
  HostFunctionFence::enterHostFunctionThread();
  const char* what = c.fn ? "cuLaunchHostFunc" : "cuStreamAddCallback";
  // The server answers once the stream reaches the gate; NOT_READY when it had no thread free to
  // wait for it, so ask again.
  CUresult r = gateCall(c, what, false);
  auto pause = std::chrono::microseconds(50);
  while (r == CUDA_ERROR_NOT_READY) {
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(5000));
    r = gateCall(c, what, false);
  }
  if (c.fn) {
    // A broken connection means the stream never got here: the function does not run.
    if (r == CUDA_SUCCESS) c.fn(c.data);
  } else if (r != CUDA_ERROR_DEVICE_UNAVAILABLE) {
    c.callback(c.stream, r, c.data);
  }
  // The server let the stream go on without the function (server/host_gates.h): the program
  // hears of it at its next call, as of a failed asynchronous call.
  if (r == CUDA_ERROR_ILLEGAL_STATE) c.server->handOnError(r);
  if (r != CUDA_ERROR_DEVICE_UNAVAILABLE) (void)gateCall(c, what, true);
  HostFunctionFence::closed(c.legacy, FenceScope{c.server, c.context});
}

CUresult place(CUstream h, HostCall call) {
  ContextObject* ctx = nullptr;
  uint64_t s = 0;
  if (CUresult r = resolveStream(h, &ctx, &s); r != CUDA_SUCCESS) return r;
  static std::atomic<uint64_t> nextGate{1};
  call.server = ctx->server;
  call.context = ctx->remote;
  call.gate = nextGate++;
  call.legacy = s == 0;
  const FenceScope scope{call.server, call.context};
  // Counted as placed, and queued to its stream's runner, while its request is framed: the order
  // of the wire is the order of the stream's gates (host_function_fence.h,
  // host_function_runners.h).
  std::unique_ptr<HostFunctionRunners::Placement> placement;
  CUresult r = ctx->server->post(
      call.fn ? "cuLaunchHostFunc" : "cuStreamAddCallback", [&](wire::Request::Builder b) {
        if (!placement) {
          HostFunctionFence::opened(call.legacy, scope);
          placement = HostFunctionRunners::get().queue({call.server, call.context, s},
                                                       [call] { runHostCall(call); });
        }
        auto g = b.initHostGateOpen();
        g.setContext(call.context);
        g.setStream(s);
        g.setGate(call.gate);
      });
  if (r != CUDA_SUCCESS) {
    if (placement) HostFunctionFence::closed(call.legacy, scope);
    return r;  // the placement, dropped, never runs
  }
  placement->keep();
  return CUDA_SUCCESS;
}

CUresult hostFunction(CUstream h, CUhostFn fn, void* data) {
  if (!fn) return CUDA_ERROR_INVALID_VALUE;
  {
    CaptureScope capturing;  // a capturing stream takes the function as a host node
    ContextObject* ctx = nullptr;
    uint64_t s = 0;
    if (CUresult r = resolveStream(h, &ctx, &s); r != CUDA_SUCCESS) return r;
    if (CUresult r = CUDA_SUCCESS; captureHostFunction(h, fn, data, &r)) return r;
  }
  return enqueueHostFunction(h, fn, data);
}

CUresult streamCallback(CUstream h, CUstreamCallback callback, void* data, unsigned flags) {
  if (!callback || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  HostCall c;
  c.callback = callback;
  c.stream = h;
  c.data = data;
  return place(h, c);
}

}  // namespace

namespace gpupool::client {

CUresult enqueueHostFunction(CUstream stream, CUhostFn fn, void* data) {
  HostCall c;
  c.fn = fn;
  c.data = data;
  return place(stream, c);
}

}  // namespace gpupool::client

GPUPOOL_DRIVER_API CUresult cuLaunchHostFunc(CUstream h, CUhostFn fn, void* data) {
  return hostFunction(h, fn, data);
}
GPUPOOL_DRIVER_API CUresult cuLaunchHostFunc_ptsz(CUstream h, CUhostFn fn, void* data) {
  PerThreadDefaultStream perThread;
  return hostFunction(h, fn, data);
}

GPUPOOL_DRIVER_API CUresult cuStreamAddCallback(CUstream h, CUstreamCallback callback, void* data,
                                                unsigned int flags) {
  return streamCallback(h, callback, data, flags);
}
GPUPOOL_DRIVER_API CUresult cuStreamAddCallback_ptsz(CUstream h, CUstreamCallback callback,
                                                     void* data, unsigned int flags) {
  PerThreadDefaultStream perThread;
  return streamCallback(h, callback, data, flags);
}
