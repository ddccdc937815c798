// The interface the server's request handlers call. Two implementations: `emu` (a CPU device that
// interprets PTX; server/backends/emu) and `cuda` (the real driver, dlopened;
// server/backends/cuda).
//
// Contract shared by both:
// - Every call returns a Status whose code is the CUresult a real driver would give.
// - A BackendContext is created per client context and owns everything created through it (memory,
//   modules, streams, events). Destroying it releases all of that, whatever state it is in.
// - Handles (modules, functions, streams, events) are opaque 64-bit ids minted by the context.
//   Every handle and device address a caller passes is checked against what *this* context owns:
//   a foreign or bogus one gets CUDA_ERROR_INVALID_HANDLE / CUDA_ERROR_INVALID_VALUE, never
//   access.
// - Stream id 0 is the context's default (legacy) stream.
// - Threads: one thread at a time makes the context's other calls (the session serializes them,
//   though not always on the same thread: a waiter answers the request it waited for); the
//   waits (`streamSynchronize`, `eventSynchronize`, `synchronize`) may in addition run on other
//   threads at the same time, any number of them, concurrently with those calls and with each
//   other. A wait on a stream or event that another thread destroys meanwhile returns (success or
//   CUDA_ERROR_INVALID_HANDLE), never touches freed memory. `takeDeviceOutput()` and `cancel()`
//   are safe from any thread. The context is destroyed only once no wait on it is running (its
//   owner joins its waiters first). Backend itself is shared by all sessions and is thread-safe.
#pragma once

#include <cuda.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/cuda_array_layout.h"
#include "common/status.h"
#include "common/tensor_map_request.h"
#include "common/texture_descriptor.h"

namespace gpupool::server {

using gpupool::Status;

struct DeviceDescription {
  std::string name;
  std::array<uint8_t, 16> uuid{};
  int32_t pciDomain = 0, pciBus = 0, pciDevice = 0;
  uint64_t totalMemory = 0;
  std::vector<int32_t> attributes;  // index = CUdevice_attribute
};

struct ParamLayout {
  uint32_t offset = 0;
  uint32_t size = 0;
};

struct FunctionDescription {
  uint64_t handle = 0;
  std::vector<ParamLayout> params;  // in parameter order
  std::vector<int32_t> attributes;  // index = CUfunction_attribute
};

struct LaunchShape {
  std::array<uint32_t, 3> grid{1, 1, 1};
  std::array<uint32_t, 3> block{1, 1, 1};
  uint32_t sharedBytes = 0;
  // cuLaunchCooperativeKernel: every block resident at once (the grid may sync as a whole), or
  // CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE when the device cannot hold them all.
  bool cooperative = false;
  // A thread-block cluster of this shape (the grid a multiple of it), or {1, 1, 1}: none. Only
  // devices that report CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH run clusters.
  std::array<uint32_t, 3> cluster{1, 1, 1};
  bool clustered() const { return cluster[0] * cluster[1] * cluster[2] > 1; }
};

// A 2D copy. A host end is a packed buffer (pitch = widthBytes is allowed) owned by the caller.
struct Copy2D {
  bool srcIsDevice = true, dstIsDevice = true;
  uint64_t srcDevice = 0, dstDevice = 0;
  const void* srcHost = nullptr;
  void* dstHost = nullptr;
  uint64_t srcPitch = 0, dstPitch = 0;
  uint64_t widthBytes = 0, height = 0;
};

// One end of a 3D copy: host memory (packed or pitched, owned by the caller), device memory
// (`pitch` bytes per row, `height` rows per slice) or an array (a handle the context minted; the
// region starts at byte `xBytes` of row `y` of slice `z`).
struct CopyEnd3D {
  enum class Kind { kHost, kDevice, kArray } kind = Kind::kDevice;
  uint64_t handle = 0;  // device address or array handle
  const void* srcHost = nullptr;
  void* dstHost = nullptr;
  uint64_t xBytes = 0, y = 0, z = 0, pitch = 0, height = 0;
};
struct Copy3D {
  CopyEnd3D src, dst;
  uint64_t widthBytes = 0, height = 0, depth = 0;
};

// One stream memory operation (a CUstreamBatchMemOpParams the handler has checked): a wait holds
// the stream until the 32- or 64-bit value at `address` meets the condition `flags` names
// (CU_STREAM_WAIT_VALUE_GEQ/EQ/AND/NOR); a write stores `value` there after the stream's earlier
// work; a barrier (`flags`: CUstreamMemoryBarrier_flags) orders the stream's memory accesses.
struct StreamMemOp {
  CUstreamBatchMemOpType kind = CU_STREAM_MEM_OP_WAIT_VALUE_32;
  uint64_t address = 0;
  uint64_t value = 0;
  unsigned flags = 0;

