// Contexts: handles, the per-thread current-context stack and primary-context reference counts are
// client state; the server side of a context is created when it is first needed.
#include <algorithm>

#include "client_log.h"
#include "context_hooks.h"
#include "driver_export.h"
#include "driver_state.h"
#include "raw_enum.h"
#include "stream_capture.h"

using namespace gpupool::client;

namespace {

CUresult contextOrCurrent(CUcontext h, ContextObject** out) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  ContextObject* c = h ? asContext(h) : DriverState::get().current();
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  *out = c;
  return CUDA_SUCCESS;
}

CUresult synchronizeContext(ContextObject* c) {
  if (CUresult r = checkUnsafeDuringCapture("cuCtxSynchronize"); r != CUDA_SUCCESS) return r;
  if (!c->remote) return CUDA_SUCCESS;  // nothing was ever queued there
  uint64_t remote = c->remote;
  return c->server->call("cuCtxSynchronize",
                         [&](wire::Request::Builder b) { b.setCtxSynchronize(remote); });
}

// The flags a context may have: one scheduling policy at most, and no core dumps, which are never
// written for a pool client (see client/coredump_api.cc).
CUresult checkContextFlags(unsigned flags, const char* call) {
  unsigned schedule = flags & CU_CTX_SCHED_MASK;
  if ((flags & ~CU_CTX_FLAGS_MASK) || (schedule & (schedule - 1))) return CUDA_ERROR_INVALID_VALUE;
  if (flags & (CU_CTX_COREDUMP_ENABLE | CU_CTX_USER_COREDUMP_ENABLE)) {
    return refuseCall(CUDA_ERROR_NOT_SUPPORTED,
                      std::string(call) +
                          ": GPU core dumps (CU_CTX_COREDUMP_ENABLE, CU_CTX_USER_COREDUMP_ENABLE) "
                          "are not written for a pool client; create the context without them");
  }
  return CUDA_SUCCESS;
}

CUresult createContext(CUcontext* pctx, unsigned flags, CUdevice dev) {
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = checkContextFlags(flags, "cuCtxCreate"); r != CUDA_SUCCESS) return r;
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!DriverState::get().device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  auto* c = new ContextObject();
  c->device = dev;
  c->server = DriverState::get().serverOf(dev);
  c->serverDevice = DriverState::get().serverDeviceOf(dev);
  c->flags = flags;
  if (CUresult r = DriverState::get().ensureRemote(c); r != CUDA_SUCCESS) {
    delete c;
    return r;
  }
  registerObject(c);
  DriverState::get().stack().push_back(c);
  *pctx = reinterpret_cast<CUcontext>(c);
  return CUDA_SUCCESS;
}

}  // namespace

GPUPOOL_DRIVER_API CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  ContextObject* c = DriverState::get().primaryContext(dev);
  if (!c) return CUDA_ERROR_INVALID_DEVICE;
  {
    std::lock_guard lock(DriverState::get().mutex);
    ++c->refcount;
  }
  *pctx = reinterpret_cast<CUcontext>(c);
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  ContextObject* c = DriverState::get().primaryContext(dev);
  if (!c) return CUDA_ERROR_INVALID_DEVICE;
  bool last = false;
  {
    std::lock_guard lock(DriverState::get().mutex);
    if (c->refcount <= 0) return CUDA_ERROR_INVALID_CONTEXT;
    last = --c->refcount == 0;
  }
  if (last) DriverState::get().releaseRemote(c);
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
  return cuDevicePrimaryCtxRelease_v2(dev);
}

GPUPOOL_DRIVER_API CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  ContextObject* c = DriverState::get().primaryContext(dev);
  if (!c) return CUDA_ERROR_INVALID_DEVICE;
  DriverState::get().releaseRemote(c);
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuDevicePrimaryCtxReset(CUdevice dev) {
  return cuDevicePrimaryCtxReset_v2(dev);
}

