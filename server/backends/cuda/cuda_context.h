// One client context on the real driver: a CUcontext of its own plus everything created in it.
//
// Contract (on top of server/backend.h):
// - Every call first makes the context current on the calling thread, because one session thread
//   may serve several contexts and the driver's current context is per thread. That includes the
//   waits, which may come from waiter threads (server/backend.h).
// - Waits look their stream or event up in a DriverHandleTable and call the driver without its
//   lock; one destroyed meanwhile is given back to the driver when the last wait on it ends.
// - Handles are ids minted here; device addresses are checked against the ranges this context
//   allocated or obtained from its modules' globals *before* the driver is called, because the
//   driver would happily access another tenant's memory in the same process. Pointers inside
//   kernel parameters cannot be checked: isolation between kernels needs separate processes.
// - Destroying it destroys its events, streams, modules and allocations, then the context,
//   ignoring errors (a context with a sticky kernel error must still go away).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "server/backend.h"
#include "server/backends/cuda/cuda_driver.h"
#include "server/backends/cuda/cuda_gated_launches.h"
#include "server/backends/cuda/cuda_staging.h"
#include "server/backends/cuda/device_address_map.h"
#include "server/backends/cuda/driver_handle_table.h"

namespace gpupool::server {

class CudaGraph;  // cuda_graphs.cc

class CudaContext final : public BackendContext {
 public:
  // Creates a context on `device` with `flags` (CUctx_flags). `deviceMemoryUsed` is the
  // backend's running total for that device; this context adds and removes its allocations. Its
  // pinned staging buffers are noted in `pinnedMemory` when given.
  static Status create(std::shared_ptr<CudaDriver> driver, CUdevice device, unsigned flags,
                       std::shared_ptr<std::atomic<uint64_t>> deviceMemoryUsed,
                       transport::PinnedMemory* pinnedMemory,
                       std::unique_ptr<BackendContext>* context);
  // A green context on exactly `smCount` of the device's SMs: the driver's SM resource split to
  // that count, its descriptor, cuGreenCtxCreate, and the CUcontext cuCtxFromGreenCtx gives.
  static Status createGreen(std::shared_ptr<CudaDriver> driver, CUdevice device, unsigned smCount,
                            std::shared_ptr<std::atomic<uint64_t>> deviceMemoryUsed,
                            transport::PinnedMemory* pinnedMemory,
                            std::unique_ptr<BackendContext>* context);
  ~CudaContext() override;

  Status memAlloc(uint64_t bytes, uint64_t* address) override;
  Status memFree(uint64_t address) override;
  Status limit(uint32_t which, bool set, uint64_t value, uint64_t* held) override;
  Status memGetInfo(uint64_t* freeBytes, uint64_t* totalBytes) override;
  Status memGetAddressRange(uint64_t address, uint64_t* base, uint64_t* bytes) override;
  uint64_t memoryUsed() const override { return memoryUsed_; }
  uint64_t memoryPeak() const override { return memoryPeak_; }

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

  // CUDA IPC is refused (docs/architecture.md, CUDA IPC memory): every session's contexts live in
  // this one process, where the driver opens no IPC handle it exported and one context's cuMemAlloc
  // memory is not mapped in another's.
  Status ipcExport(uint64_t address, IpcExportedAllocation* exported) override;
  Status ipcOpen(const IpcExportedAllocation& exported, uint64_t* address) override;
  Status ipcClose(uint64_t address) override;

  Status memPoolCreate(uint64_t* pool) override;
  Status memPoolDestroy(uint64_t pool) override;
  Status memAllocAsync(uint64_t pool, uint64_t bytes, uint64_t stream, uint64_t* address) override;
  Status memFreeAsync(uint64_t address, uint64_t stream) override;
  Status memPoolTrimTo(uint64_t pool, uint64_t minBytesToKeep) override;
  Status memPoolGetAttribute(uint64_t pool, int attribute, uint64_t* value) override;
  Status memPoolSetAttribute(uint64_t pool, int attribute, uint64_t value) override;
  uint64_t memPoolIdleBytes() override;