  bool isWait() const {
    return kind == CU_STREAM_MEM_OP_WAIT_VALUE_32 || kind == CU_STREAM_MEM_OP_WAIT_VALUE_64;
  }
  // A 64-bit wait or write (else the value at `address` is 32 bits wide).
  bool wide() const {
    return kind == CU_STREAM_MEM_OP_WAIT_VALUE_64 || kind == CU_STREAM_MEM_OP_WRITE_VALUE_64;
  }
};

// One node of an executable graph, as the client's cuGraphInstantiate left it for the server and
// graph_handlers.cc checked it: its kind, what it does, and the indices of the earlier nodes it
// depends on (always smaller than its own). A copy is device to device: `depth` slices of
// `height` rows of `widthBytes`.
struct GraphNodeDescription {
  enum class Kind {
    kEmpty,
    kKernel,
    kMemset,
    kCopy,
    kEventRecord,
    kEventWait,
    kMemOps,
    kConditional
  };
  Kind kind = Kind::kEmpty;
  std::vector<uint32_t> dependencies;
  // kKernel
  uint64_t function = 0;
  LaunchShape shape;
  std::vector<uint8_t> params;
  // kMemset (`dst`, `value` of `elementSize` bytes over `height` rows of `width` elements) and
  // kCopy (`src` to `dst`, pitches and slices in bytes).
  uint64_t dst = 0, src = 0;
  uint32_t value = 0;
  unsigned elementSize = 1;
  uint64_t width = 0, height = 1, depth = 1;
  uint64_t dstPitch = 0, srcPitch = 0, dstSlice = 0, srcSlice = 0;
  // kEventRecord, kEventWait
  uint64_t event = 0;
  // kMemOps
  std::vector<StreamMemOp> memOps;
  // kConditional: the handle (BackendContext::graphConditionalCreate), the
  // CUgraphConditionalNodeType and the bodies, each a graph in the same form (dependencies index
  // its own list).
  uint64_t conditionHandle = 0;
  unsigned conditionType = 0;
  std::vector<std::vector<GraphNodeDescription>> bodies;
};

// A graph a backend built with its device's own graph support (a CUgraphExec on the cuda
// backend), so that independent branches overlap on the device. Destroyed before its context.
class BackendGraph {
 public:
  virtual ~BackendGraph() = default;
  // Queues the whole graph on `stream` of its context. Handles it names (functions, events) must
  // still exist: CUDA_ERROR_INVALID_HANDLE otherwise. Device ranges are the caller's to check.
  virtual Status launch(uint64_t stream) = 0;
};

// Decides when a context's kernels may start on their device (the pool's scheduler) and hears how
// long each ran (metering). Called on whatever thread runs the kernel; enter() may block.
// One cuLinkAddData / cuLinkAddFile input.
struct LinkInput {
  CUjitInputType type = CU_JIT_INPUT_PTX;
  std::string name;                // for the logs
  std::span<const uint8_t> bytes;  // as the client had them (PTX text may lack its NUL)
};

// What cuLinkComplete produced: `result` is the link's CUresult (the call to link() itself fails
// only when the backend cannot link at all); `image` loads through moduleLoad on the same backend.
struct LinkOutcome {
  CUresult result = CUDA_SUCCESS;
  std::string infoLog, errorLog;
  std::vector<uint8_t> image;
};

// An allocation exported through CUDA IPC (cuIpcGetMemHandle): which memory it lives in (the
// backend's own identity for its device's memory) and which allocation, by base, size and a
// generation that tells it from a later allocation at the same address.
struct IpcExportedAllocation {
  const void* memorySpace = nullptr;
  uint64_t address = 0;
  uint64_t bytes = 0;
  uint64_t generation = 0;
};

// A physical allocation exported as a shareable handle (cuMemExportToShareableHandle): what an
// importing context of the same device needs to reach the same memory. `state` is the backend's
// (the emu's memfd, the driver's file descriptor) and keeps the memory alive while it is held.
struct VmmExportedAllocation {
  const void* memorySpace = nullptr;  // the device memory it lives in
  uint64_t bytes = 0;
  std::shared_ptr<void> state;
};

// An event exported through CUDA IPC (cuIpcGetEventHandle): the backend's shared state of it, which
// an opening context's event then names too (records and waits of either reach the other).
struct IpcExportedEvent {
  std::shared_ptr<void> state;
};

class LaunchGate {
 public:
  virtual ~LaunchGate() = default;
  // Blocks until a kernel of this context may start.
  virtual void enter() = 0;
  // The kernel admitted by this thread's last enter() ran for `seconds` on the device.
  virtual void leave(double seconds) = 0;
};

class BackendContext {
 public:
  virtual ~BackendContext() = default;

