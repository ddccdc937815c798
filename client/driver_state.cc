#include "driver_state.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <tuple>
#include <unordered_set>

#include "client_log.h"
#include "context_events.h"
#include "context_hooks.h"
#include "host_function_fence.h"
#include "managed_memory.h"
#include "pool_token.h"
#include "stream_capture.h"
#include "visible_devices.h"

namespace gpupool::client {
namespace {

std::mutex registryMutex;
std::unordered_set<const void*>& registry() {
  static auto* objects = new std::unordered_set<const void*>();  // never destroyed: used at exit
  return *objects;
}

// Bumped (under registryMutex) whenever an object leaves the registry. A handle this thread found
// registered, with its tag, at the current generation is registered still: nothing has left since.
std::atomic<uint64_t> registryGeneration{0};

// The last handle of each kind this thread looked up and found, with the generation it was found
// at. A launch looks up the same function, stream and context each time; this answers those
// without the process-wide mutex, which every thread's every call would otherwise take.
struct RecentLookup {
  Tag tag = Tag::kDead;
  const void* handle = nullptr;
  uint64_t generation = 0;
};
thread_local RecentLookup recentLookups[8];

// The kinds a launch, a copy or a synchronize looks up have a slot each; the rest share one.
RecentLookup& recentLookupOf(Tag tag) {
  switch (tag) {
    case Tag::kContext:
      return recentLookups[1];
    case Tag::kStream:
      return recentLookups[2];
    case Tag::kEvent:
      return recentLookups[3];
    case Tag::kFunction:
      return recentLookups[4];
    case Tag::kKernel:
      return recentLookups[5];
    case Tag::kModule:
      return recentLookups[6];
    case Tag::kGraphExec:
      return recentLookups[7];
    default:
      return recentLookups[0];
  }
}

template <typename T>
T* lookup(const void* handle, Tag tag) {
  if (!handle) return nullptr;
  RecentLookup& recent = recentLookupOf(tag);
  if (recent.handle == handle && recent.tag == tag &&
      recent.generation == registryGeneration.load(std::memory_order_acquire)) {
    return static_cast<T*>(const_cast<void*>(handle));
  }
  std::lock_guard lock(registryMutex);
  if (!registry().count(handle)) return nullptr;
  T* object = static_cast<T*>(const_cast<void*>(handle));
  if (object->tag != tag) return nullptr;
  recent = {tag, handle, registryGeneration.load(std::memory_order_relaxed)};
  return object;
}

}  // namespace

void registerObject(const void* object) {
  std::lock_guard lock(registryMutex);
  registry().insert(object);
}

void unregisterObject(const void* object) {
  std::lock_guard lock(registryMutex);
  if (registry().erase(object)) registryGeneration.fetch_add(1, std::memory_order_release);
}

namespace {
std::mutex childrenMutex;
std::map<ContextObject*, std::map<const void*, Tag>>& children() {
  static auto* byContext = new std::map<ContextObject*, std::map<const void*, Tag>>();
  return *byContext;  // never destroyed: objects may be dropped at exit
}
}  // namespace

void noteContextChild(ContextObject* context, const void* child, Tag kind) {
  std::lock_guard lock(childrenMutex);
  children()[context][child] = kind;
}

void dropContextChild(ContextObject* context, const void* child) {
  std::lock_guard lock(childrenMutex);
  auto it = children().find(context);
  if (it == children().end()) return;
  it->second.erase(child);
  if (it->second.empty()) children().erase(it);
}

std::vector<const void*> contextChildren(ContextObject* context, Tag kind) {
  std::lock_guard lock(childrenMutex);
  std::vector<const void*> found;
  auto it = children().find(context);
  if (it == children().end()) return found;
  for (auto& [child, childKind] : it->second)
    if (childKind == kind) found.push_back(child);
  return found;
}

bool isRegistered(const void* object) {
  std::lock_guard lock(registryMutex);
  return object && registry().count(object);
}

CUevent registerEvent(ContextObject* context, uint64_t remote, unsigned flags) {
  auto* e = new EventObject();
  e->context = context;
  e->remote = remote;
  e->flags = flags;
  registerObject(e);
  noteContextChild(context, e, Tag::kEvent);
  return reinterpret_cast<CUevent>(e);
}

ContextObject* asContext(CUcontext h) { return lookup<ContextObject>(h, Tag::kContext); }
StreamObject* asStream(CUstream h) { return lookup<StreamObject>(h, Tag::kStream); }
EventObject* asEvent(CUevent h) { return lookup<EventObject>(h, Tag::kEvent); }
ModuleObject* asModule(CUmodule h) { return lookup<ModuleObject>(h, Tag::kModule); }
FunctionObject* asFunction(CUfunction h) { return lookup<FunctionObject>(h, Tag::kFunction); }
LibraryObject* asLibrary(CUlibrary h) { return lookup<LibraryObject>(h, Tag::kLibrary); }
KernelObject* asKernel(CUkernel h) { return lookup<KernelObject>(h, Tag::kKernel); }
MemPoolObject* asMemPool(CUmemoryPool h) { return lookup<MemPoolObject>(h, Tag::kMemPool); }

DriverState& DriverState::get() {
  static auto* state = new DriverState();  // never destroyed: atexit handlers still use it
  return *state;
}

CUresult DriverState::initialize() {
  std::call_once(initOnce_, [this] {
    // A call whose request does not name its context waits for the current context's host
    // functions.
    HostFunctionFence::setThreadScopeSource(
        [] { return fenceScopeOf(DriverState::get().current()); });
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
    // A token file that cannot be read fails here, saying so, rather than as a refused token.
    poolToken(&error);
    if (!error.empty()) {
      logLine(error);
      initResult_ = CUDA_ERROR_NOT_PERMITTED;
      return;
    }
    // Every server of the list contributes its devices, in list order; one that cannot be reached
    // is named and left out while the others serve.
    std::vector<std::pair<uint64_t, uint64_t>> windows;
    CUresult refusal = CUDA_SUCCESS;  // a server that refused us (a bad token) outranks "no device"
    for (const auto& endpoint : *endpoints) {
      auto session = RemoteSession::connect(endpoint, &error, &refusal);
      if (!session) {
        if (endpoints->size() > 1) {
          logLine("cannot reach " + endpoint.url() + " (in GPU_POOL_ENDPOINT=" + shown +
                  "): " + error + "; its devices are left out");
        }
        continue;
      }
      auto window = session->addressWindow();
      bool clash = false;
      for (auto& [base, size] : windows) {
        if (window.second && base < window.first + window.second && window.first < base + size) {
          clash = true;
        }
      }
      if (clash) {
        logLine(endpoint.url() +
                " hands out the same device addresses as another server in GPU_POOL_ENDPOINT; "
                "start them with different --address-slot values. Its devices are left out");
        continue;
      }
      windows.push_back(window);
      if (logLevel() >= 1) {
        logLine("connected to " + session->url() + " (" + session->backendKind() + ", " +
                std::to_string(session->devices().size()) + " device(s))");
      }
      sessions_.push_back(std::move(session));
    }
    if (sessions_.empty()) {
      if (endpoints->size() > 1) {
        logLine("cannot reach GPU_POOL_ENDPOINT=" + shown + ": no server answered");
      } else {
        logLine("cannot reach GPU_POOL_ENDPOINT=" + shown + ": " + error);
      }
      initResult_ =
          refusal == CUDA_ERROR_NOT_PERMITTED ? CUDA_ERROR_NOT_PERMITTED : CUDA_ERROR_NO_DEVICE;
      return;
    }
    std::vector<DeviceRoute> all;
    for (auto& session : sessions_) {
      for (size_t i = 0; i < session->devices().size(); ++i) {
        all.push_back({session.get(), static_cast<int>(i)});
      }
    }
    // Two machines may both have a GPU at the same PCI address; in one pool every device must be
    // findable by its bus id, so a repeated one gets a domain of its own.
    std::set<std::tuple<int, int, int>> seen;
    for (auto& route : all) {
      auto& attrs = route.server->device(route.serverDevice).attributes;
      if (attrs.size() <= CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID) continue;
      while (!seen.insert({attrs[CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID],
                           attrs[CU_DEVICE_ATTRIBUTE_PCI_BUS_ID],
                           attrs[CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID]})
                  .second) {
        attrs[CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID] += 0x100;
      }
    }
    // CUDA_VISIBLE_DEVICES selects and orders pool ordinals (or device UUIDs, "GPU-<hex>"); like
    // CUDA, the list ends at the first entry that names no device.
    if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) {
      std::vector<DeviceUuid> uuids;
      for (const auto& route : all) {
        const CUuuid& u = route.server->devices()[route.serverDevice].uuid;
        DeviceUuid& uuid = uuids.emplace_back();
        std::memcpy(uuid.data(), u.bytes, uuid.size());
      }
      std::vector<DeviceRoute> chosen;
      for (size_t index : visibleDeviceIndices(visible, uuids)) chosen.push_back(all[index]);
      all = chosen;
    }
    routes_ = all;
    if (routes_.empty()) {
      logLine("no devices to use (GPU_POOL_ENDPOINT=" + shown +
              (std::getenv("CUDA_VISIBLE_DEVICES")
                   ? ", CUDA_VISIBLE_DEVICES=" + std::string(std::getenv("CUDA_VISIBLE_DEVICES"))
                   : std::string()) +
              ")");
      initResult_ = CUDA_ERROR_NO_DEVICE;
      return;
    }
    for (size_t i = 0; i < routes_.size(); ++i) {
      auto* ctx = new ContextObject();
      ctx->device = static_cast<int>(i);
      ctx->server = routes_[i].server;
      ctx->serverDevice = routes_[i].serverDevice;
      ctx->primary = true;
      registerObject(ctx);
      primaries_.push_back(ctx);
    }
    initResult_ = CUDA_SUCCESS;
    sessionsReady_.store(true, std::memory_order_release);
  });
  return initResult_;
}

