// One client context on an emu device: its memory (tagged with the context's owner id in
// EmuMemory), modules, streams and events, and its sticky error.
//
// Ordering: every stream has a StreamQueue. The default (legacy) stream synchronizes with the other
// blocking streams as CUDA's legacy stream does: work queued on it waits for them to drain, and
// work queued on a blocking stream waits for it. Kernel failures are sticky, as on a GPU: once a
// launch fails, every later call in this context returns that error.
//
// Threads (server/backend.h): the waits (streamSynchronize, eventSynchronize, synchronize) may run
// on other threads while the session's thread makes the other calls. The stream and event tables
// are guarded by tablesMutex_, which the session's thread holds to change them and the waits hold
// only to look things up; a wait then holds its own reference to the stream's queue or the event,
// so one destroyed meanwhile stays valid until the wait ends. Modules and functions are touched by
// the session's thread only.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "server/backend.h"
#include "server/backends/emu/emu_backend.h"
#include "server/backends/emu/emu_mem_pool.h"
#include "server/backends/emu/emu_memory.h"
#include "server/backends/emu/ptx/ptx_launch.h"
#include "server/backends/emu/ptx/ptx_module.h"
#include "server/backends/emu/stream_queue.h"

namespace gpupool::server::emu {

class EmuContext final : public BackendContext {
 public:
  // `smCount` nonzero: a green context, whose kernels have that many of the device's SMs.
  EmuContext(EmuMemory& memory, const DeviceDescription& device, const EmuBackendOptions& options,
             uint64_t ownerId, unsigned smCount = 0);
  ~EmuContext() override;

  Status limit(uint32_t which, bool set, uint64_t value, uint64_t* held) override;

  Status memAlloc(uint64_t bytes, uint64_t* address) override;
  Status memFree(uint64_t address) override;
  Status memGetInfo(uint64_t* freeBytes, uint64_t* totalBytes) override;
  Status memGetAddressRange(uint64_t address, uint64_t* base, uint64_t* bytes) override;
  uint64_t memoryUsed() const override;
  uint64_t memoryPeak() const override;

  Status memPoolCreate(uint64_t* pool) override;
  Status memPoolDestroy(uint64_t pool) override;
  Status memAllocAsync(uint64_t pool, uint64_t bytes, uint64_t stream, uint64_t* address) override;
  Status memFreeAsync(uint64_t address, uint64_t stream) override;
  Status memPoolTrimTo(uint64_t pool, uint64_t minBytesToKeep) override;
  Status memPoolGetAttribute(uint64_t pool, int attribute, uint64_t* value) override;
  Status memPoolSetAttribute(uint64_t pool, int attribute, uint64_t value) override;
  uint64_t memPoolIdleBytes() override;

  Status hostFileMap(const std::shared_ptr<int>& memfd, uint64_t bytes, uint64_t* address) override;
  Status hostFileUnmap(uint64_t address, uint64_t bytes) override;
  Status vmmCreate(uint64_t bytes, bool shareable, uint64_t* handle) override;
  Status vmmExport(uint64_t handle, VmmExportedAllocation* exported) override;
  Status vmmImport(const VmmExportedAllocation& exported, uint64_t* handle) override;
  Status vmmRetain(uint64_t address, uint64_t* handle) override;
  Status vmmRelease(uint64_t handle, uint64_t* freed) override;
  Status vmmReserve(uint64_t bytes, uint64_t alignment, uint64_t hint, uint64_t* address) override;
  Status vmmFree(uint64_t address, uint64_t bytes) override;
  Status vmmMap(uint64_t address, uint64_t bytes, uint64_t handle, uint64_t offset) override;
  Status vmmUnmap(uint64_t address, uint64_t bytes, uint64_t* freed) override;
  Status vmmSetAccess(uint64_t address, uint64_t bytes, bool readWrite) override;
  Status vmmGetAccess(uint64_t address, bool* readWrite) override;

  Status ipcExport(uint64_t address, IpcExportedAllocation* exported) override;
  Status ipcOpen(const IpcExportedAllocation& exported, uint64_t* address) override;
  Status ipcClose(uint64_t address) override;
  Status ipcExportEvent(uint64_t event, IpcExportedEvent* exported) override;
  Status ipcOpenEvent(const IpcExportedEvent& exported, uint64_t* event) override;