  Status copyHostToDevice(uint64_t dst, const void* src, uint64_t bytes, uint64_t stream,
                          bool async) override;
  Status copyDeviceToHost(void* dst, uint64_t src, uint64_t bytes, uint64_t stream) override;
  Status copyDeviceToDevice(uint64_t dst, uint64_t src, uint64_t bytes, uint64_t stream,
                            bool async) override;
  Status copy2D(const Copy2D& copy, uint64_t stream, bool async) override;
  // CUDA arrays (cuda_arrays.cc): the driver's, under ids this context mints.
  Status arrayCreate(const ArrayShape& shape, unsigned levels, uint64_t* array) override;
  Status arrayDestroy(uint64_t array, uint64_t* bytes) override;
  Status arrayLevel(uint64_t mipmapped, unsigned level, uint64_t* array) override;
  Status copy3D(const Copy3D& copy, uint64_t stream, bool async) override;
  // Texture and surface objects (cuda_textures.cc): the driver's, on this context's arrays and
  // memory; the handle is the driver's own, which kernels receive unchanged.
  Status textureCreate(const TextureDescription& desc, uint64_t* handle) override;
  Status tensorMapEncode(const TensorMapRequest& request, uint8_t* map) override;
  Status tensorMapReplaceAddress(uint8_t* map, uint64_t address) override;
  Status textureDestroy(uint64_t handle, bool surface) override;
  Status textureReferenceFind(uint64_t module, const std::string& name, bool surface) override;
  Status textureReferenceBind(uint64_t module, const std::string& name,
                              const TextureDescription& desc) override;
  Status memset(uint64_t dst, uint32_t value, unsigned elementSize, uint64_t width, uint64_t height,
                uint64_t pitch, uint64_t stream, bool async) override;
  // Pinned staging buffers (cuda_staging.h), created at the first staged copy.
  Status stagingBuffer(unsigned slot, void** buffer) override;
  Status stageToDevice(unsigned slot, uint64_t dst, uint64_t bytes, uint64_t stream) override;
  Status stageFromDevice(unsigned slot, uint64_t src, uint64_t bytes, uint64_t stream) override;

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
  // Executable graphs (cuda_graphs.cc): one CUgraphExec each.
  Status graphBuild(std::span<const GraphNodeDescription> nodes,
                    std::unique_ptr<BackendGraph>* graph) override;
  // Conditional handles live in one CUgraph of this context (conditionalHome_), into which each
  // graph with conditional nodes is built (cuda_graphs.cc).
  Status graphConditionalCreate(uint32_t defaultValue, bool assignDefault,
                                uint64_t* handle) override;
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
  Status eventCreate(unsigned flags, uint64_t* event) override;
  Status eventDestroy(uint64_t event) override;
  Status eventRecord(uint64_t event, uint64_t stream) override;
  Status eventSynchronize(uint64_t event) override;
  Status eventQuery(uint64_t event) override;
  Status eventElapsedTime(uint64_t start, uint64_t end, float* milliseconds) override;

  Status synchronize() override;
  // The client is gone: the stream waits it left pending are met, so that the waits for their
  // streams (a waiter thread's cuStreamSynchronize for it) return and the session can end. From
  // any thread, as the contract says.
  void cancel() override;

  // Gated kernels (and graphs) pass the pool's scheduler on the device, in their stream's order,
  // without the session waiting for them (cuda_gated_launches.h).
  void setLaunchGate(std::shared_ptr<LaunchGate> gate) override;

  // On a real GPU device printf output is written by the driver to the server's stdout; it
  // cannot be captured per context, so there is never any to hand back.
  std::string takeDeviceOutput() override { return {}; }

  // Named in the log line of a fatal fault one of its calls hits (cuda_fault.h).
  void setOwner(const std::string& owner) override {
    owner_ = std::make_shared<const std::string>(owner);
  }

 private:
  // The driver's linker over `inputs` (link, linkCheckInput); `complete` links them into an image.
  Status runDriverLink(std::span<const LinkInput> inputs,
                       std::span<const std::pair<CUjit_option, uint64_t>> options, bool complete,
                       LinkOutcome* outcome);
  struct Function {
    CUfunction handle = nullptr;
    uint64_t module = 0;
    std::vector<ParamLayout> params;
  };