  // cuCtxSetLimit (when `set`, with `value`) and cuCtxGetLimit: *held is the value the context
  // holds afterwards. CUDA_ERROR_UNSUPPORTED_LIMIT for a limit the device does not have or that
  // cannot be set.
  virtual Status limit(uint32_t which, bool set, uint64_t value, uint64_t* held) = 0;

  // Memory.
  virtual Status memAlloc(uint64_t bytes, uint64_t* address) = 0;
  virtual Status memFree(uint64_t address) = 0;
  virtual Status memGetInfo(uint64_t* freeBytes, uint64_t* totalBytes) = 0;
  virtual Status memGetAddressRange(uint64_t address, uint64_t* base, uint64_t* bytes) = 0;
  virtual uint64_t memoryUsed() const = 0;
  // The most memoryUsed() has been since the context was created (NVML's accounting).
  virtual uint64_t memoryPeak() const = 0;

  // Stream-ordered allocation from memory pools (cuMemAllocFromPoolAsync and the cuMemPool*
  // calls). Pool 0 is the default pool of the context's device; others are minted by
  // memPoolCreate and belong to this context. memAllocAsync returns an address that belongs to
  // the allocation from then on (CUDA lets memory exist before the stream reaches the allocation);
  // memFreeAsync returns the block to its pool only once `stream` reaches the free, so work queued
  // before it may still use it. Attributes are CUmemPool_attribute; values are the driver's (the
  // int policies as 0/1). Backends without pools answer CUDA_ERROR_NOT_SUPPORTED.
  virtual Status memPoolCreate(uint64_t* /*pool*/) { return noPools(); }
  virtual Status memPoolDestroy(uint64_t /*pool*/) { return noPools(); }
  virtual Status memAllocAsync(uint64_t /*pool*/, uint64_t /*bytes*/, uint64_t /*stream*/,
                               uint64_t* /*address*/) {
    return noPools();
  }
  virtual Status memFreeAsync(uint64_t /*address*/, uint64_t /*stream*/) { return noPools(); }
  virtual Status memPoolTrimTo(uint64_t /*pool*/, uint64_t /*minBytesToKeep*/) { return noPools(); }
  virtual Status memPoolGetAttribute(uint64_t /*pool*/, int /*attribute*/, uint64_t* /*value*/) {
    return noPools();
  }
  virtual Status memPoolSetAttribute(uint64_t /*pool*/, int /*attribute*/, uint64_t /*value*/) {
    return noPools();
  }
  // Bytes this context's pools hold idle (reserved, not in use), which the tenant is charged for.
  virtual uint64_t memPoolIdleBytes() { return 0; }