RemoteSession* DriverState::connectedSession(const std::string& url) const {
  if (!sessionsReady_.load(std::memory_order_acquire)) return nullptr;
  for (const auto& s : sessions_) {
    if (s->url() == url) return s.get();
  }
  return nullptr;
}

const DeviceSnapshot* DriverState::device(CUdevice d) const {
  if (d < 0 || static_cast<size_t>(d) >= routes_.size()) return nullptr;
  return &routes_[d].server->devices()[routes_[d].serverDevice];
}

int DriverState::driverVersion() const {
  int version = CUDA_VERSION;
  for (const auto& s : sessions_) version = std::min(version, s->driverVersion());
  return version;
}

RemoteSession* DriverState::serverOf(CUdevice d) const {
  if (d < 0 || static_cast<size_t>(d) >= routes_.size()) return nullptr;
  return routes_[d].server;
}

int DriverState::serverDeviceOf(CUdevice d) const {
  if (d < 0 || static_cast<size_t>(d) >= routes_.size()) return 0;
  return routes_[d].serverDevice;
}

ContextObject* DriverState::primaryContext(CUdevice d) {
  if (d < 0 || static_cast<size_t>(d) >= primaries_.size()) return nullptr;
  return primaries_[d];
}

namespace {
// Set when the thread's context stack is destroyed (the main thread's at exit(), before cudart's
// exit handlers release their contexts): a bool needs no destructor, so it is readable after.
thread_local bool contextStackGone = false;
struct ContextStack {
  std::vector<ContextObject*> contexts;
  ~ContextStack() { contextStackGone = true; }
};
}  // namespace

