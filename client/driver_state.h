// Client-side driver state: initialization, the server session, and the objects behind CUDA
// handles.
//
// Every CUDA handle the library gives out (CUcontext, CUstream, CUevent, CUmodule, CUfunction,
// CUlibrary, CUkernel) points at one of the structs below. Each starts with a tag so a handle of
// the wrong kind, or garbage, is recognised and refused instead of being trusted: a handle is only
// dereferenced after it is found in the registry of live objects, so a stale or bogus handle is an
// error and never a wild read.
#pragma once

#include <cuda.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "host_function_fence.h"
#include "protocol/sha256.h"
#include "remote_session.h"
#include "shared_host_memory.h"

namespace gpupool::client {

enum class Tag : uint32_t {
  kDead = 0xdeadbeef,
  kContext = 0x67637478,  // "gctx"
  kStream = 0x67737472,
  kEvent = 0x67657674,
  kModule = 0x676d6f64,
  kFunction = 0x6766756e,
  kLibrary = 0x676c6962,
  kKernel = 0x676b726e,
  kMemPool = 0x676d706c,
  kGraph = 0x67677268,  // client/graph_model.h
  kGraphNode = 0x67676e64,
  kGraphExec = 0x67676578,
  kUserObject = 0x67756f62,  // client/user_object_api.cc
  kLinkState = 0x676c6e6b,   // client/link_api.cc
  kArray = 0x67617272,       // client/array_objects.h
  kMipmappedArray = 0x676d6970,
  kTextureReference = 0x67747266,  // client/texture_reference_api.cc
  kSurfaceReference = 0x67737266,
  kGreenContext = 0x67677278,  // client/green_context_api.cc
  kResourceDesc = 0x67726473,
};

struct GraphNodeObject;

struct GreenContextObject;

struct ContextObject {
  Tag tag = Tag::kContext;
  int device = 0;                   // the pool ordinal the application sees
  RemoteSession* server = nullptr;  // the server that holds the device
  int serverDevice = 0;             // the device's ordinal on that server
  bool primary = false;
  unsigned flags = 0;
  int refcount = 0;  // primary contexts: cuDevicePrimaryCtxRetain count
  int usage = 1;     // cuCtxAttach/cuCtxDetach count of a created context
  // The server's context id; 0 until first needed. Atomic: the host-function fence reads the
  // calling thread's current context without the driver's lock (fenceScopeOf).
  std::atomic<uint64_t> remote{0};
  bool makingRemote = false;  // a thread is creating it (DriverState::ensureRemote)
  // cuStreamSetAttribute values of the context's default streams (see StreamObject::attributes).
  std::map<int, CUstreamAttrValue> defaultStreamAttributes;
  // A green context's context (cuCtxFromGreenCtx): its green context and SM partition; null and 0
  // for an ordinary context, which has the whole device (client/green_context_api.cc).
  GreenContextObject* green = nullptr;
  unsigned smCount = 0;
};

// The stream priorities offered (cuCtxGetStreamPriorityRange): CUDA's range on current GPUs. The
// emu runs streams side by side without priorities; the cuda backend passes them to the driver.
constexpr int kLeastStreamPriority = 0;
constexpr int kGreatestStreamPriority = -5;
inline int clampStreamPriority(int p) {
  return p > kLeastStreamPriority ? kLeastStreamPriority
                                  : (p < kGreatestStreamPriority ? kGreatestStreamPriority : p);
}

struct StreamObject {
  Tag tag = Tag::kStream;
  ContextObject* context = nullptr;
  uint64_t remote = 0;
  unsigned flags = 0;
  int priority = 0;
  // The hints cuStreamSetAttribute accepted (access-policy window, synchronization policy, memory
  // sync domains), by CUstreamAttrID, answered back by cuStreamGetAttribute.
  std::map<int, CUstreamAttrValue> attributes;
  // Stream capture (client/stream_capture.cc, under its lock): the capture sequence this stream
  // takes part in (0: none) and the nodes its next captured operation will depend on.
  uint64_t captureId = 0;
  std::vector<GraphNodeObject*> captureDeps;
  std::vector<CUgraphEdgeData> captureEdgeData;  // zeroed, as many as captureDeps (GetCaptureInfo)
};

struct EventObject {
  Tag tag = Tag::kEvent;
  ContextObject* context = nullptr;
  uint64_t remote = 0;
  unsigned flags = 0;
  // Last recorded in a capturing stream (client/stream_capture.cc): that capture sequence and the
  // nodes a wait on the event depends on. 0 once recorded outside capture.
  uint64_t captureId = 0;
  std::vector<GraphNodeObject*> captureNodes;
};

struct FunctionObject;
struct TextureReferenceObject;

struct ModuleObject {
  Tag tag = Tag::kModule;
  ContextObject* context = nullptr;
  uint64_t remote = 0;
  std::map<std::string, FunctionObject*> functions;
  std::map<std::string, std::pair<CUdeviceptr, size_t>> globals;
  // Texture and surface references handed out, under the lock of client/texture_reference_api.cc.
  std::map<std::string, TextureReferenceObject*> textureReferences;
  // Set once textureReferences first holds one (under that lock), so a launch of a module with
  // none, the usual case, skips the lock.
  std::atomic<bool> hasTextureReferences{false};
  std::map<std::string, bool> managedGlobals;  // which globals are __managed__ variables
};

struct FunctionObject {
  Tag tag = Tag::kFunction;
  ModuleObject* module = nullptr;
  std::string name;
  uint64_t remote = 0;
  std::vector<std::pair<uint32_t, uint32_t>> params;  // (offset, size) per parameter
  std::vector<int32_t> attributes;
  // The server found every texture reference it uses bound (client/texture_reference_api.cc);
  // a reference, once bound, stays bound. Under that file's lock.
  bool referencesBound = false;
  // The pre-4.0 execution API's launch state (client/legacy_launch_api.cc), under the mutex.
  struct LegacyLaunch {
    int block[3] = {0, 0, 0};
    unsigned sharedBytes = 0;
    std::vector<uint8_t> params;  // cuParamSet*; launched up to cuParamSetSize's size
    size_t paramSize = 0;
  } legacy;
  uint32_t paramBytes() const {
    uint32_t end = 0;
    for (auto& [o, s] : params) end = std::max(end, o + s);
    return end;
  }
};

struct KernelObject;

// A context-independent library: the image stays on the client and is loaded into each context's
// server side on first use there.
struct LibraryObject {
  Tag tag = Tag::kLibrary;
  std::shared_ptr<const std::vector<uint8_t>> image;
  protocol::Sha256Digest hash{};
  std::map<ContextObject*, ModuleObject*> modules;
  std::map<std::string, KernelObject*> kernels;
};

struct KernelObject {
  Tag tag = Tag::kKernel;
  LibraryObject* library = nullptr;
  std::string name;
  std::map<ContextObject*, FunctionObject*> functions;
};

// A memory pool (client/mempool_api.cc). A created pool lives in the server context it was
// created in; a device's default pool is each context's own default pool on the server (remote 0).
struct MemPoolObject {
  Tag tag = Tag::kMemPool;
  int device = 0;
  ContextObject* context = nullptr;  // null for a default pool
  uint64_t remote = 0;               // 0: the default pool
};
// A process-wide unique id for a new allocation (CU_POINTER_ATTRIBUTE_BUFFER_ID and
// MEMORY_BLOCK_ID): addresses are reused after a free, ids never are.
inline unsigned long long nextAllocationId() {
  static std::atomic<unsigned long long> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

struct DeviceAllocation {
  size_t size = 0;
  ContextObject* context = nullptr;
  CUmemoryPool pool = nullptr;  // the pool it came from (cuMemAllocAsync), if any
  unsigned long long id = nextAllocationId();
  bool vmm = false;      // adjacent cuMemMap mappings (vmm_api.cc): cuMemUnmap's, never cuMemFree's
  bool managed = false;  // cuMemAllocManaged: also host memory here (managed_memory_api.cc)
  bool moduleVariable = false;  // managed memory of a module's __managed__ variables
  // cuIpcOpenMemHandle opens of this context not yet closed (ipc_api.cc): cuIpcCloseMemHandle's,
  // never cuMemFree's.
  unsigned ipcOpens = 0;
  // The server fixed this range where host memory of this process lies too (module variables, IPC
  // opens; device_address_reservations.h): a pointer into it names both, so the calls that tell
  // host from device memory by the address alone refuse it (DriverState::unifiedIsDevice).
  bool hostMemoryToo = false;
  // CU_POINTER_ATTRIBUTE_SYNC_MEMOPS as cuPointerSetAttribute left it. Synchronous copies and
  // memsets are always fully synchronous here, which is what 1 asks for and allowed under 0.
  bool syncMemops = true;
};

struct HostAllocation {
  size_t size = 0;
  unsigned flags = 0;
  bool registered = false;           // cuMemHostRegister (user memory) rather than cuMemHostAlloc
  ContextObject* context = nullptr;  // current when it was allocated or registered
  unsigned long long id = nextAllocationId();
  // Set when it lives in a memory file its server may map (client/shared_host_memory.h).
  std::shared_ptr<SharedHostFile> file;
};

class DriverState {
 public:
  static DriverState& get();

  // cuInit: connects once; later calls return the first outcome.
  CUresult initialize();
  bool initialized() const { return initResult_ == CUDA_SUCCESS; }
  CUresult initResult() const { return initResult_; }
  int deviceCount() const { return static_cast<int>(routes_.size()); }
  const DeviceSnapshot* device(CUdevice d) const;
  // The lowest driver version among the servers in use.
  int driverVersion() const;
  // The session to the server at `url` (as GPU_POOL_ENDPOINT spells it) once cuInit has connected;
  // null before, or when that server is not in use. Never connects.
  RemoteSession* connectedSession(const std::string& url) const;
  // The server holding pool device d, and d's ordinal there.
  RemoteSession* serverOf(CUdevice d) const;
  int serverDeviceOf(CUdevice d) const;
  ContextObject* primaryContext(CUdevice d);

  // Per-thread current-context stack.
  ContextObject* current();
  std::vector<ContextObject*>& stack();

  // Creates the server side of `ctx` if it does not exist yet.
  CUresult ensureRemote(ContextObject* ctx);
  // Releases the server side of `ctx` (and everything in it), keeping the handle.
  void releaseRemote(ContextObject* ctx);

  std::mutex mutex;  // guards the maps below and object fields mutated after creation
  std::condition_variable remoteMade;  // a context's creation on its server ended (ensureRemote)
  std::map<CUdeviceptr, DeviceAllocation> deviceAllocations;
  std::map<uintptr_t, HostAllocation> hostAllocations;

  // The device allocation that contains [p, p+bytes), if any.
  bool findDevice(CUdeviceptr p, size_t bytes, CUdeviceptr* base = nullptr,
                  DeviceAllocation* info = nullptr);
  bool findHost(const void* p, uintptr_t* base = nullptr, HostAllocation* info = nullptr);
  // For the calls that tell host from device memory by the address alone (cuMemcpy, unified ends
  // of 2D and 3D copies, pointer queries): *isDevice says whether p is in a device allocation, as
  // findDevice. CUDA_ERROR_INVALID_VALUE, naming `call`, where it is in one that is host memory of
  // this process too (DeviceAllocation::hostMemoryToo): either answer could be wrong there.
  CUresult unifiedIsDevice(const char* call, CUdeviceptr p, bool* isDevice,
                           CUdeviceptr* base = nullptr, DeviceAllocation* info = nullptr);

 private:
  DriverState() = default;
  // Where pool ordinal i lives (after CUDA_VISIBLE_DEVICES).
  struct DeviceRoute {
    RemoteSession* server;
    int serverDevice;
  };

  std::once_flag initOnce_;
  CUresult initResult_ = CUDA_ERROR_NOT_INITIALIZED;
  std::atomic<bool> sessionsReady_{false};  // sessions_ is complete (read without initOnce_)
  std::vector<std::unique_ptr<RemoteSession>> sessions_;  // one per reachable server, in order
  std::vector<DeviceRoute> routes_;
  std::vector<ContextObject*> primaries_;
};

// The registry of live objects.
void registerObject(const void* object);
void unregisterObject(const void* object);
// Whether `object` is registered (for the validating casts of other files).
bool isRegistered(const void* object);
// The modules, streams and events each context holds, for what its end must forget. Kept apart
// from the registry, which also names objects freed at exit without being unregistered.
// A child is noted when made and dropped before it is freed.
void noteContextChild(ContextObject* context, const void* child, Tag kind);
void dropContextChild(ContextObject* context, const void* child);
// The children of `kind` that `context` holds now.
std::vector<const void*> contextChildren(ContextObject* context, Tag kind);
// A registered event object for the server's event `remote` of `context` (cuEventCreate,
// cuIpcOpenEventHandle).
CUevent registerEvent(ContextObject* context, uint64_t remote, unsigned flags);

// Validating casts from handles; null when the handle is not a live object of that kind.
ContextObject* asContext(CUcontext h);
StreamObject* asStream(CUstream h);
EventObject* asEvent(CUevent h);
ModuleObject* asModule(CUmodule h);
FunctionObject* asFunction(CUfunction h);
LibraryObject* asLibrary(CUlibrary h);
KernelObject* asKernel(CUkernel h);
MemPoolObject* asMemPool(CUmemoryPool h);

// The host-function fence's scope of work for `ctx` (client/host_function_fence.h).
inline FenceScope fenceScopeOf(const ContextObject* ctx) {
  return ctx ? FenceScope{ctx->server, ctx->remote.load()} : FenceScope::any();
}

// The context an operation runs in: the current one, made remote. Sets *ctx or returns the error.
CUresult currentRemoteContext(ContextObject** ctx);
// The context `h` names (CUDA_ERROR_INVALID_CONTEXT when it names none), or the current one when
// it is null, made remote.
CUresult namedOrCurrentRemoteContext(CUcontext h, ContextObject** ctx);
// Resolves a stream handle (0, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD or an object) to the server's
// stream id, and the context it belongs to. CU_STREAM_PER_THREAD, and 0 inside a
// PerThreadDefaultStream scope, name the calling thread's own default stream in the current
// context: a blocking stream created on first use, as CUDA's per-thread default stream is one.
// `what` names the call in the refusal a capturing stream gets outside a CaptureScope.
CUresult resolveStream(CUstream h, ContextObject** ctx, uint64_t* remote,
                       const char* what = nullptr);
// Creates a stream on the server in `ctx` (made remote) and sets *id to its handle there.
CUresult createRemoteStream(ContextObject* ctx, unsigned flags, int priority, uint64_t* id);
// Creates a stream object in `ctx` (cuStreamCreateWithPriority there; cuGreenCtxStreamCreate).
CUresult createStreamIn(ContextObject* ctx, unsigned flags, int priority, CUstream* out);

// Held by the _ptsz/_ptds entry points (what cudart calls when a program is built with
// --default-stream per-thread): while it lives, stream 0 means the thread's default stream.
class PerThreadDefaultStream {
 public:
  PerThreadDefaultStream();
  ~PerThreadDefaultStream();
  PerThreadDefaultStream(const PerThreadDefaultStream&) = delete;
  PerThreadDefaultStream& operator=(const PerThreadDefaultStream&) = delete;

 private:
  bool outer_;
};

// Returns CUDA_ERROR_NOT_INITIALIZED (or cuInit's failure) unless cuInit succeeded.
CUresult requireInit();

}  // namespace gpupool::client

// Defines `twin`, the per-thread-default-stream form (_ptsz/_ptds) of the entry point `name`:
// `name` itself, called with stream 0 meaning the thread's default stream. `params` is the
// parenthesized parameter list, `args` the parenthesized argument names.
// client/gen/generate_compatibility.py counts the twins it defines.
#define GPUPOOL_TWIN(ret, name, twin, params, args)      \
  GPUPOOL_DRIVER_API ret name params;                    \
  GPUPOOL_DRIVER_API ret twin params {                   \
    ::gpupool::client::PerThreadDefaultStream perThread; \
    return name args;                                    \
  }