  // Virtual memory management (cuMemCreate, cuMemAddressReserve, cuMemMap, cuMemSetAccess...),
  // on the context's device. Handles and reservations belong to this context. Sizes, offsets and
  // addresses are multiples of the granularity (2 MiB). A physical allocation is freed once it is
  // released and unmapped everywhere: vmmRelease and vmmUnmap add the bytes so freed to `freed`
  // (the tenant's quota gets them back). A mapping is unreachable until vmmSetAccess makes it
  // readable and writable. Backends without it answer CUDA_ERROR_NOT_SUPPORTED.
  // `shareable`: the allocation may be exported (requestedHandleTypes POSIX_FILE_DESCRIPTOR).
  virtual Status vmmCreate(uint64_t /*bytes*/, bool /*shareable*/, uint64_t* /*handle*/) {
    return noVmm();
  }
  virtual Status vmmRetain(uint64_t /*address*/, uint64_t* /*handle*/) { return noVmm(); }
  virtual Status vmmRelease(uint64_t /*handle*/, uint64_t* /*freed*/) { return noVmm(); }
  virtual Status vmmReserve(uint64_t /*bytes*/, uint64_t /*alignment*/, uint64_t /*hint*/,
                            uint64_t* /*address*/) {
    return noVmm();
  }
  virtual Status vmmFree(uint64_t /*address*/, uint64_t /*bytes*/) { return noVmm(); }
  virtual Status vmmMap(uint64_t /*address*/, uint64_t /*bytes*/, uint64_t /*handle*/,
                        uint64_t /*offset*/) {
    return noVmm();
  }
  virtual Status vmmUnmap(uint64_t /*address*/, uint64_t /*bytes*/, uint64_t* /*freed*/) {
    return noVmm();
  }
  virtual Status vmmSetAccess(uint64_t /*address*/, uint64_t /*bytes*/, bool /*readWrite*/) {
    return noVmm();
  }
  virtual Status vmmGetAccess(uint64_t /*address*/, bool* /*readWrite*/) { return noVmm(); }
  // Shareable handles (server/ipc_memory_registry.h keeps the tokens). vmmExport names physical
  // allocation `handle` of this context, made shareable (CUDA_ERROR_INVALID_VALUE otherwise, as
  // the driver answers). vmmImport gives this context a new handle, one reference, to the same
  // physical memory (CUDA_ERROR_INVALID_DEVICE when it lives on another device); it is not
  // charged again: the charge stays with the creating context.
  virtual Status vmmExport(uint64_t /*handle*/, VmmExportedAllocation* /*exported*/) {
    return noVmm();
  }
  virtual Status vmmImport(const VmmExportedAllocation& /*exported*/, uint64_t* /*handle*/) {
    return noVmm();
  }

  // CUDA IPC memory (server/ipc_memory_registry.h keeps the tokens). ipcExport names the memAlloc
  // allocation that starts at `address` (CUDA_ERROR_INVALID_VALUE for any other address, pool
  // memory or a module's global). ipcOpen maps an allocation another context exported (any
  // session's, on the same device: CUDA_ERROR_INVALID_DEVICE otherwise) into this context and
  // sets *address to where this context reaches it; opening it again counts one more open. The
  // memory lives until its owner has freed it and every context that opened it has closed it (or
  // is gone). ipcClose drops one open of `address` (CUDA_ERROR_INVALID_VALUE if this context did
  // not open it) once this context's work is done. Backends without it answer
  // CUDA_ERROR_NOT_SUPPORTED.
  virtual Status ipcExport(uint64_t /*address*/, IpcExportedAllocation* /*exported*/) {
    return noIpc();
  }
  virtual Status ipcOpen(const IpcExportedAllocation& /*exported*/, uint64_t* /*address*/) {
    return noIpc();
  }
  virtual Status ipcClose(uint64_t /*address*/) { return noIpc(); }
  // CUDA IPC events: `event` (created with CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING) for
  // another session's context to open as an event of its own.
  virtual Status ipcExportEvent(uint64_t /*event*/, IpcExportedEvent* /*exported*/) {
    return noIpcEvents();
  }
  virtual Status ipcOpenEvent(const IpcExportedEvent& /*exported*/, uint64_t* /*event*/) {
    return noIpcEvents();
  }

  // Pinned host memory that a client on this host shares as a memory file
  // (server/shared_host_files.h), mapped into this context's device addresses so its kernels reach
  // it (CU_MEMHOSTALLOC_DEVICEMAP): `bytes` a multiple of kHostFileMapGranularity; *address where.
  // Unmapped by hostFileUnmap, or with the context. CUDA_ERROR_NOT_SUPPORTED where the backend
  // cannot (Backend::mapsHostFiles() says so in advance).
  static constexpr uint64_t kHostFileMapGranularity = 4096;
  virtual Status hostFileMap(const std::shared_ptr<int>& /*memfd*/, uint64_t /*bytes*/,
                             uint64_t* /*address*/) {
    return Status::error(CUDA_ERROR_NOT_SUPPORTED,
                         "this backend cannot map client host memory into device addresses");
  }
  virtual Status hostFileUnmap(uint64_t /*address*/, uint64_t /*bytes*/) {
    return Status::error(CUDA_ERROR_NOT_SUPPORTED,
                         "this backend cannot map client host memory into device addresses");
  }

