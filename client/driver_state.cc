#include "driver_state.h"

#include <cstdlib>
#include <unordered_set>

#include "client_log.h"
#include "context_hooks.h"

namespace gpupool::client {
namespace {

std::mutex registryMutex;
std::unordered_set<const void*>& registry() {
  static auto* objects = new std::unordered_set<const void*>();  // never destroyed: used at exit
  return *objects;
}

template <typename T>
T* lookup(const void* handle, Tag tag) {
  if (!handle) return nullptr;
  std::lock_guard lock(registryMutex);
  if (!registry().count(handle)) return nullptr;
  T* object = static_cast<T*>(const_cast<void*>(handle));
  return object->tag == tag ? object : nullptr;
}

}  // namespace

void registerObject(const void* object) {
  std::lock_guard lock(registryMutex);
  registry().insert(object);
}

void unregisterObject(const void* object) {
  std::lock_guard lock(registryMutex);
  registry().erase(object);
}

ContextObject* asContext(CUcontext h) { return lookup<ContextObject>(h, Tag::kContext); }
StreamObject* asStream(CUstream h) { return lookup<StreamObject>(h, Tag::kStream); }
EventObject* asEvent(CUevent h) { return lookup<EventObject>(h, Tag::kEvent); }
ModuleObject* asModule(CUmodule h) { return lookup<ModuleObject>(h, Tag::kModule); }
FunctionObject* asFunction(CUfunction h) { return lookup<FunctionObject>(h, Tag::kFunction); }
LibraryObject* asLibrary(CUlibrary h) { return lookup<LibraryObject>(h, Tag::kLibrary); }
KernelObject* asKernel(CUkernel h) { return lookup<KernelObject>(h, Tag::kKernel); }

DriverState& DriverState::get() {
  static auto* state = new DriverState();  // never destroyed: atexit handlers still use it
  return *state;
}

CUresult DriverState::initialize() {
  std::call_once(initOnce_, [this] {
    const char* env = std::getenv("GPU_POOL_ENDPOINT");
    std::string shown = env ? env : "";
    if (!env || !*env) {
      logLine("cannot reach GPU_POOL_ENDPOINT=" + shown +
              ": it is not set; set it to a gpupoold endpoint such as tcp://HOST:7000");
      initResult_ = CUDA_ERROR_NO_DEVICE;
      return;
    }
    std::string error;
    auto endpoints = transport::parseEndpointList(env, &error);
    if (!endpoints) {
      logLine("cannot reach GPU_POOL_ENDPOINT=" + shown + ": " + error);
      initResult_ = CUDA_ERROR_NO_DEVICE;
      return;
    }
    session_ = RemoteSession::connect(endpoints->front(), &error);
    if (!session_) {
      logLine("cannot reach GPU_POOL_ENDPOINT=" + shown + ": " + error);
      initResult_ = CUDA_ERROR_NO_DEVICE;
      return;
    }
    if (session_->devices().empty()) {
      logLine("the server at " + session_->url() + " has no devices");
      initResult_ = CUDA_ERROR_NO_DEVICE;
      return;
    }
    for (size_t i = 0; i < session_->devices().size(); ++i) {
      auto* ctx = new ContextObject();
      ctx->device = static_cast<int>(i);
      ctx->primary = true;
      registerObject(ctx);
      primaries_.push_back(ctx);
    }
    if (logLevel() >= 1) {
      logLine("connected to " + session_->url() + " (" + session_->backendKind() + ", " +
              std::to_string(session_->devices().size()) + " device(s))");
    }
    initResult_ = CUDA_SUCCESS;
  });
  return initResult_;
}

const DeviceSnapshot* DriverState::device(CUdevice d) const {
  if (!session_ || d < 0 || static_cast<size_t>(d) >= session_->devices().size()) return nullptr;
  return &session_->devices()[d];
}

ContextObject* DriverState::primaryContext(CUdevice d) {
  if (d < 0 || static_cast<size_t>(d) >= primaries_.size()) return nullptr;
  return primaries_[d];
}

std::vector<ContextObject*>& DriverState::stack() {
  thread_local std::vector<ContextObject*> contexts;
  return contexts;
}

ContextObject* DriverState::current() {
  auto& s = stack();
  if (s.empty()) return nullptr;
  // A context destroyed elsewhere is no longer current anywhere.
  if (!asContext(reinterpret_cast<CUcontext>(s.back()))) return nullptr;
  return s.back();
}

CUresult DriverState::ensureRemote(ContextObject* ctx) {
  std::lock_guard lock(mutex);
  if (ctx->remote) return CUDA_SUCCESS;
  uint64_t id = 0;
  CUresult r = session().call(
      "cuCtxCreate",
      [&](wire::Request::Builder b) {
        auto c = b.initCtxCreate();
        c.setDevice(ctx->device);
        c.setFlags(ctx->flags);
      },
      {},
      [&](wire::Response::Reader reply, ReplyBulk&) {
        id = reply.getHandle();
        return CUDA_SUCCESS;
      });
  if (r == CUDA_SUCCESS) ctx->remote = id;
  return r;
}

void DriverState::releaseRemote(ContextObject* ctx) {
  uint64_t remote;
  {
    std::lock_guard lock(mutex);
    remote = ctx->remote;
    ctx->remote = 0;
    std::erase_if(deviceAllocations, [ctx](const auto& a) { return a.second.context == ctx; });
  }
  destroyContextLocalStorage(reinterpret_cast<CUcontext>(ctx));
  if (remote) {
    session().call("cuCtxDestroy", [&](wire::Request::Builder b) { b.setCtxDestroy(remote); });
  }
}

bool DriverState::findDevice(CUdeviceptr p, size_t bytes, CUdeviceptr* base,
                             DeviceAllocation* info) {
  std::lock_guard lock(mutex);
  auto it = deviceAllocations.upper_bound(p);
  if (it == deviceAllocations.begin()) return false;
  --it;
  if (p - it->first >= it->second.size) return false;
  if (bytes > it->second.size - (p - it->first)) return false;
  if (base) *base = it->first;
  if (info) *info = it->second;
  return true;
}

bool DriverState::findHost(const void* p, uintptr_t* base, HostAllocation* info) {
  std::lock_guard lock(mutex);
  uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto it = hostAllocations.upper_bound(a);
  if (it == hostAllocations.begin()) return false;
  --it;
  if (a - it->first >= it->second.size) return false;
  if (base) *base = it->first;
  if (info) *info = it->second;
  return true;
}

CUresult requireInit() {
  CUresult r = DriverState::get().initResult();
  return r == CUDA_SUCCESS ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

CUresult currentRemoteContext(ContextObject** ctx) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  ContextObject* c = DriverState::get().current();
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  if (CUresult r = DriverState::get().ensureRemote(c); r != CUDA_SUCCESS) return r;
  *ctx = c;
  return CUDA_SUCCESS;
}

CUresult resolveStream(CUstream h, ContextObject** ctx, uint64_t* remote) {
  if (h == nullptr || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
    *remote = 0;
    return currentRemoteContext(ctx);
  }
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  StreamObject* s = asStream(h);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = DriverState::get().ensureRemote(s->context); r != CUDA_SUCCESS) return r;
  *ctx = s->context;
  *remote = s->remote;
  return CUDA_SUCCESS;
}

CUresult primaryContextHandle(CUdevice dev, CUcontext* out) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  ContextObject* ctx = DriverState::get().primaryContext(dev);
  if (!ctx) return CUDA_ERROR_INVALID_DEVICE;
  *out = reinterpret_cast<CUcontext>(ctx);
  return CUDA_SUCCESS;
}

}  // namespace gpupool::client