  Status copyHostToDevice(uint64_t dst, const void* src, uint64_t bytes, uint64_t stream,
                          bool async) override;
  Status copyDeviceToHost(void* dst, uint64_t src, uint64_t bytes, uint64_t stream) override;
  Status copyDeviceToDevice(uint64_t dst, uint64_t src, uint64_t bytes, uint64_t stream,
                            bool async) override;
  Status copy2D(const Copy2D& copy, uint64_t stream, bool async) override;
  Status memset(uint64_t dst, uint32_t value, unsigned elementSize, uint64_t width, uint64_t height,
                uint64_t pitch, uint64_t stream, bool async) override;

  Status moduleLoad(std::span<const uint8_t> image, uint64_t* module) override;
  Status moduleUnload(uint64_t module) override;
  Status moduleGetFunction(uint64_t module, const std::string& name,
                           FunctionDescription* function) override;
  Status moduleGetGlobal(uint64_t module, const std::string& name, uint64_t* address,
                         uint64_t* bytes) override;
  Status moduleManagedRange(uint64_t module, uint64_t address, uint64_t* base,
                            uint64_t* bytes) override;
  Status moduleFunctionNames(uint64_t module, std::vector<std::string>* names) override;
  Status link(std::span<const LinkInput> inputs,
              std::span<const std::pair<CUjit_option, uint64_t>> options,
              LinkOutcome* outcome) override;
  Status linkCheckInput(const LinkInput& input,
                        std::span<const std::pair<CUjit_option, uint64_t>> options,
                        LinkOutcome* outcome) override;

  Status launch(uint64_t function, const LaunchShape& shape, uint64_t stream,
                std::span<const uint8_t> params) override;
  Status funcSetAttribute(uint64_t function, int attribute, int value) override;
  Status occupancyMaxActiveBlocks(uint64_t function, int blockSize, uint64_t dynamicSharedBytes,
                                  unsigned flags, int* numBlocks) override;
  Status occupancyClusters(uint64_t function, const LaunchShape& shape, bool potentialSize,
                           int* value) override;

  Status streamCreate(unsigned flags, int priority, uint64_t* stream) override;
  Status streamDestroy(uint64_t stream) override;
  Status streamSynchronize(uint64_t stream) override;
  Status streamQuery(uint64_t stream) override;
  Status streamWaitEvent(uint64_t stream, uint64_t event) override;
  Status streamHostWork(uint64_t stream, std::function<void()> work) override;
  Status streamMemOps(uint64_t stream, std::span<const StreamMemOp> ops) override;
  // Conditional nodes (emu_conditionals.cc).
  Status graphConditionalCreate(uint32_t defaultValue, bool assignDefault,
                                uint64_t* handle) override;
  Status graphConditionalValue(uint64_t handle, uint32_t* value) override;
  Status graphConditionalAssignDefaults(std::span<const uint64_t> handles) override;
  Status streamConditionalStep(uint64_t stream, unsigned depth,
                               std::function<Status(uint64_t, bool*)> step) override;
  Status eventCreate(unsigned flags, uint64_t* event) override;
  Status eventDestroy(uint64_t event) override;
  Status eventRecord(uint64_t event, uint64_t stream) override;
  Status eventSynchronize(uint64_t event) override;
  Status eventQuery(uint64_t event) override;
  Status eventElapsedTime(uint64_t start, uint64_t end, float* milliseconds) override;

  // CUDA arrays (emu_arrays.cc), stored as common/cuda_array_layout.h lays them out.
  Status arrayCreate(const ArrayShape& shape, unsigned levels, uint64_t* array) override;
  Status arrayDestroy(uint64_t array, uint64_t* bytes) override;
  Status arrayLevel(uint64_t mipmapped, unsigned level, uint64_t* array) override;
  Status copy3D(const Copy3D& copy, uint64_t stream, bool async) override;
  // Texture and surface objects (emu_textures.cc): views of arrays or device memory that tex,
  // suld and sust resolve by handle, in this context only.
  Status textureCreate(const TextureDescription& desc, uint64_t* handle) override;
  Status textureDestroy(uint64_t handle, bool surface) override;
  Status tensorMapEncode(const TensorMapRequest& request, uint8_t* map) override;
  Status tensorMapReplaceAddress(uint8_t* map, uint64_t address) override;
  Status textureReferenceFind(uint64_t module, const std::string& name, bool surface) override;
  Status textureReferenceBind(uint64_t module, const std::string& name,
                              const TextureDescription& desc) override;
  Status textureReferencesBound(uint64_t function) override;

  Status synchronize() override;
  Status idle() override;
  std::string takeDeviceOutput() override;
  void* hostView(uint64_t address, uint64_t bytes) override { return view(address, bytes); }
  void cancel() override { cancelled_ = true; }
  void setLaunchGate(std::shared_ptr<LaunchGate> gate) override { gate_ = std::move(gate); }