  // Copies. Synchronous ones (async=false, and every device→host copy) are complete, in stream
  // order, when they return. An async host→device copy has consumed `src` when it returns.
  virtual Status copyHostToDevice(uint64_t dst, const void* src, uint64_t bytes, uint64_t stream,
                                  bool async) = 0;
  virtual Status copyDeviceToHost(void* dst, uint64_t src, uint64_t bytes, uint64_t stream) = 0;
  virtual Status copyDeviceToDevice(uint64_t dst, uint64_t src, uint64_t bytes, uint64_t stream,
                                    bool async) = 0;
  virtual Status copy2D(const Copy2D& copy, uint64_t stream, bool async) = 0;
  // CUDA arrays (common/cuda_array_layout.h). arrayCreate makes a plain array (levels = 0) or a
  // mipmapped one, whose levels arrayLevel names (destroyed with it); the shape was checked by
  // checkArrayShape. copy3D checks that array regions lie inside their arrays.
  virtual Status arrayCreate(const ArrayShape& /*shape*/, unsigned /*levels*/,
                             uint64_t* /*array*/) {
    return noArrays();
  }
  // *bytes: the device memory the array held (given back to the tenant's quota).
  virtual Status arrayDestroy(uint64_t /*array*/, uint64_t* /*bytes*/) { return noArrays(); }
  virtual Status arrayLevel(uint64_t /*mipmapped*/, unsigned /*level*/, uint64_t* /*array*/) {
    return noArrays();
  }
  virtual Status copy3D(const Copy3D& /*copy*/, uint64_t /*stream*/, bool /*async*/) {
    return noArrays();
  }
  // Texture and surface objects (common/texture_descriptor.h), checked by
  // checkTextureDescription; *handle is the value kernels receive as their CUtexObject or
  // CUsurfObject. Destroy names the object and its kind.
  virtual Status textureCreate(const TextureDescription& /*desc*/, uint64_t* /*handle*/) {
    return noTextures();
  }
  virtual Status textureDestroy(uint64_t /*handle*/, bool /*surface*/) { return noTextures(); }
  // Tensor maps (cuTensorMapEncode*, cuTensorMapReplaceAddress): the backend's own 128-byte
  // encoding of `request` into *map (the driver's on the cuda backend, the emu's on the emu), and
  // the address of such a map replaced, with the argument checks cuda.h documents.
  virtual Status tensorMapEncode(const TensorMapRequest& /*request*/, uint8_t* /*map*/) {
    return noTensorMaps();
  }
  virtual Status tensorMapReplaceAddress(uint8_t* /*map*/, uint64_t /*address*/) {
    return noTensorMaps();
  }
  // Texture and surface references (`.global .texref` / `.surfref` of a module): whether `module`
  // has one named `name` of that kind (CUDA_ERROR_NOT_FOUND otherwise), and binding it to the
  // resource and sampler of `desc` (checked as for objects) for the launches that follow.
  virtual Status textureReferenceFind(uint64_t /*module*/, const std::string& /*name*/,
                                      bool /*surface*/) {
    return noTextures();
  }
  virtual Status textureReferenceBind(uint64_t /*module*/, const std::string& /*name*/,
                                      const TextureDescription& /*desc*/) {
    return noTextures();
  }
  // Before a launch of `function`: CUDA_ERROR_INVALID_VALUE, naming the reference, when one it
  // uses is not bound. A backend that cannot tell leaves it to the launch.
  virtual Status textureReferencesBound(uint64_t /*function*/) { return Status::success(); }
  // Sets `height` rows of `width` elements of elementSize (1, 2, 4) bytes, rows `pitch` bytes
  // apart.
  virtual Status memset(uint64_t dst, uint32_t value, unsigned elementSize, uint64_t width,
                        uint64_t height, uint64_t pitch, uint64_t stream, bool async) = 0;

  // Modules: `image` is a fatbin, cubin or NUL-terminated PTX text.
  virtual Status moduleLoad(std::span<const uint8_t> image, uint64_t* module) = 0;
  virtual Status moduleUnload(uint64_t module) = 0;
  virtual Status moduleGetFunction(uint64_t module, const std::string& name,
                                   FunctionDescription* function) = 0;
  virtual Status moduleGetGlobal(uint64_t module, const std::string& name, uint64_t* address,
                                 uint64_t* bytes) = 0;
  // When the global of `module` at `address` (as moduleGetGlobal gave it) is a __managed__
  // variable: the whole 4 KiB pages of the managed memory that holds it, [*base, *base + *bytes),
  // which the client mirrors (server/handlers/managed_memory_handlers.cc). *bytes = 0 for an
  // ordinary global.
  virtual Status moduleManagedRange(uint64_t /*module*/, uint64_t /*address*/, uint64_t* base,
                                    uint64_t* bytes) {
    *base = 0;
    *bytes = 0;
    return Status::success();
  }
  // The module's kernels (entry functions), as cuModuleEnumerateFunctions lists them.
  virtual Status moduleFunctionNames(uint64_t module, std::vector<std::string>* names) = 0;
  // Links `inputs` as cuLinkCreate / cuLinkAddData / cuLinkComplete would, with the scalar
  // CUjit_options {option, value} given.
  virtual Status link(std::span<const LinkInput> inputs,
                      std::span<const std::pair<CUjit_option, uint64_t>> options,
                      LinkOutcome* outcome) = 0;
  // What cuLinkAddData checks of one input before the link: that it compiles on its own (PTX
  // syntax and semantics; externs may stay undefined) and suits the device.
  virtual Status linkCheckInput(const LinkInput& input,
                                std::span<const std::pair<CUjit_option, uint64_t>> options,
                                LinkOutcome* outcome) = 0;

