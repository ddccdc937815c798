#include "server/backends/emu/emu_context.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iostream>

#include "common/hex.h"
#include "gpupool/image/ptx_selection.h"
#include "server/backends/emu/emu_link.h"
#include "server/backends/emu/emu_occupancy.h"
#include "server/backends/emu/owner_device_memory.h"

namespace gpupool::server::emu {
namespace {

Status invalidValue(const std::string& what) {
  return Status::error(CUDA_ERROR_INVALID_VALUE, what);
}

// The driver's answer to an impossible launch shape. It is not in cuda.h's enum, but it is the only
// CUresult that cudart 13 turns into cudaErrorInvalidConfiguration (probed over 1..1000 through
// this library), which is what a real GPU gives `<<<1, 2048>>>`.
constexpr CUresult kInvalidLaunchConfiguration = static_cast<CUresult>(9);
Status invalidConfiguration(const std::string& what) {
  return Status::error(kInvalidLaunchConfiguration, what);
}
Status invalidHandle(const std::string& what) {
  return Status::error(CUDA_ERROR_INVALID_HANDLE, what);
}

// Extent in bytes of `height` rows of `widthBytes`, `pitch` apart; 0 on overflow.
uint64_t extent2D(uint64_t pitch, uint64_t widthBytes, uint64_t height) {
  if (height == 0 || widthBytes == 0) return 0;
  if (pitch < widthBytes) return 0;
  if ((height - 1) > (UINT64_MAX - widthBytes) / pitch) return 0;
  return pitch * (height - 1) + widthBytes;
}

// A __managed__ variable's memory: whole 4 KiB pages (the client mirrors it page by page).
uint64_t managedPageRound(uint64_t bytes) {
  constexpr uint64_t kManagedPage = 4096;
  return (std::max<uint64_t>(bytes, 1) + kManagedPage - 1) / kManagedPage * kManagedPage;
}

}  // namespace

EmuContext::EmuContext(EmuMemory& memory, const DeviceDescription& device,
                       const EmuBackendOptions& options, uint64_t ownerId, unsigned smCount)
    : memory_(memory),
      device_(device),
      options_(options),
      owner_(ownerId),
      smCount_(smCount ? smCount
                       : static_cast<unsigned>(
                             device.attributes[CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT])) {
  streams_[0] = Stream{0, std::make_shared<StreamQueue>()};
  pools_[0] = std::make_shared<EmuMemPool>(memory_, owner_);
}

EmuContext::~EmuContext() {
  cancel();  // running kernels and event waits stop instead of holding the destruction up
  drainAll();
  {
    std::lock_guard lock(tablesMutex_);
    streams_.clear();  // joins the workers (no wait holds a queue any more: see backend.h)
    // Records this context will never run no longer hold up waits elsewhere (another session may
    // have opened one of these events through CUDA IPC).
    for (auto& [id, e] : events_) {
      std::lock_guard eventLock(e->mutex);
      e->completed = e->recorded;
      e->reached.notify_all();
    }
  }
  functions_.clear();
  modules_.clear();
  memory_.releaseAll(owner_);
}

uint8_t* EmuContext::view(uint64_t address, uint64_t bytes) const {
  return static_cast<uint8_t*>(memory_.translate(address, bytes, owner_));
}

Status EmuContext::sticky() const {
  std::lock_guard lock(errorMutex_);
  if (stickyCode_ == CUDA_SUCCESS) return Status::success();
  return Status::error(stickyCode_, stickyMessage_);
}

void EmuContext::fail(CUresult code, const std::string& message) {
  std::lock_guard lock(errorMutex_);
  if (stickyCode_ != CUDA_SUCCESS) return;
  stickyCode_ = code;
  broken_.store(true, std::memory_order_release);
  stickyMessage_ = message;
  std::cerr << "gpupoold: context " << owner_ << ": " << message << "\n";
}

EmuContext::Stream EmuContext::findStream(uint64_t stream) const {
  std::lock_guard lock(tablesMutex_);
  auto it = streams_.find(stream);
  return it == streams_.end() ? Stream{} : it->second;
}

std::shared_ptr<EmuContext::Event> EmuContext::findEvent(uint64_t event) const {
  std::lock_guard lock(tablesMutex_);
  auto it = events_.find(event);
  return it == events_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<StreamQueue>> EmuContext::streamQueues(StreamSet which) const {
  std::vector<std::shared_ptr<StreamQueue>> queues;
  std::lock_guard lock(tablesMutex_);
  for (const auto& [id, s] : streams_) {
    bool otherBlocking = id != 0 && !(s.flags & CU_STREAM_NON_BLOCKING);
    if (which == StreamSet::kAll || otherBlocking) queues.push_back(s.queue);
  }
  return queues;
}

// Without the tables lock: draining may take as long as the kernels queued.
void EmuContext::drain(const std::vector<std::shared_ptr<StreamQueue>>& queues) {
  for (const auto& queue : queues) queue->drain();
}

Status EmuContext::enqueue(uint64_t stream, std::function<void()> operation) {
  Stream s = findStream(stream);
  if (!s.queue) return invalidHandle("unknown stream " + hex(stream));
  if (Status st = sticky(); !st.ok()) return st;
  waitForLegacyOrder(stream, s);
  s.queue->enqueue(std::move(operation), &broken_);  // a broken context runs nothing more
  return Status::success();
}

void EmuContext::waitForLegacyOrder(uint64_t stream, const Stream& s) {
  if (stream == 0) {
    drain(streamQueues(StreamSet::kOtherBlocking));
  } else if (!(s.flags & CU_STREAM_NON_BLOCKING)) {
    findStream(0).queue->drain();
  }
}

Status EmuContext::streamHostWork(uint64_t stream, std::function<void()> work) {
  Stream s = findStream(stream);
  if (!s.queue) return invalidHandle("unknown stream " + hex(stream));
  waitForLegacyOrder(stream, s);
  // Not skipped on a broken context, unlike enqueue(): what it releases must be released.
  s.queue->enqueue(std::move(work));
  return Status::success();
}

Status EmuContext::waitForStream(uint64_t stream) {
  Stream s = findStream(stream);
  if (!s.queue) return invalidHandle("unknown stream " + hex(stream));
  s.queue->drain();
  if (stream == 0) drain(streamQueues(StreamSet::kOtherBlocking));
  return sticky();
}

void EmuContext::drainAll() { drain(streamQueues(StreamSet::kAll)); }

// ---- Memory ----

Status EmuContext::memAlloc(uint64_t bytes, uint64_t* address) {
  if (Status st = sticky(); !st.ok()) return st;
  if (bytes == 0) return invalidValue("cannot allocate 0 bytes");
  *address = memory_.allocate(bytes, owner_);
  if (*address == 0) {
    return Status::error(CUDA_ERROR_OUT_OF_MEMORY,
                         "out of device memory: asked for " + std::to_string(bytes) + " bytes, " +
                             std::to_string(memory_.capacity() - memory_.used()) + " free of " +
                             std::to_string(memory_.capacity()));
  }
  return Status::success();
}

Status EmuContext::memFree(uint64_t address) {
  // cuMemFree synchronizes: nothing queued may still use the memory.
  drainAll();
  if (auto block = poolBlocks_.find(address); block != poolBlocks_.end()) {
    block->second->blockFreed(address, 0);
    poolBlocks_.erase(block);
    return sticky();
  }
  if (!memory_.release(address, owner_)) {
    return invalidValue("not an allocation of this context: " + hex(address));
  }
  return sticky();
}

// Limits are kept and read back as a GPU's driver keeps them; the emu device needs none of them
// to run (a thread's stack and the device heap grow as a kernel uses them), so any value is met.
Status EmuContext::limit(uint32_t which, bool set, uint64_t value, uint64_t* held) {
  uint64_t fallback = 0;
  switch (which) {
    case CU_LIMIT_STACK_SIZE:
      fallback = 1024;
      break;
    case CU_LIMIT_PRINTF_FIFO_SIZE:
      fallback = 1 << 20;
      break;
    case CU_LIMIT_MALLOC_HEAP_SIZE:
      fallback = 8 << 20;
      break;
    case CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH:
      fallback = 2;
      break;
    case CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT:
      fallback = 2048;
      break;
    case CU_LIMIT_MAX_L2_FETCH_GRANULARITY:
      fallback = 64;
      break;
    case CU_LIMIT_PERSISTING_L2_CACHE_SIZE:
    case CU_LIMIT_CIG_ENABLED:
    case CU_LIMIT_CIG_SHMEM_FALLBACK_ENABLED:
      fallback = 0;
      break;
    case CU_LIMIT_SHMEM_SIZE:
      fallback = static_cast<uint64_t>(
          device_.attributes.at(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN));
      break;
    default:
      return Status::error(CUDA_ERROR_UNSUPPORTED_LIMIT,
                           "limit " + std::to_string(which) + " is not a limit of this device");
  }
  if (set) {
    if (which == CU_LIMIT_SHMEM_SIZE || which == CU_LIMIT_CIG_ENABLED) {
      return Status::error(CUDA_ERROR_UNSUPPORTED_LIMIT,
                           "limit " + std::to_string(which) + " can only be read");
    }
    limits_[which] = value;
  }
  auto it = limits_.find(which);
  *held = it != limits_.end() ? it->second : fallback;
  return Status::success();
}

Status EmuContext::memGetInfo(uint64_t* freeBytes, uint64_t* totalBytes) {
  *totalBytes = memory_.capacity();
  *freeBytes = memory_.capacity() - memory_.used();
  return sticky();
}

Status EmuContext::memGetAddressRange(uint64_t address, uint64_t* base, uint64_t* bytes) {
  if (!memory_.findAllocation(address, owner_, base, bytes)) {
    return Status::error(CUDA_ERROR_NOT_FOUND, "no allocation contains " + hex(address));
  }
  return Status::success();
}

uint64_t EmuContext::memoryUsed() const { return memory_.usedBy(owner_); }
uint64_t EmuContext::memoryPeak() const { return memory_.peakBy(owner_); }

// ---- CUDA IPC (EmuMemory keeps the openers) ----

Status EmuContext::ipcExport(uint64_t address, IpcExportedAllocation* exported) {
  if (Status st = sticky(); !st.ok()) return st;
  bool global = false;
  for (const auto& [id, module] : modules_) {
    for (uint64_t a : module.globalAddresses) global = global || a == address;
  }
  if (poolBlocks_.count(address) || global) {
    return invalidValue("not a cuMemAlloc allocation (pool memory or a module global): " +
                        hex(address));
  }
  uint64_t bytes = 0, generation = 0;
  if (!memory_.exportable(address, owner_, &bytes, &generation)) {
    return invalidValue("not the base of an allocation of this context: " + hex(address));
  }
  *exported = {&memory_, address, bytes, generation};
  return Status::success();
}

Status EmuContext::ipcOpen(const IpcExportedAllocation& exported, uint64_t* address) {
  if (Status st = sticky(); !st.ok()) return st;
  if (exported.memorySpace != &memory_) {
    return Status::error(CUDA_ERROR_INVALID_DEVICE,
                         "the handle's memory is on another device, and pool devices do not map "
                         "each other's memory");
  }
  if (!memory_.openShared(exported.address, exported.generation, owner_)) {
    return Status::error(CUDA_ERROR_INVALID_HANDLE,
                         "the exported allocation was freed, or belongs to this context");
  }
  *address = exported.address;
  return Status::success();
}

Status EmuContext::ipcClose(uint64_t address) {
  // The memory may go with the last close: nothing queued here may still use it.
  drainAll();
  if (!memory_.closeShared(address, owner_)) {
    return invalidValue("not memory this context opened with cuIpcOpenMemHandle: " + hex(address));
  }
  return sticky();
}

Status EmuContext::ipcExportEvent(uint64_t event, IpcExportedEvent* exported) {
  std::shared_ptr<Event> e = findEvent(event);
  if (!e) return invalidHandle("unknown event " + hex(event));
  const unsigned needed = CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING;
  if ((e->flags & needed) != needed) {
    return invalidValue(
        "the event was not created with CU_EVENT_INTERPROCESS and CU_EVENT_DISABLE_TIMING");
  }
  exported->state = e;
  return Status::success();
}

// The opened event is the exporter's own state under a handle of this context: records and waits
// of either process reach the other. (Every emu context's events are this type: the server has one
// backend.)
Status EmuContext::ipcOpenEvent(const IpcExportedEvent& exported, uint64_t* event) {
  if (Status st = sticky(); !st.ok()) return st;
  auto e = std::static_pointer_cast<Event>(exported.state);
  if (!e) return invalidHandle("no exported event");
  *event = nextHandle_++;
  std::lock_guard lock(tablesMutex_);
  events_[*event] = std::move(e);
  return Status::success();
}

// ---- Virtual memory management (EmuMemory keeps the state; emu_memory_vmm.cc) ----

namespace {
Status vmmStatus(CUresult code, const std::string& what) {
  return code == CUDA_SUCCESS ? Status::success() : Status::error(code, what);
}
}  // namespace

Status EmuContext::vmmCreate(uint64_t bytes, bool shareable, uint64_t* handle) {
  return vmmStatus(memory_.vmmCreate(bytes, shareable, owner_, handle),
                   "cannot create a physical allocation of " + std::to_string(bytes) +
                       " bytes (a multiple of 2 MiB, within free device memory)");
}

Status EmuContext::vmmRetain(uint64_t address, uint64_t* handle) {
  return vmmStatus(memory_.vmmRetain(address, owner_, handle),
                   "nothing of this context is mapped at " + hex(address));
}

Status EmuContext::vmmExport(uint64_t handle, VmmExportedAllocation* exported) {
  std::shared_ptr<int> memfd;
  if (Status st = vmmStatus(memory_.vmmExport(handle, owner_, &memfd, &exported->bytes),
                            "not a live allocation handle of this context created with "
                            "requestedHandleTypes CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR");
      !st.ok()) {
    return st;
  }
  exported->memorySpace = &memory_;
  exported->state = memfd;
  return Status::success();
}

// A client's shared pinned memory as a VMM mapping of its file: reserved, mapped, made
// accessible, its handle let go (the mapping holds the memory). Not counted as device memory.
Status EmuContext::hostFileMap(const std::shared_ptr<int>& memfd, uint64_t bytes,
                               uint64_t* address) {
  uint64_t handle = 0, reserved = 0;
  if (CUresult r = memory_.vmmImport(memfd, bytes, owner_, &handle, kHostFileMapGranularity);
      r != CUDA_SUCCESS)
    return Status::error(r, "cannot take the host memory file");
  CUresult r = memory_.vmmReserve(bytes, 0, 0, owner_, &reserved, kHostFileMapGranularity);
  if (r == CUDA_SUCCESS)
    r = memory_.vmmMap(reserved, bytes, handle, 0, owner_, kHostFileMapGranularity);
  if (r == CUDA_SUCCESS) r = memory_.vmmSetAccess(reserved, bytes, true, owner_);
  uint64_t freed = 0;
  (void)memory_.vmmRelease(handle, owner_, &freed);
  if (r != CUDA_SUCCESS) {
    if (reserved) {
      (void)memory_.vmmUnmap(reserved, bytes, owner_, &freed);
      (void)memory_.vmmFree(reserved, bytes, owner_);
    }
    return Status::error(
        r, "no device address range of " + std::to_string(bytes) + " bytes for mapped host memory");
  }
  *address = reserved;
  return Status::success();
}

Status EmuContext::hostFileUnmap(uint64_t address, uint64_t bytes) {
  uint64_t freed = 0;
  CUresult r = memory_.vmmUnmap(address, bytes, owner_, &freed);
  if (r == CUDA_SUCCESS) r = memory_.vmmFree(address, bytes, owner_);
  return vmmStatus(r, "no mapped host memory of this context at " + hex(address));
}

Status EmuContext::vmmImport(const VmmExportedAllocation& exported, uint64_t* handle) {
  if (exported.memorySpace != &memory_) {
    return Status::error(CUDA_ERROR_INVALID_DEVICE,
                         "the shareable handle names memory of another device");
  }
  return vmmStatus(memory_.vmmImport(std::static_pointer_cast<int>(exported.state), exported.bytes,
                                     owner_, handle),
                   "cannot import the exported allocation");
}

Status EmuContext::vmmRelease(uint64_t handle, uint64_t* freed) {
  return vmmStatus(memory_.vmmRelease(handle, owner_, freed),
                   "not a live allocation handle of this context");
}

Status EmuContext::vmmReserve(uint64_t bytes, uint64_t alignment, uint64_t hint,
                              uint64_t* address) {
  return vmmStatus(
      memory_.vmmReserve(bytes, alignment, hint, owner_, address),
      "cannot reserve " + std::to_string(bytes) + " bytes aligned to " + std::to_string(alignment));
}

Status EmuContext::vmmFree(uint64_t address, uint64_t bytes) {
  return vmmStatus(memory_.vmmFree(address, bytes, owner_),
                   "not a whole reservation of this context with nothing mapped: " + hex(address));
}

Status EmuContext::vmmMap(uint64_t address, uint64_t bytes, uint64_t handle, uint64_t offset) {
  return vmmStatus(memory_.vmmMap(address, bytes, handle, offset, owner_),
                   "cannot map " + std::to_string(bytes) + " bytes at " + hex(address) +
                       ": unaligned, outside a reservation or the allocation, or already mapped");
}

Status EmuContext::vmmUnmap(uint64_t address, uint64_t bytes, uint64_t* freed) {
  // Nothing queued may still use the range once it is gone (the driver leaves that to the caller;
  // here a kernel reaching it would fault the server).
  drainAll();
  return vmmStatus(memory_.vmmUnmap(address, bytes, owner_, freed),
                   "not whole mappings of this context: " + hex(address));
}

Status EmuContext::vmmSetAccess(uint64_t address, uint64_t bytes, bool readWrite) {
  if (!readWrite) drainAll();  // as for an unmap
  return vmmStatus(memory_.vmmSetAccess(address, bytes, readWrite, owner_),
                   "not mapped throughout by this context: " + hex(address));
}

Status EmuContext::vmmGetAccess(uint64_t address, bool* readWrite) {
  return vmmStatus(memory_.vmmGetAccess(address, owner_, readWrite),
                   "nothing of this context is mapped at " + hex(address));
}

Status EmuContext::findPool(uint64_t pool, std::shared_ptr<EmuMemPool>* found) const {
  auto it = pools_.find(pool);
  if (it == pools_.end()) return invalidValue("unknown memory pool " + hex(pool));
  *found = it->second;
  return Status::success();
}

Status EmuContext::memPoolCreate(uint64_t* pool) {
  *pool = nextHandle_++;
  pools_[*pool] = std::make_shared<EmuMemPool>(memory_, owner_);
  return Status::success();
}

Status EmuContext::memPoolDestroy(uint64_t pool) {
  auto it = pools_.find(pool);
  if (pool == 0 || it == pools_.end()) {
    return invalidValue("not a memory pool this context created: " + hex(pool));
  }
  // Blocks still in use keep the pool alive (poolBlocks_, queued frees) until they are freed.
  it->second->destroy();
  pools_.erase(it);
  return Status::success();
}

Status EmuContext::memAllocAsync(uint64_t pool, uint64_t bytes, uint64_t stream,
                                 uint64_t* address) {
  if (Status st = sticky(); !st.ok()) return st;
  std::shared_ptr<EmuMemPool> from;
  if (Status st = findPool(pool, &from); !st.ok()) return st;
  if (!findStream(stream).queue) return invalidHandle("unknown stream " + hex(stream));
  if (Status st = from->allocate(bytes, stream, address); !st.ok()) return st;
  poolBlocks_[*address] = std::move(from);
  return Status::success();
}

Status EmuContext::memFreeAsync(uint64_t address, uint64_t stream) {
  auto block = poolBlocks_.find(address);
  if (block == poolBlocks_.end()) {
    // Memory from cuMemAlloc may be freed in stream order too.
    uint64_t base = 0, bytes = 0;
    if (!memory_.findAllocation(address, owner_, &base, &bytes) || base != address) {
      return invalidValue("not an allocation of this context: " + hex(address));
    }
    return enqueue(stream, [this, address] { memory_.release(address, owner_); });
  }
  std::shared_ptr<EmuMemPool> pool = block->second;
  if (Status st = enqueue(stream, [pool, address, stream] { pool->blockFreed(address, stream); });
      !st.ok()) {
    return st;
  }
  poolBlocks_.erase(block);
  return Status::success();
}

uint64_t EmuContext::memPoolIdleBytes() {
  uint64_t idle = 0;
  for (const auto& [id, pool] : pools_) idle += pool->idleBytes();
  return idle;
}

Status EmuContext::memPoolTrimTo(uint64_t pool, uint64_t minBytesToKeep) {
  std::shared_ptr<EmuMemPool> found;
  if (Status st = findPool(pool, &found); !st.ok()) return st;
  found->trimTo(minBytesToKeep);
  return Status::success();
}

Status EmuContext::memPoolGetAttribute(uint64_t pool, int attribute, uint64_t* value) {
  std::shared_ptr<EmuMemPool> found;
  if (Status st = findPool(pool, &found); !st.ok()) return st;
  return found->getAttribute(attribute, value);
}

Status EmuContext::memPoolSetAttribute(uint64_t pool, int attribute, uint64_t value) {
  std::shared_ptr<EmuMemPool> found;
  if (Status st = findPool(pool, &found); !st.ok()) return st;
  return found->setAttribute(attribute, value);
}

Status EmuContext::copyHostToDevice(uint64_t dst, const void* src, uint64_t bytes, uint64_t stream,
                                    bool async) {
  uint8_t* d = view(dst, bytes);
  if (!d) return invalidValue("invalid device range " + hex(dst) + "+" + std::to_string(bytes));
  if (async) {
    auto copy = std::make_shared<std::vector<uint8_t>>(static_cast<const uint8_t*>(src),
                                                       static_cast<const uint8_t*>(src) + bytes);
    return enqueue(stream, [d, copy] { std::memcpy(d, copy->data(), copy->size()); });
  }
  if (Status st = waitForStream(stream); !st.ok()) return st;
  if (bytes) std::memcpy(d, src, bytes);  // an empty copy may come with a null buffer
  return Status::success();
}

Status EmuContext::copyDeviceToHost(void* dst, uint64_t src, uint64_t bytes, uint64_t stream) {
  const uint8_t* s = view(src, bytes);
  if (!s) return invalidValue("invalid device range " + hex(src) + "+" + std::to_string(bytes));
  if (Status st = waitForStream(stream); !st.ok()) return st;
  if (bytes) std::memcpy(dst, s, bytes);  // an empty copy may come with a null buffer
  return Status::success();
}

Status EmuContext::copyDeviceToDevice(uint64_t dst, uint64_t src, uint64_t bytes, uint64_t stream,
                                      bool async) {
  uint8_t* d = view(dst, bytes);
  const uint8_t* s = view(src, bytes);
  if (!d || !s) return invalidValue("invalid device range in device-to-device copy");
  if (async) return enqueue(stream, [d, s, bytes] { std::memmove(d, s, bytes); });
  if (Status st = waitForStream(stream); !st.ok()) return st;
  std::memmove(d, s, bytes);
  return Status::success();
}

Status EmuContext::copy2D(const Copy2D& c, uint64_t stream, bool async) {
  if (c.widthBytes == 0 || c.height == 0) return Status::success();
  uint64_t srcExtent = extent2D(c.srcPitch, c.widthBytes, c.height);
  uint64_t dstExtent = extent2D(c.dstPitch, c.widthBytes, c.height);
  if (srcExtent == 0 || dstExtent == 0) return invalidValue("pitch smaller than the row width");
  const uint8_t* s =
      c.srcIsDevice ? view(c.srcDevice, srcExtent) : static_cast<const uint8_t*>(c.srcHost);
  uint8_t* d = c.dstIsDevice ? view(c.dstDevice, dstExtent) : static_cast<uint8_t*>(c.dstHost);
  if (!s || !d) return invalidValue("invalid device range in 2D copy");
  auto rows = [c](uint8_t* d, const uint8_t* s) {
    for (uint64_t r = 0; r < c.height; ++r) {
      std::memmove(d + r * c.dstPitch, s + r * c.srcPitch, c.widthBytes);
    }
  };
  if (async && c.dstIsDevice) {
    std::shared_ptr<std::vector<uint8_t>> hostCopy;
    if (!c.srcIsDevice) {
      hostCopy = std::make_shared<std::vector<uint8_t>>(s, s + srcExtent);
      s = hostCopy->data();
    }
    return enqueue(stream, [rows, d, s, hostCopy] { rows(d, s); });
  }
  if (Status st = waitForStream(stream); !st.ok()) return st;
  rows(d, s);
  return Status::success();
}

Status EmuContext::memset(uint64_t dst, uint32_t value, unsigned elementSize, uint64_t width,
                          uint64_t height, uint64_t pitch, uint64_t stream, bool async) {
  if (elementSize != 1 && elementSize != 2 && elementSize != 4) {
    return invalidValue("memset element size must be 1, 2 or 4");
  }
  if (width == 0 || height == 0) return Status::success();
  if (width > UINT64_MAX / elementSize) return invalidValue("memset too large");
  uint64_t rowBytes = width * elementSize;
  if (height == 1) pitch = rowBytes;
  uint64_t extent = extent2D(pitch, rowBytes, height);
  uint8_t* d = extent ? view(dst, extent) : nullptr;
  if (!d) return invalidValue("invalid device range " + hex(dst) + " in memset");
  if (reinterpret_cast<uintptr_t>(d) % elementSize != 0 || pitch % elementSize != 0) {
    return invalidValue("misaligned memset destination");
  }
  auto fill = [d, value, elementSize, width, height, pitch] {
    for (uint64_t r = 0; r < height; ++r) {
      uint8_t* row = d + r * pitch;
      switch (elementSize) {
        case 1:
          std::memset(row, static_cast<int>(value & 0xff), width);
          break;
        case 2: {
          uint16_t v = static_cast<uint16_t>(value);
          std::fill_n(reinterpret_cast<uint16_t*>(row), width, v);
          break;
        }
        default:
          std::fill_n(reinterpret_cast<uint32_t*>(row), width, value);
      }
    }
  };
  if (async) return enqueue(stream, fill);
  if (Status st = waitForStream(stream); !st.ok()) return st;
  fill();
  return Status::success();
}

// ---- Modules ----

Status EmuContext::moduleLoad(std::span<const uint8_t> image, uint64_t* module) {
  if (Status st = sticky(); !st.ok()) return st;
  int cc = device_.attributes[CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR] * 10 +
           device_.attributes[CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR];
  auto text = image::ptxForDevice(image, cc);
  if (!text) return text.status();
  auto loadedProgram = ptx::Module::load(text->ptx);
  if (!loadedProgram) {
    return Status::error(loadedProgram.status().code,
                         "PTX load failed: " + loadedProgram.status().message);
  }
  std::shared_ptr<ptx::Module> program = std::move(*loadedProgram);
  LoadedModule loaded{program, {}};
  for (const auto& g : program->globals()) {
    // A __managed__ variable is managed memory: whole pages of its own, which the client mirrors.
    uint64_t bytes = g.isManaged ? managedPageRound(g.size) : std::max<uint64_t>(g.size, 1);
    uint64_t address = memory_.allocate(bytes, owner_);
    if (!address) {
      for (uint64_t a : loaded.globalAddresses) memory_.release(a, owner_);
      return Status::error(CUDA_ERROR_OUT_OF_MEMORY, "no device memory for global " + g.name);
    }
    loaded.globalAddresses.push_back(address);
  }
  program->bindGlobals(loaded.globalAddresses);
  for (size_t i = 0; i < loaded.globalAddresses.size(); ++i) {
    std::vector<uint8_t> bytes = program->initialImage(i);
    if (uint8_t* d = view(loaded.globalAddresses[i], bytes.size()); d && !bytes.empty()) {
      std::memcpy(d, bytes.data(), bytes.size());
    }
  }
  *module = nextHandle_++;
  std::lock_guard lock(launchTablesMutex_);
  modules_[*module] = std::move(loaded);
  return Status::success();
}

Status EmuContext::moduleUnload(uint64_t module) {
  auto it = modules_.find(module);
  if (it == modules_.end()) return invalidHandle("unknown module " + hex(module));
  drainAll();  // running kernels may still read its globals
  for (uint64_t a : it->second.globalAddresses) memory_.release(a, owner_);
  std::lock_guard lock(launchTablesMutex_);
  std::erase_if(functions_, [module](const auto& f) { return f.second.module == module; });
  modules_.erase(it);
  return Status::success();
}

Status EmuContext::moduleFunctionNames(uint64_t module, std::vector<std::string>* names) {
  auto it = modules_.find(module);
  if (it == modules_.end()) return invalidHandle("unknown module " + hex(module));
  for (const ptx::KernelInfo& k : it->second.program->kernels()) names->push_back(k.name);
  return Status::success();
}

Status EmuContext::link(std::span<const LinkInput> inputs,
                        std::span<const std::pair<CUjit_option, uint64_t>> options,
                        LinkOutcome* outcome) {
  int cc = device_.attributes[CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR] * 10 +
           device_.attributes[CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR];
  bool verbose = false;
  for (auto [option, value] : options) {
    if (option == CU_JIT_LOG_VERBOSE) verbose = value != 0;
    // A target picks which of a fatbin's PTX is used, as it picks what the driver compiles for.
    if (option == CU_JIT_TARGET) cc = static_cast<int>(value);
  }
  emuLink(inputs, cc, verbose, outcome);
  return Status::success();
}

Status EmuContext::linkCheckInput(const LinkInput& input,
                                  std::span<const std::pair<CUjit_option, uint64_t>> options,
                                  LinkOutcome* outcome) {
  int cc = device_.attributes[CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR] * 10 +
           device_.attributes[CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR];
  for (auto [option, value] : options) {
    if (option == CU_JIT_TARGET) cc = static_cast<int>(value);
  }
  emuCheckLinkInput(input, cc, outcome);
  return Status::success();
}

std::vector<int32_t> EmuContext::functionAttributes(const Function& f) const {
  std::vector<int32_t> a(CU_FUNC_ATTRIBUTE_MAX, 0);
  const ptx::KernelInfo& k = *f.kernel;
  int cc = device_.attributes[CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR] * 10 +
           device_.attributes[CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR];
  a[CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK] = static_cast<int32_t>(k.maxThreadsPerBlock);
  a[CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES] = static_cast<int32_t>(k.staticSharedBytes);
  // The module's .const variables, laid out in order, as ptxas places them in one bank.
  uint64_t constBytes = 0;
  for (const ptx::GlobalVariable& g : f.program->globals()) {
    const uint64_t align = std::max<uint32_t>(g.align, 1);
    if (g.isConst) constBytes = (constBytes + align - 1) / align * align + g.size;
  }
  a[CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES] = static_cast<int32_t>(constBytes);
  a[CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES] = static_cast<int32_t>(k.localBytesPerThread);
  a[CU_FUNC_ATTRIBUTE_NUM_REGS] = static_cast<int32_t>(k.allocatedRegs);
  // The virtual architecture the PTX targets (75 for compute_75), not the PTX ISA version: CUB
  // picks its tuning policy (and so which of its kernels exist) from this value.
  a[CU_FUNC_ATTRIBUTE_PTX_VERSION] = static_cast<int32_t>(f.program->targetSm());
  a[CU_FUNC_ATTRIBUTE_BINARY_VERSION] = cc;
  a[CU_FUNC_ATTRIBUTE_CACHE_MODE_CA] = 0;
  a[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES] =
      f.maxDynamicSharedBytes
          ? f.maxDynamicSharedBytes
          : static_cast<int32_t>(ptx::kDefaultSharedBytes -
                                 std::min<uint32_t>(k.staticSharedBytes, ptx::kDefaultSharedBytes));
  a[CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT] = -1;
  // Thread-block clusters, from the kernel's directives (.reqnctapercluster, .explicitcluster).
  a[CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET] = k.explicitCluster ? 1 : 0;
  a[CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH] = static_cast<int32_t>(k.requiredCluster[0]);
  a[CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT] = static_cast<int32_t>(k.requiredCluster[1]);
  a[CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH] = static_cast<int32_t>(k.requiredCluster[2]);
  a[CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED] = f.nonPortableClusterSize ? 1 : 0;
  a[CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE] = f.clusterSchedulingPolicy;
  return a;
}

Status EmuContext::clusterShape(const Function& f, const LaunchShape& shape,
                                std::array<uint32_t, 3>* dims, bool* explicitCluster) const {
  const ptx::KernelInfo& k = *f.kernel;
  const bool fixed = k.requiredCluster[0] != 0;
  *dims = {1, 1, 1};
  *explicitCluster = shape.clustered() || k.explicitCluster;
  if (!*explicitCluster) return Status::success();
  if (!device_.attributes[CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH]) {
    return Status::error(CUDA_ERROR_NOT_SUPPORTED,
                         "the emu device runs thread-block clusters only at compute capability "
                         "9.0 and later (it reports CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH 0)");
  }
  auto shapeText = [](const std::array<uint32_t, 3>& c) {
    return std::to_string(c[0]) + "x" + std::to_string(c[1]) + "x" + std::to_string(c[2]);
  };
  const std::array<uint32_t, 3> required{k.requiredCluster[0], k.requiredCluster[1],
                                         k.requiredCluster[2]};
  if (fixed && shape.clustered() && shape.cluster != required) {
    return Status::error(CUDA_ERROR_INVALID_CLUSTER_SIZE,
                         "kernel " + k.name + " fixes its cluster at " + shapeText(required) +
                             "; the launch asks for " + shapeText(shape.cluster));
  }
  *dims = shape.clustered() ? shape.cluster : fixed ? required : std::array<uint32_t, 3>{1, 1, 1};
  const auto& c = *dims;
  if (shape.grid[0] % c[0] || shape.grid[1] % c[1] || shape.grid[2] % c[2]) {
    return Status::error(CUDA_ERROR_INVALID_CLUSTER_SIZE,
                         "the grid is not a whole number of " + shapeText(c) + " clusters");
  }
  const uint64_t ctas = uint64_t{c[0]} * c[1] * c[2];
  const uint32_t limit =
      f.nonPortableClusterSize ? ptx::kMaxClusterCtas : ptx::kPortableClusterCtas;
  if (ctas > limit || (k.maxClusterRank && ctas > k.maxClusterRank)) {
    return Status::error(
        CUDA_ERROR_INVALID_CLUSTER_SIZE,
        "a cluster of " + std::to_string(ctas) + " CTAs exceeds the limit of " +
            std::to_string(k.maxClusterRank ? std::min(limit, k.maxClusterRank) : limit) +
            (f.nonPortableClusterSize || k.maxClusterRank
                 ? std::string()
                 : std::string(" (16 with CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED)")));
  }
  return Status::success();
}

Status EmuContext::occupancyClusters(uint64_t function, const LaunchShape& shape,
                                     bool potentialSize, int* value) {
  std::unique_lock tables(launchTablesMutex_);
  auto it = functions_.find(function);
  if (it == functions_.end()) return invalidHandle("unknown function " + hex(function));
  const Function f = it->second;
  tables.unlock();
  if (!device_.attributes[CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH])
    return BackendContext::occupancyClusters(function, shape, potentialSize, value);
  int perSm = 0;
  const int blockSize = static_cast<int>(shape.block[0] * shape.block[1] * shape.block[2]);
  if (Status st = occupancyMaxActiveBlocks(function, blockSize, shape.sharedBytes, 0, &perSm);
      !st.ok()) {
    return st;
  }
  const uint64_t resident = uint64_t(perSm) * smCount_;  // CTAs of this shape at once
  if (potentialSize) {
    // The largest cluster the kernel and the device allow (whatever the launch's own shape),
    // no larger than the CTAs that fit at once.
    const ptx::KernelInfo& k = *f.kernel;
    uint64_t size = f.nonPortableClusterSize ? ptx::kMaxClusterCtas : ptx::kPortableClusterCtas;
    if (k.requiredCluster[0])
      size = uint64_t{k.requiredCluster[0]} * k.requiredCluster[1] * k.requiredCluster[2];
    else if (k.maxClusterRank)
      size = std::min<uint64_t>(size, k.maxClusterRank);
    *value = static_cast<int>(std::min(size, resident));
    return Status::success();
  }
  std::array<uint32_t, 3> dims{1, 1, 1};
  bool explicitCluster = false;
  // The grid does not matter here: only the cluster's shape must be one the kernel takes.
  LaunchShape one = shape;
  const auto& fixed = f.kernel->requiredCluster;
  one.grid = shape.clustered() ? shape.cluster
             : fixed[0]        ? std::array<uint32_t, 3>{fixed[0], fixed[1], fixed[2]}
                               : std::array<uint32_t, 3>{1, 1, 1};
  if (Status st = clusterShape(f, one, &dims, &explicitCluster); !st.ok()) return st;
  *value = static_cast<int>(resident / (uint64_t{dims[0]} * dims[1] * dims[2]));
  return Status::success();
}

Status EmuContext::moduleGetFunction(uint64_t module, const std::string& name,
                                     FunctionDescription* function) {
  auto it = modules_.find(module);
  if (it == modules_.end()) return invalidHandle("unknown module " + hex(module));
  const ptx::KernelInfo* kernel = it->second.program->findKernel(name);
  if (!kernel) return Status::error(CUDA_ERROR_NOT_FOUND, "no kernel named '" + name + "'");
  uint64_t id = 0;
  for (auto& [fid, f] : functions_) {
    if (f.module == module && f.kernel == kernel) id = fid;
  }
  if (!id) {
    id = nextHandle_++;
    std::lock_guard lock(launchTablesMutex_);
    functions_[id] = Function{module, it->second.program, kernel, 0};
  }
  function->handle = id;
  function->params.clear();
  for (const auto& p : kernel->params) function->params.push_back({p.offset, p.size});
  function->attributes = functionAttributes(functions_[id]);
  return Status::success();
}

Status EmuContext::moduleGetGlobal(uint64_t module, const std::string& name, uint64_t* address,
                                   uint64_t* bytes) {
  auto it = modules_.find(module);
  if (it == modules_.end()) return invalidHandle("unknown module " + hex(module));
  const auto& globals = it->second.program->globals();
  for (size_t i = 0; i < globals.size(); ++i) {
    if (globals[i].name == name) {
      *address = it->second.globalAddresses[i];
      *bytes = globals[i].size;
      return Status::success();
    }
  }
  return Status::error(CUDA_ERROR_NOT_FOUND, "no global named '" + name + "'");
}

Status EmuContext::moduleManagedRange(uint64_t module, uint64_t address, uint64_t* base,
                                      uint64_t* bytes) {
  auto it = modules_.find(module);
  if (it == modules_.end()) return invalidHandle("unknown module " + hex(module));
  *base = 0;
  *bytes = 0;
  const auto& globals = it->second.program->globals();
  for (size_t i = 0; i < globals.size(); ++i) {
    if (globals[i].isManaged && it->second.globalAddresses[i] == address) {
      *base = address;
      *bytes = managedPageRound(globals[i].size);
    }
  }
  return Status::success();
}

// ---- Kernels ----

Status EmuContext::launch(uint64_t function, const LaunchShape& shape, uint64_t stream,
                          std::span<const uint8_t> params) {
  // Held while the launch reads the tables, not while it queues (which may wait for streams).
  std::unique_lock tables(launchTablesMutex_);
  auto it = functions_.find(function);
  if (it == functions_.end()) return invalidHandle("unknown function " + hex(function));
  const Function& f = it->second;
  const auto& attr = device_.attributes;
  std::array<uint32_t, 3> cluster{1, 1, 1};
  bool explicitCluster = false;
  if (Status st = clusterShape(f, shape, &cluster, &explicitCluster); !st.ok()) return st;
  uint64_t threads = uint64_t{shape.block[0]} * shape.block[1] * shape.block[2];
  if (threads == 0 || shape.grid[0] == 0 || shape.grid[1] == 0 || shape.grid[2] == 0) {
    return invalidConfiguration("zero-sized grid or block");
  }
  if (threads > static_cast<uint64_t>(attr[CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK])) {
    // More threads than any block may have is CUDA_ERROR_INVALID_VALUE, not an invalid
    // configuration (observed on driver 580.159.04, H200: a block of 2048 threads).
    return invalidValue("block of " + std::to_string(threads) + " threads exceeds the device's " +
                        std::to_string(attr[CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK]));
  }
  if (threads > f.kernel->maxThreadsPerBlock ||
      shape.block[0] > static_cast<uint32_t>(attr[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X]) ||
      shape.block[1] > static_cast<uint32_t>(attr[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y]) ||
      shape.block[2] > static_cast<uint32_t>(attr[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z])) {
    return invalidConfiguration(
        "block of " + std::to_string(shape.block[0]) + "x" + std::to_string(shape.block[1]) + "x" +
        std::to_string(shape.block[2]) + " threads exceeds the limit of " +
        std::to_string(std::min<uint32_t>(f.kernel->maxThreadsPerBlock, 1024)));
  }
  if (shape.grid[1] > static_cast<uint32_t>(attr[CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y]) ||
      shape.grid[2] > static_cast<uint32_t>(attr[CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z]) ||
      shape.grid[0] > static_cast<uint32_t>(attr[CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X])) {
    return invalidConfiguration("grid dimensions exceed the device limits");
  }
  uint32_t sharedLimit = f.maxDynamicSharedBytes ? static_cast<uint32_t>(f.maxDynamicSharedBytes) +
                                                       f.kernel->staticSharedBytes
                                                 : ptx::kDefaultSharedBytes;
  if (uint64_t{f.kernel->staticSharedBytes} + shape.sharedBytes > sharedLimit) {
    return invalidConfiguration("shared memory request of " + std::to_string(shape.sharedBytes) +
                                " dynamic bytes exceeds the block limit");
  }
  if (params.size() < f.kernel->paramBytes) {
    return invalidValue("parameter block has " + std::to_string(params.size()) + " bytes, kernel " +
                        f.kernel->name + " takes " + std::to_string(f.kernel->paramBytes));
  }
  std::vector<uint8_t> block(params.begin(), params.end());
  ptx::LaunchConfig config;
  for (int i = 0; i < 3; ++i) {
    config.grid[i] = shape.grid[i];
    config.block[i] = shape.block[i];
  }
  config.dynamicSharedBytes = shape.sharedBytes;
  config.maxSharedBytesOptIn = f.maxDynamicSharedBytes ? sharedLimit : 0;
  std::copy(cluster.begin(), cluster.end(), config.cluster);
  config.explicitCluster = explicitCluster;
  if (shape.cooperative) {
    if (Status st = checkCooperativeGrid(function, shape); !st.ok()) return st;
    config.cooperative = true;
    cooperativeLaunched_ = true;
  }
  auto program = f.program;
  const ptx::KernelInfo* kernel = f.kernel;
  // The module's texture and surface references as bound now: later binding affects only later
  // launches, as with the driver. A reference the kernel uses must be bound.
  std::shared_ptr<const ReferenceBindings> references;
  if (auto m = modules_.find(f.module); m != modules_.end()) references = m->second.references;
  if (!references) references = std::make_shared<ReferenceBindings>();
  if (Status st = checkReferencesBound(*program, *kernel, *references); !st.ok()) return st;
  const bool gridWorkspace = config.cooperative || cooperativeLaunched_;
  std::shared_ptr<const TextureObjects> textures = textures_;
  tables.unlock();
  return enqueue(stream, [this, program, kernel, config, block = std::move(block), gate = gate_,
                          textures, references, gridWorkspace]() mutable {
    OwnerDeviceMemory memory(memory_, owner_);
    // A cooperative launch gets its own grid workspace, zeroed, for the launch's lifetime, as the
    // driver provides one to each cooperative launch; so does every launch after the context's
    // first cooperative one (cooperativeLaunched_).
    struct Workspace {
      EmuMemory& memory;
      uint64_t owner, address = 0;
      ~Workspace() {
        if (address) memory.release(address, owner);
      }
    } workspace{memory_, owner_};
    if (gridWorkspace) {
      constexpr uint32_t kWorkspaceBytes = 2 * sizeof(uint32_t);  // {wsSize, barrier}
      workspace.address = memory_.allocate(kWorkspaceBytes, owner_);
      auto* words =
          workspace.address
              ? static_cast<uint32_t*>(memory.translate(workspace.address, kWorkspaceBytes))
              : nullptr;
      if (!words) {
        fail(CUDA_ERROR_OUT_OF_MEMORY,
             "kernel " + kernel->name + ": no device memory for the grid workspace");
        return;
      }
      words[0] = kWorkspaceBytes;
      words[1] = 0;
      config.gridWorkspace = workspace.address;
    }
    ptx::LaunchServices services;
    services.printfSink = [this](std::string_view text) {
      std::lock_guard lock(outputMutex_);
      output_.append(text);
    };
    services.workerThreads = options_.workerThreads;
    services.genericPathOnly = options_.genericPathOnly;
    services.stepBudget = options_.stepBudget;
    services.cancel = &cancelled_;
    services.heap = &heap_;
    services.setConditional = [this](uint64_t handle, uint32_t value) {
      return setConditional(handle, value);
    };
    // Objects by their handles, and the module's references by textureReferenceHandle.
    struct LaunchTextures final : ptx::TextureTable {
      const TextureObjects* objects;
      const ReferenceBindings* references;
      const ptx::TextureView* find(uint64_t handle) const override {
        if (handle >= ptx::kTextureReferenceHandleBase) {
          auto it =
              references->find(static_cast<uint32_t>(handle - ptx::kTextureReferenceHandleBase));
          return it == references->end() ? nullptr : &it->second;
        }
        return objects->find(handle);
      }
    } launchTextures;
    launchTextures.objects = textures.get();
    launchTextures.references = references.get();
    services.textures = &launchTextures;
    if (gate) gate->enter();  // waits for this tenant's turn on the device
    auto started = std::chrono::steady_clock::now();
    ptx::LaunchResult r = ptx::launch(*program, *kernel, config, block.data(), memory, services);
    if (gate) {
      gate->leave(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    }
    if (!r.status.ok())
      fail(r.status.code, "kernel " + kernel->name + " failed: " + r.status.message);
  });
}

Status EmuContext::funcSetAttribute(uint64_t function, int attribute, int value) {
  auto it = functions_.find(function);
  if (it == functions_.end()) return invalidHandle("unknown function " + hex(function));
  switch (attribute) {
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: {
      int limit = static_cast<int>(ptx::kMaxOptInSharedBytes) -
                  static_cast<int>(it->second.kernel->staticSharedBytes);
      if (value < 0 || value > limit)
        return invalidValue("dynamic shared memory size out of range");
      std::lock_guard lock(launchTablesMutex_);
      it->second.maxDynamicSharedBytes = value;
      return Status::success();
    }
    case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED: {
      if (value != 0 && value != 1)
        return invalidValue("NON_PORTABLE_CLUSTER_SIZE_ALLOWED is 0 or 1");
      std::lock_guard lock(launchTablesMutex_);
      it->second.nonPortableClusterSize = value == 1;
      return Status::success();
    }
    case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE: {
      if (value < CU_CLUSTER_SCHEDULING_POLICY_DEFAULT ||
          value > CU_CLUSTER_SCHEDULING_POLICY_LOAD_BALANCING)
        return invalidValue("unknown cluster scheduling policy " + std::to_string(value));
      std::lock_guard lock(launchTablesMutex_);
      it->second.clusterSchedulingPolicy = value;  // a hint: every cluster runs at once anyway
      return Status::success();
    }
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
      return Status::success();  // a hint without effect on a CPU device
    default:
      return invalidValue("function attribute " + std::to_string(attribute) + " is read-only");
  }
}

Status EmuContext::checkCooperativeGrid(uint64_t function, const LaunchShape& shape) {
  int blockSize = static_cast<int>(shape.block[0] * shape.block[1] * shape.block[2]);
  int perSm = 0;
  if (Status st = occupancyMaxActiveBlocks(function, blockSize, shape.sharedBytes, 0, &perSm);
      !st.ok()) {
    return st;
  }
  // A green context's kernels have only its partition's SMs.
  uint64_t resident = uint64_t(perSm) * uint64_t(smCount_);
  uint64_t blocks = uint64_t{shape.grid[0]} * shape.grid[1] * shape.grid[2];
  if (blocks > resident) {
    return Status::error(
        CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE,
        "cooperative launch of " + std::to_string(blocks) + " blocks; the device holds at most " +
            std::to_string(resident) + " of this kernel at once (" + std::to_string(perSm) +
            " per multiprocessor, " + std::to_string(smCount_) + " multiprocessors)");
  }
  return Status::success();
}

Status EmuContext::occupancyMaxActiveBlocks(uint64_t function, int blockSize,
                                            uint64_t dynamicSharedBytes, unsigned /*flags*/,
                                            int* numBlocks) {
  auto it = functions_.find(function);
  if (it == functions_.end()) return invalidHandle("unknown function " + hex(function));
  // The calculator sees what cuFuncGetAttribute reports, as it does on a GPU.
  const std::vector<int32_t> a = functionAttributes(it->second);
  OccupancyFunction f;
  f.maxThreadsPerBlock = a[CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK];
  f.numRegs = a[CU_FUNC_ATTRIBUTE_NUM_REGS];
  f.staticSharedBytes = static_cast<uint64_t>(a[CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES]);
  f.maxDynamicSharedBytes =
      static_cast<uint64_t>(a[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES]);
  *numBlocks = maxActiveBlocksPerMultiprocessor(OccupancyDevice::fromAttributes(device_.attributes),
                                                f, blockSize, dynamicSharedBytes);
  return Status::success();
}

// ---- Streams and events ----

Status EmuContext::streamCreate(unsigned flags, int /*priority*/, uint64_t* stream) {
  if (flags & ~static_cast<unsigned>(CU_STREAM_NON_BLOCKING)) {
    return invalidValue("unknown stream flags");
  }
  *stream = nextHandle_++;
  auto queue = std::make_shared<StreamQueue>();
  std::lock_guard lock(tablesMutex_);
  streams_[*stream] = Stream{flags, std::move(queue)};
  return Status::success();
}

Status EmuContext::streamDestroy(uint64_t stream) {
  std::shared_ptr<StreamQueue> queue;
  {
    std::lock_guard lock(tablesMutex_);
    auto it = streams_.find(stream);
    if (stream == 0 || it == streams_.end() || stream >= kConditionalHelperStreams) {
      return invalidHandle("unknown stream " + hex(stream));
    }
    queue = std::move(it->second.queue);
    streams_.erase(it);
  }
  // Its queued work finishes first, as before; a wait still holding the queue then ends too, and
  // whoever lets go of the queue last stops its worker.
  queue->drain();
  return Status::success();
}

Status EmuContext::streamSynchronize(uint64_t stream) { return waitForStream(stream); }

Status EmuContext::streamQuery(uint64_t stream) {
  Stream s = findStream(stream);
  if (!s.queue) return invalidHandle("unknown stream " + hex(stream));
  if (Status st = sticky(); !st.ok()) return st;
  return s.queue->idle() ? Status::success() : Status::error(CUDA_ERROR_NOT_READY, "");
}

Status EmuContext::streamWaitEvent(uint64_t stream, uint64_t event) {
  std::shared_ptr<Event> e = findEvent(event);
  if (!e) return invalidHandle("unknown event " + hex(event));
  uint64_t epoch;
  {
    std::lock_guard lock(e->mutex);
    epoch = e->recorded;
  }
  if (epoch == 0) {
    return findStream(stream).queue ? Status::success() : invalidHandle("unknown stream");
  }
  // The record may be another session's (an event opened through CUDA IPC), which may never come:
  // a context being destroyed stops waiting.
  return enqueue(stream, [this, e, epoch] {
    std::unique_lock lock(e->mutex);
    while (e->completed < epoch && !cancelled_) {
      e->reached.wait_for(lock, std::chrono::milliseconds(50));
    }
  });
}

Status EmuContext::eventCreate(unsigned flags, uint64_t* event) {
  const unsigned known = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
  if (flags & ~known) return invalidValue("unknown event flags");
  *event = nextHandle_++;
  auto e = std::make_shared<Event>();
  e->flags = flags;
  std::lock_guard lock(tablesMutex_);
  events_[*event] = std::move(e);
  return Status::success();
}

Status EmuContext::eventDestroy(uint64_t event) {
  // A pending record still completes, and a wait on it still ends: both hold their own reference.
  std::lock_guard lock(tablesMutex_);
  if (events_.erase(event) == 0) return invalidHandle("unknown event " + hex(event));
  return Status::success();
}

Status EmuContext::eventRecord(uint64_t event, uint64_t stream) {
  std::shared_ptr<Event> e = findEvent(event);
  if (!e) return invalidHandle("unknown event " + hex(event));
  if (!findStream(stream).queue) return invalidHandle("unknown stream " + hex(stream));
  uint64_t epoch;
  {
    std::lock_guard lock(e->mutex);
    epoch = ++e->recorded;
  }
  return enqueue(stream, [e, epoch] {
    std::lock_guard lock(e->mutex);
    e->completed = std::max(e->completed, epoch);
    e->when = std::chrono::steady_clock::now();
    e->reached.notify_all();
  });
}

Status EmuContext::eventSynchronize(uint64_t event) {
  std::shared_ptr<Event> e = findEvent(event);
  if (!e) return invalidHandle("unknown event " + hex(event));
  {
    std::unique_lock lock(e->mutex);
    uint64_t epoch = e->recorded;
    // If the context broke, the record will never run: stop waiting then.
    while (e->completed < epoch) {
      if (!sticky().ok()) break;
      e->reached.wait_for(lock, std::chrono::milliseconds(50));
    }
  }
  return sticky();
}

Status EmuContext::eventQuery(uint64_t event) {
  std::shared_ptr<Event> e = findEvent(event);
  if (!e) return invalidHandle("unknown event " + hex(event));
  if (Status st = sticky(); !st.ok()) return st;
  std::lock_guard lock(e->mutex);
  return e->completed >= e->recorded ? Status::success() : Status::error(CUDA_ERROR_NOT_READY, "");
}

Status EmuContext::eventElapsedTime(uint64_t start, uint64_t end, float* milliseconds) {
  std::shared_ptr<Event> a = findEvent(start);
  std::shared_ptr<Event> b = findEvent(end);
  if (!a || !b) return invalidHandle("unknown event");
  if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING) {
    return invalidHandle("event created with CU_EVENT_DISABLE_TIMING");
  }
  std::scoped_lock lock(a->mutex, b->mutex);
  if (a->recorded == 0 || b->recorded == 0) return invalidHandle("event was never recorded");
  if (a->completed < a->recorded || b->completed < b->recorded) {
    return Status::error(CUDA_ERROR_NOT_READY, "");
  }
  *milliseconds = std::chrono::duration<float, std::milli>(b->when - a->when).count();
  return Status::success();
}

Status EmuContext::synchronize() {
  drainAll();
  return sticky();
}

Status EmuContext::idle() {
  if (!sticky().ok()) return Status::error(CUDA_ERROR_NOT_READY, "an error to report");
  for (const auto& queue : streamQueues(StreamSet::kAll)) {
    if (!queue->idle()) return Status::error(CUDA_ERROR_NOT_READY, "");
  }
  return Status::success();
}

std::string EmuContext::takeDeviceOutput() {
  std::lock_guard lock(outputMutex_);
  std::string out;
  out.swap(output_);
  return out;
}

}  // namespace gpupool::server::emu