  friend class CudaGraph;
  // Checks that every handle `graph` names is still this context's, then launches it on `stream`.
  Status graphLaunch(const CudaGraph& graph, uint64_t stream);
  void graphRelease(CUgraph graph, CUgraphExec exec);
  // Adds `nodes` to `cuGraph` (bodies of conditional nodes too), noting in `graph` what each
  // launch must check; `made` receives the driver nodes of each description.
  Status graphAddNodes(CUgraph cuGraph, std::span<const GraphNodeDescription> nodes,
                       CudaGraph& graph, std::vector<std::vector<CUgraphNode>>* made);
  // The driver's launch configuration for `shape` on `stream`, its attributes (cluster,
  // cooperation) in `attributes`.
  static CUlaunchConfig launchConfig(const LaunchShape& shape, CUstream stream,
                                     CUlaunchAttribute (&attributes)[2]);
  // The kernelParams array for `function` over the packed block `params` (pointers into it).
  static Status kernelArguments(const Function& function, std::span<const uint8_t> params,
                                std::vector<void*>* arguments);

  CudaContext(std::shared_ptr<CudaDriver> driver, CUcontext context, CUdevice device,
              std::shared_ptr<std::atomic<uint64_t>> deviceMemoryUsed,
              transport::PinnedMemory* pinnedMemory);

  Status makeCurrent();
  // The whole pages of managed memory holding the global [address, address+size) of `module`
  // when the driver says it is managed (a __managed__ variable); *bytes = 0 otherwise. Recorded in
  // managedRanges_ and addresses_.
  Status managedRangeOf(uint64_t module, uint64_t address, uint64_t size, uint64_t* base,
                        uint64_t* bytes);
  // The __managed__ variables (address -> bytes) of the module whose managed pages hold all of
  // [address, address+bytes), or null. A copy there goes variable by variable: NVIDIA's driver
  // refuses one that reaches past a variable into the rest of its page.
  const std::map<uint64_t, uint64_t>* managedVariablesAround(uint64_t address,
                                                             uint64_t bytes) const;
  // Calls copy(variableAddress, offset, length) for each part of [address, address+bytes) that is
  // one of `variables`, after the stream's earlier work (a copy on the legacy stream is ordered by
  // the driver); stops at the first failure.
  template <typename Copy>
  Status copyManagedVariables(const std::map<uint64_t, uint64_t>& variables, uint64_t address,
                              uint64_t bytes, uint64_t stream, CUstream cuStream, Copy copy);
  Status findStream(uint64_t id, CUstream* stream) const;
  Status findEvent(uint64_t id, CUevent* event) const;
  Status findFunction(uint64_t id, const Function** function) const;
  // Pool 0, the context's default pool, is a pool of its own made on first use: the device's
  // default pool is shared by every context of this process, so by every session and tenant.
  Status findPool(uint64_t id, CUmemoryPool* pool);
  Status createPool(CUmemoryPool* pool);
  // Checks that `address` starts an allocation of this context, runs `free` and forgets it.
  Status freeAllocation(uint64_t address, const std::function<Status()>& free);
  // A new allocation of this context at `address`.
  void noteAllocation(CUdeviceptr address, uint64_t bytes);
  Status checkRange(const char* what, uint64_t address, uint64_t bytes) const;
  Status prepareStaged(const char* what, uint64_t address, uint64_t bytes, uint64_t stream,
                       CUstream* cuStream);
  Status checkPitchedRange(const char* what, uint64_t address, uint64_t pitch, uint64_t rowBytes,
                           uint64_t height) const;
  Status describeFunction(CUfunction handle, FunctionDescription* function);
  uint64_t mintId() { return nextId_++; }
  // Stream waits that may not be met yet, each batch with an event recorded after it. A wait never
  // met would hold its stream, and so the teardown's frees, forever: the destructor meets what is
  // left (releasePendingWaits). Met ones are dropped at each new batch.
  struct PendingWaits {
    CUevent passed = nullptr;
    std::vector<StreamMemOp> waits;
  };
  // Virtual memory management (cuda_vmm.cc): the driver's handles, reservations and mappings this
  // context made. The driver checks none of them against the calling context, so these do.
  struct VmmAllocation {
    CUmemGenericAllocationHandle handle = 0;
    uint64_t bytes = 0;
    unsigned refs = 1;  // cuMemCreate and each retain, less releases (each one the driver's too)
    unsigned mappings = 0;
    bool shareable = false;  // created exportable as a POSIX file descriptor
    bool counted = true;     // charged here: made by cuMemCreate, not imported
  };
  struct VmmMapping {
    uint64_t bytes = 0;
    uint64_t allocation = 0;
    bool readWrite = false;
  };
  std::map<uint64_t, VmmAllocation> vmmAllocations_;  // by the id the client knows
  std::map<uint64_t, uint64_t> vmmReservations_;      // base -> bytes
  std::map<uint64_t, VmmMapping> vmmMappings_;        // base -> mapping
  // The reservation containing [address, address+bytes), or end().
  std::map<uint64_t, uint64_t>::const_iterator vmmReservationOf(uint64_t address,
                                                                uint64_t bytes) const;
  // The mapping containing `address`, or vmmMappings_.end().
  std::map<uint64_t, VmmMapping>::const_iterator vmmMappingOf(uint64_t address) const;
  // Re-enters the runs of adjacent read-write mappings in addresses_, where copies and kernels
  // are checked.
  void vmmPublish();
  // Frees allocation `id` once released and unmapped, adding its bytes to *freed.
  void vmmDropIfUnused(uint64_t id, uint64_t* freed);
  void vmmReleaseAll();
  // Arrays: a plain one has `array`; a mipmapped one `mipmapped` and its levels' ids (0: not
  // asked for yet); a level `array` and its `parent`.
  struct CudaArray {
    CUarray array = nullptr;
    CUmipmappedArray mipmapped = nullptr;
    ArrayShape shape;
    unsigned levels = 0;
    uint64_t parent = 0;
    std::vector<uint64_t> levelIds;
  };
  std::map<uint64_t, CudaArray> arrays_;
  void arrayReleaseAll();
  std::map<uint64_t, bool> textures_;  // the driver's handles this context made: surface?
  // What each module's texture references were last bound with (textureReferenceBind).
  std::map<uint64_t, std::map<std::string, TextureDescription>> boundReferences_;
  void textureReleaseAll();
  Status fillCopyEnd(const CopyEnd3D& end, bool source, const Copy3D& copy, CUDA_MEMCPY3D* params);
  // The driver's form of `ops`, each address checked to be this context's.
  Status driverMemOps(std::span<const StreamMemOp> ops,
                      std::vector<CUstreamBatchMemOpParams>* params) const;
  // Keeps the waits among `ops`, just queued on `stream` (alone or in a graph), for
  // releasePendingWaits.
  void notePendingWaits(CUstream stream, std::span<const StreamMemOp> ops);
  // Under pendingMutex_; releasePendingWaits takes it.
  void dropMetWaits();
  void releasePendingWaits();