GPUPOOL_DRIVER_API CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags,
                                                       int* active) {
  if (!flags || !active) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  ContextObject* c = DriverState::get().primaryContext(dev);
  if (!c) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard lock(DriverState::get().mutex);
  *flags = c->flags;
  *active = c->refcount > 0 || c->remote != 0;
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (CUresult r = checkContextFlags(flags, "cuDevicePrimaryCtxSetFlags"); r != CUDA_SUCCESS) {
    return r;
  }
  ContextObject* c = DriverState::get().primaryContext(dev);
  if (!c) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard lock(DriverState::get().mutex);
  c->flags = flags;
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags) {
  return cuDevicePrimaryCtxSetFlags_v2(dev, flags);
}

GPUPOOL_DRIVER_API CUresult cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  return createContext(pctx, flags, dev);
}

GPUPOOL_DRIVER_API CUresult cuCtxCreate(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  return createContext(pctx, flags, dev);
}

GPUPOOL_DRIVER_API CUresult cuCtxCreate_v3(CUcontext* pctx, CUexecAffinityParam* params,
                                           int numParams, unsigned int flags, CUdevice dev) {
  if (numParams > 0 && params) return CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY;
  return createContext(pctx, flags, dev);
}

GPUPOOL_DRIVER_API CUresult cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* params,
                                           unsigned int flags, CUdevice dev) {
  if (params && (params->numExecAffinityParams > 0 || params->cigParams)) {
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  return createContext(pctx, flags, dev);
}

GPUPOOL_DRIVER_API CUresult cuCtxDestroy_v2(CUcontext h) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  ContextObject* c = asContext(h);
  // A green context's context ends with cuGreenCtxDestroy.
  if (!c || c->primary || c->green) return CUDA_ERROR_INVALID_CONTEXT;
  DriverState::get().releaseRemote(c);
  auto& stack = DriverState::get().stack();
  std::erase(stack, c);
  unregisterObject(c);
  c->tag = Tag::kDead;
  delete c;
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuCtxDestroy(CUcontext h) { return cuCtxDestroy_v2(h); }

// Peer access: no two pool devices map each other's memory (cuDeviceCanAccessPeer says 0), so it
// cannot be enabled, as NVIDIA's driver answers for such a pair.
GPUPOOL_DRIVER_API CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  ContextObject* current = DriverState::get().current();
  ContextObject* other = asContext(peer);
  if (!current || !other || current == other) return CUDA_ERROR_INVALID_CONTEXT;
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  return refuseCall(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED,
                    "cuCtxEnablePeerAccess: pool devices do not map each other's memory; peer "
                    "copies (cuMemcpyPeer) work without it");
}

GPUPOOL_DRIVER_API CUresult cuCtxDisablePeerAccess(CUcontext peer) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  ContextObject* current = DriverState::get().current();
  if (!current || !asContext(peer)) return CUDA_ERROR_INVALID_CONTEXT;
  return CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
}