 private:
  // CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE unless every block of `shape` fits on the device at
  // once.
  Status checkCooperativeGrid(uint64_t function, const LaunchShape& shape);
  // Helper streams of conditional nodes have the ids from here on (one per nesting level); other
  // handles count up from 1 and never get there.
  static constexpr uint64_t kConditionalHelperStreams = uint64_t{1} << 62;
  struct Stream {
    unsigned flags = 0;
    std::shared_ptr<StreamQueue> queue;  // shared with the waits using it
  };
  struct Event {
    unsigned flags = 0;
    std::mutex mutex;
    std::condition_variable reached;
    uint64_t recorded = 0;   // epochs handed out by eventRecord
    uint64_t completed = 0;  // the last epoch the stream reached
    std::chrono::steady_clock::time_point when;
  };
  // The bindings of a module's texture and surface references (ptx::TextureReference index ->
  // view), copied on write: a launch keeps the bindings it was queued with.
  using ReferenceBindings = std::map<uint32_t, ptx::TextureView>;
  struct LoadedModule {
    std::shared_ptr<ptx::Module> program;
    std::vector<uint64_t> globalAddresses;
    std::shared_ptr<const ReferenceBindings> references = std::make_shared<ReferenceBindings>();
    std::map<uint32_t, TextureDescription> referenceDescriptions = {};  // what each was bound with
  };
  struct Function {
    uint64_t module = 0;
    std::shared_ptr<ptx::Module> program;
    const ptx::KernelInfo* kernel = nullptr;
    int maxDynamicSharedBytes = 0;        // cuFuncSetAttribute opt-in
    bool nonPortableClusterSize = false;  // NON_PORTABLE_CLUSTER_SIZE_ALLOWED: up to 16 CTAs
    int clusterSchedulingPolicy = 0;      // CLUSTER_SCHEDULING_POLICY_PREFERENCE (a hint)
  };
  // The cluster shape a launch of `f` runs in: the launch's own, or the one the kernel fixes
  // (.reqnctapercluster), {1, 1, 1} for none; *explicitCluster when either asked for clusters.
  // CUDA_ERROR_NOT_SUPPORTED on a device without cluster launch, CUDA_ERROR_INVALID_CLUSTER_SIZE
  // for a shape the grid, the kernel or the device does not allow.
  Status clusterShape(const Function& f, const LaunchShape& shape, std::array<uint32_t, 3>* dims,
                      bool* explicitCluster) const;

  // CUDA_ERROR_INVALID_VALUE, naming it, unless every surface reference `kernel` uses is in
  // `bindings` (an unbound texture reference reads 0, as NVIDIA launches such a kernel).
  static Status checkReferencesBound(const ptx::Module& program, const ptx::KernelInfo& kernel,
                                     const ReferenceBindings& bindings);
  // The view a texture or surface object, or a reference bound to `desc`, reads (emu_textures.cc).
  Status textureView(const TextureDescription& desc, ptx::TextureView* view);
  // The sampler half of textureView: how `desc` samples the resource `view` describes.
  static Status textureSampler(const TextureDescription& desc, ptx::TextureView* view);
  // The checked host view of [address, address+bytes) of this context's memory.
  uint8_t* view(uint64_t address, uint64_t bytes) const;
  // Lookups under tablesMutex_; the copies they return stay valid after the lock is released.
  Stream findStream(uint64_t stream) const;  // a null queue when unknown
  std::shared_ptr<Event> findEvent(uint64_t event) const;
  enum class StreamSet { kAll, kOtherBlocking };  // kOtherBlocking: blocking streams except 0
  std::vector<std::shared_ptr<StreamQueue>> streamQueues(StreamSet which) const;
  static void drain(const std::vector<std::shared_ptr<StreamQueue>>& queues);
  // Puts `operation` on `stream` after what CUDA's legacy-stream rules say it must wait for.
  Status enqueue(uint64_t stream, std::function<void()> operation);
  // Blocks until what `stream` must wait for under the legacy-stream rules is done.
  void waitForLegacyOrder(uint64_t stream, const Stream& s);
  // Blocks until `stream` (and, for the legacy stream, every blocking stream) has drained.
  Status waitForStream(uint64_t stream);
  void drainAll();
  Status sticky() const;
  void fail(CUresult code, const std::string& message);
  std::vector<int32_t> functionAttributes(const Function& f) const;
  Status findPool(uint64_t pool, std::shared_ptr<EmuMemPool>* found) const;
  // An array's block of device memory; a mipmap level points into its parent's block.
  struct EmuArray {
    uint64_t address = 0;
    ArrayShape shape;     // this array's (or level's) extent
    unsigned levels = 0;  // mipmapped: the level count; 0 for a plain array or a level
    uint64_t parent = 0;  // a level: its mipmapped array
    std::vector<uint64_t> levelHandles;  // a mipmapped array: the levels handed out (0: not yet)
  };
  // Where a copy end's region starts, with its row and slice pitches; checked against its memory.
  struct EmuCopyEnd {
    uint8_t* base = nullptr;
    uint64_t pitch = 0, slicePitch = 0;
  };
  Status resolveCopyEnd(const CopyEnd3D& end, bool source, const Copy3D& c, EmuCopyEnd* out);
  // On the stream's worker (emu_stream_mem_ops.cc): false when the context was cancelled or broke
  // before a wait was met, so the stream's later operations do not run.
  bool runMemOp(const StreamMemOp& op);
  // cudaGraphSetConditional from a kernel: false when `handle` is not this context's.
  bool setConditional(uint64_t handle, uint32_t value);
  // The helper stream of conditional nesting level `depth`, made on first use.
  uint64_t conditionalHelperStream(unsigned depth);