  std::shared_ptr<CudaDriver> driver_;
  std::shared_ptr<const std::string> owner_;  // setOwner; null: not told
  CUcontext context_;
  CUgreenCtx green_ = nullptr;  // a green context's own handle; destroying it ends context_
  CUdevice device_;
  std::shared_ptr<std::atomic<uint64_t>> deviceMemoryUsed_;
  transport::PinnedMemory* pinnedMemory_;
  // Read by status and NVML accounting from other sessions' threads.
  std::atomic<uint64_t> memoryUsed_{0};
  std::atomic<uint64_t> memoryPeak_{0};
  uint64_t nextId_ = 1;

  DeviceAddressMap addresses_;
  std::map<uint64_t, CUmodule> modules_;
  // The managed memory of each module's __managed__ variables looked up so far: base -> bytes,
  // whole pages, disjoint (managedRangeOf).
  std::map<uint64_t, std::map<uint64_t, uint64_t>> managedRanges_;
  // The __managed__ variables of each module looked up so far: address -> bytes.
  std::map<uint64_t, std::map<uint64_t, uint64_t>> managedVariables_;
  std::map<uint64_t, CUmemoryPool> pools_;  // the pools this context created (0: its default)
  std::map<uint64_t, Function> functions_;
  std::map<CUfunction, uint64_t> functionIds_;  // so repeated lookups return the same id
  DriverHandleTable<CUstream> streams_{
      [this](CUstream stream) { return driver_->call(driver_->streamDestroy, stream); }};
  DriverHandleTable<CUevent> events_{
      [this](CUevent event) { return driver_->call(driver_->eventDestroy, event); }};
  std::unique_ptr<CudaStaging> staging_;  // released before the context in the destructor
  std::vector<PendingWaits>
      pendingWaits_;  // under pendingMutex_: cancel() may come from any thread
  std::mutex pendingMutex_;

  // Kernels' admission by the pool's scheduler and meter; null when the device is open.
  std::unique_ptr<CudaGatedLaunches> gated_;
  // The graph the conditional handles were made in, empty between builds; null until the first.
  CUgraph conditionalHome_ = nullptr;
  std::set<uint64_t> conditionalHandles_;
};

}  // namespace gpupool::server