  // Kernels. `params` is the packed parameter block laid out as FunctionDescription::params.
  virtual Status launch(uint64_t function, const LaunchShape& shape, uint64_t stream,
                        std::span<const uint8_t> params) = 0;
  virtual Status funcSetAttribute(uint64_t function, int attribute, int value) = 0;
  virtual Status occupancyMaxActiveBlocks(uint64_t function, int blockSize,
                                          uint64_t dynamicSharedBytes, unsigned flags,
                                          int* numBlocks) = 0;
  // For a launch of `shape` (its cluster included): the most clusters that can be active at once
  // (cuOccupancyMaxActiveClusters), or with `potentialSize` the largest cluster size it could use
  // (cuOccupancyMaxPotentialClusterSize). Devices without clusters answer
  // CUDA_ERROR_NOT_SUPPORTED.
  virtual Status occupancyClusters(uint64_t /*function*/, const LaunchShape& /*shape*/,
                                   bool /*potentialSize*/, int* /*value*/) {
    return Status::error(CUDA_ERROR_NOT_SUPPORTED,
                         "thread-block clusters are not served by this device (it reports "
                         "CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH 0)");
  }

  // Streams and events.
  virtual Status streamCreate(unsigned flags, int priority, uint64_t* stream) = 0;
  virtual Status streamDestroy(uint64_t stream) = 0;
  virtual Status streamSynchronize(uint64_t stream) = 0;
  virtual Status streamQuery(uint64_t stream) = 0;  // CUDA_SUCCESS or CUDA_ERROR_NOT_READY
  virtual Status streamWaitEvent(uint64_t stream, uint64_t event) = 0;
  virtual Status eventCreate(unsigned flags, uint64_t* event) = 0;
  virtual Status eventDestroy(uint64_t event) = 0;
  virtual Status eventRecord(uint64_t event, uint64_t stream) = 0;
  virtual Status eventSynchronize(uint64_t event) = 0;
  virtual Status eventQuery(uint64_t event) = 0;  // CUDA_SUCCESS or CUDA_ERROR_NOT_READY
  virtual Status eventElapsedTime(uint64_t start, uint64_t end, float* milliseconds) = 0;
  // Queues `work` on `stream`: it runs on a thread of the backend's (never the caller's) once the
  // stream's earlier work is done, and the stream's later work waits until it returns. It runs even
  // when the context has failed or is cancelled, so whatever it releases is released
  // (server/host_gates.h). CUDA_ERROR_NOT_SUPPORTED where the backend cannot.
  virtual Status streamHostWork(uint64_t /*stream*/, std::function<void()> /*work*/) {
    return Status::error(CUDA_ERROR_NOT_SUPPORTED, "this backend cannot run host work in a stream");
  }

  // Queues `ops` on `stream`, in order (cuStreamBatchMemOp). A wait holds that stream only, never
  // the caller, other streams or other contexts, and ends when the value is met or the context is
  // cancelled. Addresses must lie in this context's memory (CUDA_ERROR_INVALID_VALUE otherwise).
  virtual Status streamMemOps(uint64_t /*stream*/, std::span<const StreamMemOp> /*ops*/) {
    return Status::error(CUDA_ERROR_NOT_SUPPORTED, "this backend has no stream memory operations");
  }