std::vector<ContextObject*>& DriverState::stack() {
  thread_local ContextStack stack;
  return stack.contexts;
}

ContextObject* DriverState::current() {
  if (contextStackGone) return nullptr;  // no context is current any more
  auto& s = stack();
  if (s.empty()) return nullptr;
  // A context destroyed elsewhere is no longer current anywhere.
  if (!asContext(reinterpret_cast<CUcontext>(s.back()))) return nullptr;
  return s.back();
}

CUresult DriverState::ensureRemote(ContextObject* ctx) {
  // Made, and not released since: no lock needed to know (every launch asks).
  if (ctx->remote.load(std::memory_order_acquire)) return CUDA_SUCCESS;
  // The creating call runs without the lock: a call may wait at the host-function fence for a
  // pending host function, and placing one takes this lock (resolveStream). Inside gpupoold (our
  // library as the cuda backend's driver) that wait, under the lock, stopped a session's thread
  // placing its next host function before it could read the release the wait was for.
  std::unique_lock lock(mutex);
  remoteMade.wait(lock, [&] { return !ctx->makingRemote; });  // another thread's creation
  if (ctx->remote) return CUDA_SUCCESS;
  ctx->makingRemote = true;
  lock.unlock();
  uint64_t id = 0;
  uint64_t staleContext = 0;  // a full-device context an old server made for a green one
  CUresult r = ctx->server->call(
      "cuCtxCreate",
      [&](wire::Request::Builder b) {
        auto c = b.initCtxCreate();
        c.setDevice(ctx->serverDevice);
        c.setFlags(ctx->flags);
        c.setSmCount(ctx->smCount);
      },
      {},
      [&](wire::Response::Reader reply, ReplyBulk&) {
        if (ctx->smCount == 0) {
          id = reply.getHandle();
          return CUDA_SUCCESS;
        }
        // A green context comes back with its SM count; a server that predates green contexts
        // answers with a plain handle to a full-device context, which is not what was asked.
        if (reply.isGlobal() && reply.getGlobal().getBytes() == ctx->smCount) {
          id = reply.getGlobal().getAddress();
          return CUDA_SUCCESS;
        }
        if (reply.isHandle()) staleContext = reply.getHandle();
        return refuseCall(CUDA_ERROR_NOT_SUPPORTED,
                          "cuGreenCtxCreate: the server at " + ctx->server->url() +
                              " does not make green contexts (it predates them); upgrade gpupoold");
      });
  lock.lock();
  if (r == CUDA_SUCCESS) ctx->remote = id;
  ctx->makingRemote = false;
  lock.unlock();
  remoteMade.notify_all();
  if (staleContext) {
    ctx->server->call("cuCtxDestroy",
                      [&](wire::Request::Builder b) { b.setCtxDestroy(staleContext); });
  }
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
  dropManagedAllocationsOf(ctx);
  destroyContextLocalStorage(reinterpret_cast<CUcontext>(ctx));
  forgetCoredumpSettings(reinterpret_cast<CUcontext>(ctx));
  forgetContextModules(reinterpret_cast<CUcontext>(ctx));
  forgetContextStreamsAndEvents(reinterpret_cast<CUcontext>(ctx));
  if (remote) {
    // The destroy drains the context: its host functions first (ctx->remote is 0 by now).
    auto fence =
        HostFunctionFence::hold(HostFunctionFence::Work::kCall, FenceScope{ctx->server, remote});
    ctx->server->call("cuCtxDestroy", [&](wire::Request::Builder b) { b.setCtxDestroy(remote); });
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

CUresult DriverState::unifiedIsDevice(const char* call, CUdeviceptr p, bool* isDevice,
                                      CUdeviceptr* base, DeviceAllocation* info) {
  DeviceAllocation found;
  CUdeviceptr foundBase = 0;
  *isDevice = findDevice(p, 0, &foundBase, &found);
  if (*isDevice && found.hostMemoryToo) {
    char address[24];
    std::snprintf(address, sizeof address, "%#llx", static_cast<unsigned long long>(p));
    return refuseCall(CUDA_ERROR_INVALID_VALUE,
                      std::string(call) + ": " + address +
                          " is device memory the server placed where this process has host "
                          "memory too, so the address alone cannot say which is meant; use the "
                          "call that names the memory type (cuMemcpyHtoD, cuMemcpyDtoH, ...)");
  }
  if (base) *base = foundBase;
  if (info) *info = found;
  return CUDA_SUCCESS;
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

CUresult namedOrCurrentRemoteContext(CUcontext h, ContextObject** ctx) {
  if (!h) return currentRemoteContext(ctx);
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  ContextObject* c = asContext(h);
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  if (CUresult r = DriverState::get().ensureRemote(c); r != CUDA_SUCCESS) return r;
  *ctx = c;
  return CUDA_SUCCESS;
}

namespace {

thread_local bool nullIsPerThread = false;

// The calling thread's default stream in `ctx`, created on first use. Keyed by the context's
// server handle too, so a context object reused at the same address gets a stream of its own.
CUresult perThreadStream(ContextObject* ctx, uint64_t* remote) {
  struct Entry {
    ContextObject* context;
    uint64_t remoteContext;
    uint64_t stream;
  };
  thread_local std::vector<Entry> streams;
  for (const Entry& e : streams) {
    if (e.context == ctx && e.remoteContext == ctx->remote) {
      *remote = e.stream;
      return CUDA_SUCCESS;
    }
  }
  if (CUresult r = createRemoteStream(ctx, 0, 0, remote); r != CUDA_SUCCESS) return r;
  streams.push_back(Entry{ctx, ctx->remote, *remote});
  if (CUresult r = contextStreamCreated(ctx, *remote); r != CUDA_SUCCESS) return r;
  return CUDA_SUCCESS;
}

}  // namespace

PerThreadDefaultStream::PerThreadDefaultStream() : outer_(nullIsPerThread) {
  nullIsPerThread = true;
}

PerThreadDefaultStream::~PerThreadDefaultStream() { nullIsPerThread = outer_; }

CUresult createRemoteStream(ContextObject* ctx, unsigned flags, int priority, uint64_t* id) {
  if (CUresult r = DriverState::get().ensureRemote(ctx); r != CUDA_SUCCESS) return r;
  return ctx->server->call(
      "cuStreamCreate",
      [&](wire::Request::Builder b) {
        auto s = b.initStreamCreate();
        s.setContext(ctx->remote);
        s.setFlags(flags);
        s.setPriority(priority);
      },
      {},
      [&](wire::Response::Reader reply, ReplyBulk&) {
        *id = reply.getHandle();
        return CUDA_SUCCESS;
      });
}

CUresult resolveStream(CUstream h, ContextObject** ctx, uint64_t* remote, const char* what) {
  if (h == CU_STREAM_PER_THREAD || (h == nullptr && nullIsPerThread)) {
    if (CUresult r = currentRemoteContext(ctx); r != CUDA_SUCCESS) return r;
    HostFunctionFence::await(HostFunctionFence::Work::kBlockingStream, fenceScopeOf(*ctx));
    return perThreadStream(*ctx, remote);
  }
  if (h == nullptr || h == CU_STREAM_LEGACY) {
    *remote = 0;
    if (CUresult r = currentRemoteContext(ctx); r != CUDA_SUCCESS) return r;
    if (CUresult r = legacyStreamUse(*ctx); r != CUDA_SUCCESS) return r;
    HostFunctionFence::await(HostFunctionFence::Work::kLegacyStream, fenceScopeOf(*ctx));
    return CUDA_SUCCESS;
  }
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  StreamObject* s = asStream(h);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = capturingStreamUse(s, what); r != CUDA_SUCCESS) return r;
  HostFunctionFence::await((s->flags & CU_STREAM_NON_BLOCKING)
                               ? HostFunctionFence::Work::kNonBlockingStream
                               : HostFunctionFence::Work::kBlockingStream,
                           fenceScopeOf(s->context));
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