// Deprecated usage counting: cuCtxAttach counts one more user of the current context, cuCtxDetach
// one fewer, destroying a created context when the last one detaches (cuCtxDestroy ignores it).
GPUPOOL_DRIVER_API CUresult cuCtxAttach(CUcontext* pctx, unsigned int flags) {
  if (!pctx || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  ContextObject* c = DriverState::get().current();
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  {
    std::lock_guard lock(DriverState::get().mutex);
    ++c->usage;
  }
  *pctx = reinterpret_cast<CUcontext>(c);
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuCtxDetach(CUcontext h) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  ContextObject* c = asContext(h);
  // The context must be current to the calling thread, as NVIDIA's driver requires.
  if (!c || DriverState::get().current() != c) return CUDA_ERROR_INVALID_CONTEXT;
  int left = 0;
  {
    std::lock_guard lock(DriverState::get().mutex);
    if (c->usage > 0) --c->usage;
    left = c->usage;
  }
  // A primary context belongs to its device (cuDevicePrimaryCtxRelease ends it), never to
  // cuCtxDetach.
  if (left > 0 || c->primary) return CUDA_SUCCESS;
  return cuCtxDestroy_v2(h);
}

GPUPOOL_DRIVER_API CUresult cuCtxPushCurrent_v2(CUcontext h) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  ContextObject* c = asContext(h);
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  DriverState::get().stack().push_back(c);
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuCtxPushCurrent(CUcontext h) { return cuCtxPushCurrent_v2(h); }

GPUPOOL_DRIVER_API CUresult cuCtxPopCurrent_v2(CUcontext* pctx) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  auto& stack = DriverState::get().stack();
  if (stack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  if (pctx) *pctx = reinterpret_cast<CUcontext>(stack.back());
  stack.pop_back();
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuCtxPopCurrent(CUcontext* pctx) { return cuCtxPopCurrent_v2(pctx); }

GPUPOOL_DRIVER_API CUresult cuCtxSetCurrent(CUcontext h) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  auto& stack = DriverState::get().stack();
  if (!h) {
    if (!stack.empty()) stack.pop_back();
    return CUDA_SUCCESS;
  }
  ContextObject* c = asContext(h);
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  if (stack.empty()) {
    stack.push_back(c);
  } else {
    stack.back() = c;
  }
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuCtxGetCurrent(CUcontext* pctx) {
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  *pctx = reinterpret_cast<CUcontext>(DriverState::get().current());
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuCtxGetDevice_v2(CUdevice* device, CUcontext h) {
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  ContextObject* c = nullptr;
  if (CUresult r = contextOrCurrent(h, &c); r != CUDA_SUCCESS) return r;
  *device = c->device;
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuCtxGetDevice(CUdevice* device) {
  return cuCtxGetDevice_v2(device, nullptr);
}

GPUPOOL_DRIVER_API CUresult cuCtxSynchronize() {
  ContextObject* c = nullptr;
  if (CUresult r = contextOrCurrent(nullptr, &c); r != CUDA_SUCCESS) return r;
  return synchronizeContext(c);
}

GPUPOOL_DRIVER_API CUresult cuCtxSynchronize_v2(CUcontext h) {
  ContextObject* c = nullptr;
  if (CUresult r = contextOrCurrent(h, &c); r != CUDA_SUCCESS) return r;
  return synchronizeContext(c);
}

GPUPOOL_DRIVER_API CUresult cuCtxGetApiVersion(CUcontext h, unsigned int* version) {
  if (!version) return CUDA_ERROR_INVALID_VALUE;
  ContextObject* c = nullptr;
  if (CUresult r = contextOrCurrent(h, &c); r != CUDA_SUCCESS) return r;
  *version = 3020;  // contexts of the _v2 API generation
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuCtxGetFlags(unsigned int* flags) {
  if (!flags) return CUDA_ERROR_INVALID_VALUE;
  ContextObject* c = nullptr;
  if (CUresult r = contextOrCurrent(nullptr, &c); r != CUDA_SUCCESS) return r;
  *flags = c->flags;
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuCtxSetFlags(unsigned int flags) {
  ContextObject* c = nullptr;
  if (CUresult r = contextOrCurrent(nullptr, &c); r != CUDA_SUCCESS) return r;
  if (CUresult r = checkContextFlags(flags, "cuCtxSetFlags"); r != CUDA_SUCCESS) return r;
  c->flags = flags;
  return CUDA_SUCCESS;
}

// A context's SM-count execution affinity: the SMs it may use, its partition for a green
// context's context and the whole device otherwise. NVIDIA answers so for an ordinary context even
// where cuDeviceGetExecAffinitySupport reports 0 (observed on driver 580.159.04, H200). Any other
// type is an unsupported affinity, not an invalid value (CU_EXEC_AFFINITY_TYPE_MAX: likewise).
GPUPOOL_DRIVER_API CUresult cuCtxGetExecAffinity(CUexecAffinityParam* affinity,
                                                 CUexecAffinityType type) {
  if (!affinity) return CUDA_ERROR_INVALID_VALUE;
  ContextObject* c = nullptr;
  if (CUresult r = contextOrCurrent(nullptr, &c); r != CUDA_SUCCESS) return r;
  const int raw = rawEnumValue(type);
  if (raw != CU_EXEC_AFFINITY_TYPE_SM_COUNT) return CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY;
  unsigned sms = c->smCount;
  if (sms == 0) {
    sms = static_cast<unsigned>(
        DriverState::get().device(c->device)->attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT));
  }
  *affinity = {};
  affinity->type = CU_EXEC_AFFINITY_TYPE_SM_COUNT;
  affinity->param.smCount.val = sms;
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuCtxGetId(CUcontext h, unsigned long long* id) {
  if (!id) return CUDA_ERROR_INVALID_VALUE;
  ContextObject* c = nullptr;
  if (CUresult r = contextOrCurrent(h, &c); r != CUDA_SUCCESS) return r;
  *id = reinterpret_cast<uintptr_t>(c);
  return CUDA_SUCCESS;
}

namespace {

// cuCtxSetLimit and cuCtxGetLimit: the server's device driver keeps the limit (a GPU needs a
// larger stack before a deeply recursive kernel runs, not after), and it is asked each time: a
// driver may change one itself (it grows the stack for a kernel that needs more).
CUresult contextLimit(CUlimit limit, bool set, size_t value, size_t* held) {
  ContextObject* c = nullptr;
  if (CUresult r = contextOrCurrent(nullptr, &c); r != CUDA_SUCCESS) return r;
  if (CUresult r = DriverState::get().ensureRemote(c); r != CUDA_SUCCESS) return r;
  return c->server->call(
      set ? "cuCtxSetLimit" : "cuCtxGetLimit",
      [&](wire::Request::Builder b) {
        auto l = b.initCtxLimit();
        l.setContext(c->remote);
        l.setLimit(static_cast<uint32_t>(limit));
        l.setSet(set);
        l.setValue(value);
      },
      {},
      [&](wire::Response::Reader reply, ReplyBulk&) {
        if (held) *held = static_cast<size_t>(reply.getValue());
        return CUDA_SUCCESS;
      });
}

}  // namespace

GPUPOOL_DRIVER_API CUresult cuCtxGetLimit(size_t* value, CUlimit limit) {
  if (!value) return CUDA_ERROR_INVALID_VALUE;
  return contextLimit(limit, false, 0, value);
}

GPUPOOL_DRIVER_API CUresult cuCtxSetLimit(CUlimit limit, size_t value) {
  return contextLimit(limit, true, value, nullptr);
}

GPUPOOL_DRIVER_API CUresult cuCtxGetCacheConfig(CUfunc_cache* config) {
  if (!config) return CUDA_ERROR_INVALID_VALUE;
  *config = CU_FUNC_CACHE_PREFER_NONE;
  return requireInit();
}

GPUPOOL_DRIVER_API CUresult cuCtxSetCacheConfig(CUfunc_cache) { return requireInit(); }

// Shared-memory bank size: fixed at four bytes on every GPU since Volta, where NVIDIA's driver
// accepts and ignores a setting (the pool's devices are all sm_75 or newer).
GPUPOOL_DRIVER_API CUresult cuCtxGetSharedMemConfig(CUsharedconfig* config) {
  if (!config) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!DriverState::get().current()) return CUDA_ERROR_INVALID_CONTEXT;
  *config = CU_SHARED_MEM_CONFIG_FOUR_BYTE_BANK_SIZE;
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuCtxSetSharedMemConfig(CUsharedconfig config) {
  if (config > CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!DriverState::get().current()) return CUDA_ERROR_INVALID_CONTEXT;
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuCtxGetStreamPriorityRange(int* least, int* greatest) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (least) *least = kLeastStreamPriority;
  if (greatest) *greatest = kGreatestStreamPriority;
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuCtxResetPersistingL2Cache() { return requireInit(); }