  // Conditional nodes. A handle of this context whose value kernels set with
  // cudaGraphSetConditional; it starts at `defaultValue` and, with `assignDefault`, is set to it
  // again at the start of each launch of a graph that uses it. It lives as long as the context.
  virtual Status graphConditionalCreate(uint32_t /*defaultValue*/, bool /*assignDefault*/,
                                        uint64_t* /*handle*/) {
    return Status::error(CUDA_ERROR_NOT_SUPPORTED, "this backend runs no conditional nodes");
  }
  // For graphs the caller replays (graphBuild left them unbuilt): the handle's value now, and the
  // handles with assignDefault set to their defaults. Called on a stream's thread from a
  // streamConditionalStep step.
  virtual Status graphConditionalValue(uint64_t /*handle*/, uint32_t* /*value*/) {
    return Status::error(CUDA_ERROR_NOT_SUPPORTED, "this backend runs no conditional nodes");
  }
  virtual Status graphConditionalAssignDefaults(std::span<const uint64_t> /*handles*/) {
    return Status::error(CUDA_ERROR_NOT_SUPPORTED, "this backend runs no conditional nodes");
  }
  // Queues on `stream` a step that runs when the stream reaches it, on the stream's own thread:
  // step(helper, &again) may queue work on `helper` (a stream of this context kept for nesting
  // level `depth`, which no client names); the stream then waits for that work, and runs the step
  // again while it set `again`. A failing step breaks the context as a failed kernel does. This is
  // how a replayed conditional node decides at its place in the stream, after the kernels before
  // it have set its condition.
  static constexpr unsigned kMaxConditionalDepth = 8;
  virtual Status streamConditionalStep(uint64_t /*stream*/, unsigned /*depth*/,
                                       std::function<Status(uint64_t, bool*)> /*step*/) {
    return Status::error(CUDA_ERROR_NOT_SUPPORTED, "this backend runs no conditional nodes");
  }

  // Builds `nodes` (a topologically ordered graph) as one graph of the device's own. Leaves
  // *graph null where the backend does not (the emu) or cannot (a node kind it does not build):
  // the caller then replays the nodes in order on the launch's stream, one valid schedule of the
  // same graph. An error is a graph the device refused.
  virtual Status graphBuild(std::span<const GraphNodeDescription> /*nodes*/,
                            std::unique_ptr<BackendGraph>* graph) {
    graph->reset();
    return Status::success();
  }

  // Waits for all work in the context; returns the context's sticky error if a kernel failed.
  virtual Status synchronize() = 0;
  // Without blocking: CUDA_SUCCESS when synchronize() would return success at once (no work left),
  // else CUDA_ERROR_NOT_READY (also when the backend cannot tell, or there is an error to report).
  virtual Status idle() { return Status::error(CUDA_ERROR_NOT_READY, "cannot tell"); }

  // Device printf output produced since the last call, in order (the client prints it). Safe from
  // any thread (a waiter calls it after its wait).
  virtual std::string takeDeviceOutput() = 0;

  // Where device memory is host memory (emu), a host pointer to [address, address+bytes) of this
  // context's memory, so the session can move bulk bytes straight between it and the connection.
  // Callers synchronize the stream first. Null when not available (the range is bad, or the memory
  // is on a real device): callers then fall back to the copy functions.
  virtual void* hostView(uint64_t /*address*/, uint64_t /*bytes*/) { return nullptr; }

  // Pipelined staging, for memory without a hostView: the session moves a large copy through
  // kStagingSlots pinned host buffers of kStagingBytes each, so that the device copy of one chunk
  // overlaps the network transfer of the next. The buffers belong to the context: allocated once,
  // reused by every copy, released with the context. Per slot, the caller alternates:
  // - stagingBuffer(slot, &buffer): waits until the slot's previous transfer has completed, then
  //   gives its buffer (an error if that transfer failed). A null buffer with success means this
  //   backend has no staging: callers use copyHostToDevice / copyDeviceToHost instead.
  // - stageToDevice / stageFromDevice(slot, ...): enqueues the transfer of `bytes` (at most
  //   kStagingBytes) between the buffer and [address, address+bytes) on `stream`, in stream order,
  //   and returns without waiting for it. The caller checked the range first.
  // So a copy has completed once stagingBuffer has returned for every slot it used.
  static constexpr unsigned kStagingSlots = 2;
  static constexpr uint64_t kStagingBytes = 4u << 20;
  virtual Status stagingBuffer(unsigned /*slot*/, void** buffer) {
    *buffer = nullptr;
    return Status::success();
  }
  virtual Status stageToDevice(unsigned /*slot*/, uint64_t /*dst*/, uint64_t /*bytes*/,
                               uint64_t /*stream*/) {
    return Status::error(CUDA_ERROR_NOT_SUPPORTED, "this backend has no staging buffers");
  }
  virtual Status stageFromDevice(unsigned /*slot*/, uint64_t /*src*/, uint64_t /*bytes*/,
                                 uint64_t /*stream*/) {
    return Status::error(CUDA_ERROR_NOT_SUPPORTED, "this backend has no staging buffers");
  }