  EmuMemory& memory_;
  const DeviceDescription& device_;
  const EmuBackendOptions& options_;
  const uint64_t owner_;
  const unsigned smCount_;  // the SMs kernels run on: a green context's partition, or all
  std::atomic<bool> cancelled_{false};  // read by running launches (ptx::LaunchServices::cancel)
  std::shared_ptr<LaunchGate> gate_;    // the pool's scheduler and meter; null when open
  ptx::DeviceHeap heap_;  // device-side malloc() of this context only (outlives the stream workers)

  mutable std::mutex tablesMutex_;  // guards streams_ and events_ (see the threads note above)
  // The session's thread changes functions_, modules_ (and their reference bindings) and textures_
  // under this lock; launch() reads them under it, since a conditional node's step launches its
  // body's kernels from a stream's thread (emu_conditionals.cc).
  std::mutex launchTablesMutex_;
  std::map<uint32_t, uint64_t> limits_;  // cuCtxSetLimit values; the others read as defaults
  std::map<uint64_t, Stream> streams_;
  std::map<uint64_t, std::shared_ptr<Event>> events_;
  std::map<uint64_t, LoadedModule> modules_;
  std::map<uint64_t, Function> functions_;
  uint64_t nextHandle_ = 1;
  // Memory pools (0: the default pool) and the pool of each block in use. Touched by the session's
  // thread only; queued frees hold their own reference to the pool.
  std::map<uint64_t, std::shared_ptr<EmuMemPool>> pools_;
  std::map<uint64_t, std::shared_ptr<EmuMemPool>> poolBlocks_;
  std::map<uint64_t, EmuArray> arrays_;  // touched by the session's thread only
  // The texture and surface objects, copied on write: a launch keeps the table it was queued with.
  struct TextureObjects final : ptx::TextureTable {
    std::map<uint64_t, ptx::TextureView> views;
    const ptx::TextureView* find(uint64_t handle) const override {
      auto it = views.find(handle);
      return it == views.end() ? nullptr : &it->second;
    }
  };
  std::shared_ptr<const TextureObjects> textures_ = std::make_shared<TextureObjects>();
  // Set by the context's first cooperative launch: from then on every launch gets a grid
  // workspace, so this_grid().is_valid() is true in ordinary launches too, as on NVIDIA's driver
  // (observed on driver 580.159.04, H200: false before any cooperative launch, true after).
  std::atomic<bool> cooperativeLaunched_{false};

  // Conditional handles (cuGraphConditionalHandleCreate): set by kernels on the launch threads,
  // read by stream steps, created by the session's thread.
  struct ConditionalSlot {
    uint32_t value = 0;
    uint32_t defaultValue = 0;
    bool assignDefault = false;
  };
  std::mutex conditionalMutex_;
  std::map<uint64_t, ConditionalSlot> conditionals_;
  uint64_t nextConditional_ = 0;
  // Under conditionalMutex_: `handle`'s slot, or null with *error (when given) saying why.
  ConditionalSlot* findConditional(uint64_t handle, Status* error);

  mutable std::mutex errorMutex_;
  CUresult stickyCode_ = CUDA_SUCCESS;
  std::string stickyMessage_;
  std::atomic<bool> broken_{false};  // stickyCode_ is set: queued operations are skipped

  std::mutex outputMutex_;
  std::string output_;
};

}  // namespace gpupool::server::emu