  // The client is gone: running and queued kernels stop soon (they fail), so whatever waits for
  // them returns. Safe to call from any thread, while another thread uses the context.
  virtual void cancel() {}

  // Every later kernel passes through `gate` (set once, right after creation; null = no gate).
  // Backends that cannot gate or time kernels ignore it.
  virtual void setLaunchGate(std::shared_ptr<LaunchGate> /*gate*/) {}

  // Who the context serves ("session 3 (tenant alice)"), for the server's log when one of its
  // calls hits a fatal device fault (set once, right after creation).
  virtual void setOwner(const std::string& /*owner*/) {}

 private:
  static Status noIpcEvents() {
    return Status::error(CUDA_ERROR_NOT_SUPPORTED,
                         "this backend cannot share an event between sessions (CUDA IPC events; "
                         "devices report IPC_EVENT_SUPPORTED 0)");
  }
  static Status noIpc() {
    return Status::error(CUDA_ERROR_NOT_SUPPORTED,
                         "this backend cannot share an allocation between sessions (CUDA IPC)");
  }
  static Status noVmm() {
    return Status::error(CUDA_ERROR_NOT_SUPPORTED, "this backend has no virtual memory management");
  }
  static Status noTensorMaps() {
    return Status::error(CUDA_ERROR_NOT_SUPPORTED, "this backend has no tensor maps");
  }
  static Status noTextures() {
    return Status::error(CUDA_ERROR_NOT_SUPPORTED,
                         "this backend has no texture or surface objects");
  }
  static Status noArrays() {
    return Status::error(CUDA_ERROR_NOT_SUPPORTED, "this backend has no CUDA arrays");
  }
  static Status noPools() {
    return Status::error(CUDA_ERROR_NOT_SUPPORTED, "this backend has no memory pools");
  }
};

// A fatal ("sticky") device fault that lost the device's state for every session of the process
// (the cuda backend: cuda_fault.h). The emu backend contains faults per context and has none.
struct DeviceFault {
  CUresult code = CUDA_SUCCESS;
  std::string errorName;    // e.g. "CUDA_ERROR_ASSERT"
  std::string description;  // one line: the call, the error and the session that hit it
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string kind() const = 0;  // "emu" or "cuda"
  virtual int driverVersion() const = 0;
  virtual const std::vector<DeviceDescription>& devices() const = 0;
  virtual Status createContext(int device, unsigned flags,
                               std::unique_ptr<BackendContext>* context) = 0;
  // A green context: a context whose kernels run on `smCount` of the device's SMs (a partition the
  // client split by the rules of cuDevSmResourceSplitByCount).
  virtual Status createGreenContext(int /*device*/, unsigned /*smCount*/,
                                    std::unique_ptr<BackendContext>* /*context*/) {
    return Status::error(CUDA_ERROR_NOT_SUPPORTED, "this backend has no green contexts");
  }
  // Bytes currently allocated on `device` by all contexts (for status).
  virtual uint64_t deviceMemoryUsed(int device) const = 0;
  // Where device addresses live, so clients can keep that range free in their own address space
  // (0, 0 when unknown).
  virtual std::pair<uint64_t, uint64_t> deviceAddressWindow() const = 0;
  // Whether a context's event can be opened by another session's context (CUDA IPC events).
  virtual bool sharesEventsBetweenSessions() const { return false; }
  // Whether BackendContext::hostFileMap works here (clients on shm sessions then report
  // CAN_MAP_HOST_MEMORY).
  virtual bool mapsHostFiles() const { return false; }
  // What happens after a fatal device fault (backends that can have one): every later call on the
  // backend is refused with the fault's code and a message ending in `consequence` ("gpupoold is
  // restarting"), and `handler` runs once, on the thread whose call hit the fault (it must not
  // block). Set before serving.
  virtual void setDeviceFaultPolicy(std::string /*consequence*/,
                                    std::function<void(const DeviceFault&)> /*handler*/) {}
  // Whether a fatal device fault lost this backend's devices (all of them: the driver's state is
  // the process's).
  virtual bool deviceFaulted() const { return false; }
};

}  // namespace gpupool::server
