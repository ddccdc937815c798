#include "server/backends/cuda/cuda_context.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

#include "common/hex.h"
#include "gpupool/image/image_kind.h"

namespace gpupool::server {
namespace {

// Kernel parameters are limited to 32764 bytes, so no kernel has more parameters than this; it
// bounds the cuFuncGetParamInfo loop against a driver that never says "no more".
constexpr size_t kMaxKernelParams = 32768;

// The driver reads and writes the REUSE_* pool policies as int, the other attributes as
// cuuint64_t.
bool intPoolAttribute(int attribute) {
  return attribute == CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES ||
         attribute == CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC ||
         attribute == CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES;
}

Status invalidHandle(const char* what, uint64_t id) {
  return Status::error(CUDA_ERROR_INVALID_HANDLE,
                       std::string("unknown ") + what + " handle " + std::to_string(id));
}

}  // namespace

Status CudaContext::create(std::shared_ptr<CudaDriver> driver, CUdevice device, unsigned flags,
                           std::shared_ptr<std::atomic<uint64_t>> deviceMemoryUsed,
                           transport::PinnedMemory* pinnedMemory,
                           std::unique_ptr<BackendContext>* context) {
  CUcontext handle = nullptr;
  // Null creation parameters ask for a regular context (no affinity, no CIG).
  Status status = driver->ctxCreateV4.fn != nullptr
                      ? driver->call(driver->ctxCreateV4, &handle, nullptr, flags, device)
                      : driver->call(driver->ctxCreateV2, &handle, flags, device);
  if (!status.ok()) return status;
  context->reset(new CudaContext(std::move(driver), handle, device, std::move(deviceMemoryUsed),
                                 pinnedMemory));
  return Status::success();
}

namespace {

// The driver's split of the device's SMs into one group of exactly `smCount`: by the default
// (co-scheduled) rules first, then treating SMs independently, which allows finer partitions.
Status splitDeviceSms(const CudaDriver& driver, CUdevice device, unsigned smCount,
                      CUdevResource* group) {
  CUdevResource whole{};
  if (Status st = driver.call(driver.deviceGetDevResource, device, &whole, CU_DEV_RESOURCE_TYPE_SM);
      !st.ok()) {
    return st;
  }
  unsigned offered = 0;
  for (unsigned flags : {0u, unsigned{CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING}}) {
    unsigned groups = 1;
    CUdevResource candidate{};
    if (!driver
             .call(driver.devSmResourceSplitByCount, &candidate, &groups, &whole, nullptr, flags,
                   smCount)
             .ok() ||
        groups != 1) {
      continue;
    }
    offered = candidate.sm.smCount;
    if (offered == smCount) {
      *group = candidate;
      return Status::success();
    }
  }
  return Status::error(CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION,
                       "the driver cannot split " + std::to_string(smCount) + " of the device's " +
                           std::to_string(whole.sm.smCount) + " SMs into one group (it offers " +
                           std::to_string(offered) + ")");
}

}  // namespace

Status CudaContext::createGreen(std::shared_ptr<CudaDriver> driver, CUdevice device,
                                unsigned smCount,
                                std::shared_ptr<std::atomic<uint64_t>> deviceMemoryUsed,
                                transport::PinnedMemory* pinnedMemory,
                                std::unique_ptr<BackendContext>* context) {
  CUdevResource group{};
  if (Status st = splitDeviceSms(*driver, device, smCount, &group); !st.ok()) return st;
  CUdevResourceDesc desc = nullptr;
  if (Status st = driver->call(driver->devResourceGenerateDesc, &desc, &group, 1u); !st.ok()) {
    return st;
  }
  CUgreenCtx green = nullptr;
  if (Status st = driver->call(driver->greenCtxCreate, &green, desc, device,
                               unsigned{CU_GREEN_CTX_DEFAULT_STREAM});
      !st.ok()) {
    return st;
  }
  CUcontext handle = nullptr;
  if (Status st = driver->call(driver->ctxFromGreenCtx, &handle, green); !st.ok()) {
    (void)driver->call(driver->greenCtxDestroy, green);
    return st;
  }
  auto* created =
      new CudaContext(std::move(driver), handle, device, std::move(deviceMemoryUsed), pinnedMemory);
  created->green_ = green;
  context->reset(created);
  return Status::success();
}

CudaContext::CudaContext(std::shared_ptr<CudaDriver> driver, CUcontext context, CUdevice device,
                         std::shared_ptr<std::atomic<uint64_t>> deviceMemoryUsed,
                         transport::PinnedMemory* pinnedMemory)
    : driver_(std::move(driver)),
      context_(context),
      device_(device),
      deviceMemoryUsed_(std::move(deviceMemoryUsed)),
      pinnedMemory_(pinnedMemory) {}

CudaContext::~CudaContext() {
  // Errors are ignored throughout: after a kernel fault every call returns the sticky error, and
  // cuCtxDestroy releases whatever the explicit calls could not.
  (void)makeCurrent();
  releasePendingWaits();  // else a stream held by a wait could hold the frees below forever
  gated_.reset();         // after the waits, which could hold its kernels' admission
  staging_.reset();       // waits for its transfers, so no copy is left reading freed memory
  if (conditionalHome_ != nullptr) (void)driver_->call(driver_->graphDestroy, conditionalHome_);
  for (CUevent event : events_.takeAll()) (void)driver_->call(driver_->eventDestroy, event);
  for (CUstream stream : streams_.takeAll()) (void)driver_->call(driver_->streamDestroy, stream);
  for (auto& [id, module] : modules_) (void)driver_->call(driver_->moduleUnload, module);
  vmmReleaseAll();
  textureReleaseAll();
  arrayReleaseAll();
  for (auto& [base, range] : addresses_.ranges()) {
    if (range.owner == DeviceAddressMap::kAllocation) {
      (void)driver_->call(driver_->memFree, static_cast<CUdeviceptr>(base));
    }
  }
  // Pools are the device's, not the context's: the ones this context made go with it.
  for (auto& [id, pool] : pools_) (void)driver_->call(driver_->memPoolDestroy, pool);
  *deviceMemoryUsed_ -= memoryUsed_;
  // A green context's CUcontext is the green context's own, ended with it.
  if (green_) {
    (void)driver_->call(driver_->greenCtxDestroy, green_);
  } else {
    (void)driver_->call(driver_->ctxDestroy, context_);
  }
}

Status CudaContext::makeCurrent() {
  CudaDriver::setCaller(owner_);
  return driver_->call(driver_->ctxSetCurrent, context_);
}

Status CudaContext::findStream(uint64_t id, CUstream* stream) const {
  if (id == 0) {
    *stream = nullptr;  // the legacy default stream
    return Status::success();
  }
  std::optional<CUstream> found = streams_.find(id);
  if (!found) return invalidHandle("stream", id);
  *stream = *found;
  return Status::success();
}

Status CudaContext::findEvent(uint64_t id, CUevent* event) const {
  std::optional<CUevent> found = events_.find(id);
  if (!found) return invalidHandle("event", id);
  *event = *found;
  return Status::success();
}

Status CudaContext::findFunction(uint64_t id, const Function** function) const {
  auto it = functions_.find(id);
  if (it == functions_.end()) return invalidHandle("function", id);
  *function = &it->second;
  return Status::success();
}

Status CudaContext::checkRange(const char* what, uint64_t address, uint64_t bytes) const {
  if (addresses_.covers(address, bytes)) return Status::success();
  return Status::error(CUDA_ERROR_INVALID_VALUE, std::string(what) + " [" + hex(address) + ", +" +
                                                     std::to_string(bytes) +
                                                     ") is not inside memory of this context");
}

Status CudaContext::checkPitchedRange(const char* what, uint64_t address, uint64_t pitch,
                                      uint64_t rowBytes, uint64_t height) const {
  // The rows span (height-1)*pitch + rowBytes bytes from `address`.
  uint64_t max = std::numeric_limits<uint64_t>::max();
  if (pitch != 0 && height - 1 > (max - rowBytes) / pitch) {
    return Status::error(CUDA_ERROR_INVALID_VALUE, std::string(what) + " extent overflows");
  }
  return checkRange(what, address, (height - 1) * pitch + rowBytes);
}

// --- Memory ---

void CudaContext::noteAllocation(CUdeviceptr address, uint64_t bytes) {
  addresses_.add(address, bytes, DeviceAddressMap::kAllocation);
  memoryUsed_ += bytes;
  memoryPeak_ = std::max(memoryPeak_.load(), memoryUsed_.load());
  *deviceMemoryUsed_ += bytes;
}

Status CudaContext::freeAllocation(uint64_t address, const std::function<Status()>& free) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  auto range = addresses_.find(address);
  if (!range || range->base != address || range->owner != DeviceAddressMap::kAllocation) {
    return Status::error(CUDA_ERROR_INVALID_VALUE,
                         hex(address) + " is not an allocation of this context");
  }
  if (Status s = free(); !s.ok()) return s;
  addresses_.removeAllocation(address);
  memoryUsed_ -= range->bytes;
  *deviceMemoryUsed_ -= range->bytes;
  return Status::success();
}

Status CudaContext::memAlloc(uint64_t bytes, uint64_t* address) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  CUdeviceptr pointer = 0;
  if (Status s = driver_->call(driver_->memAlloc, &pointer, bytes); !s.ok()) return s;
  noteAllocation(pointer, bytes);
  *address = pointer;
  return Status::success();
}

Status CudaContext::memFree(uint64_t address) {
  return freeAllocation(
      address, [&] { return driver_->call(driver_->memFree, static_cast<CUdeviceptr>(address)); });
}

Status CudaContext::createPool(CUmemoryPool* pool) {
  // Device memory of this context's device, not exportable (the pool serves no IPC).
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = device_;
  return driver_->call(driver_->memPoolCreate, pool, &props);
}

Status CudaContext::findPool(uint64_t id, CUmemoryPool* pool) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  auto it = pools_.find(id);
  if (it != pools_.end()) {
    *pool = it->second;
    return Status::success();
  }
  if (id != 0) return Status::error(CUDA_ERROR_INVALID_VALUE, "unknown memory pool " + hex(id));
  if (Status s = createPool(pool); !s.ok()) return s;
  pools_[0] = *pool;
  return Status::success();
}

// --- CUDA IPC ---

namespace {
Status ipcRefused() {
  return Status::error(
      CUDA_ERROR_NOT_SUPPORTED,
      "CUDA IPC is not served by the cuda backend: one server process holds every "
      "session's contexts, the driver refuses to open an IPC handle in the process "
      "that exported it, and one context's cuMemAlloc memory is not mapped in "
      "another's");
}
}  // namespace

Status CudaContext::ipcExport(uint64_t /*address*/, IpcExportedAllocation* /*exported*/) {
  return ipcRefused();
}

Status CudaContext::ipcOpen(const IpcExportedAllocation& /*exported*/, uint64_t* /*address*/) {
  return ipcRefused();
}

Status CudaContext::ipcClose(uint64_t /*address*/) { return ipcRefused(); }

Status CudaContext::memPoolCreate(uint64_t* pool) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  CUmemoryPool created = nullptr;
  if (Status s = createPool(&created); !s.ok()) return s;
  *pool = mintId();
  pools_[*pool] = created;
  return Status::success();
}

Status CudaContext::memPoolDestroy(uint64_t pool) {
  auto it = pools_.find(pool);
  if (pool == 0 || it == pools_.end()) {
    return Status::error(CUDA_ERROR_INVALID_VALUE,
                         "not a memory pool this context created: " + hex(pool));
  }
  if (Status s = driver_->call(driver_->memPoolDestroy, it->second); !s.ok()) return s;
  pools_.erase(it);
  return Status::success();
}

Status CudaContext::memAllocAsync(uint64_t pool, uint64_t bytes, uint64_t stream,
                                  uint64_t* address) {
  CUmemoryPool from = nullptr;
  if (Status s = findPool(pool, &from); !s.ok()) return s;
  CUstream cuStream = nullptr;
  if (Status s = findStream(stream, &cuStream); !s.ok()) return s;
  CUdeviceptr pointer = 0;
  if (Status s = driver_->call(driver_->memAllocFromPoolAsync, &pointer, bytes, from, cuStream);
      !s.ok()) {
    return s;
  }
  noteAllocation(pointer, bytes);
  *address = pointer;
  return Status::success();
}

Status CudaContext::memFreeAsync(uint64_t address, uint64_t stream) {
  CUstream cuStream = nullptr;
  if (Status s = findStream(stream, &cuStream); !s.ok()) return s;
  return freeAllocation(address, [&] {
    return driver_->call(driver_->memFreeAsync, static_cast<CUdeviceptr>(address), cuStream);
  });
}

Status CudaContext::memPoolTrimTo(uint64_t pool, uint64_t minBytesToKeep) {
  CUmemoryPool found = nullptr;
  if (Status s = findPool(pool, &found); !s.ok()) return s;
  return driver_->call(driver_->memPoolTrimTo, found, static_cast<size_t>(minBytesToKeep));
}

uint64_t CudaContext::memPoolIdleBytes() {
  uint64_t idle = 0;
  for (auto& [id, pool] : pools_) {
    cuuint64_t reserved = 0, used = 0;
    if (driver_
            ->call(driver_->memPoolGetAttribute, pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT,
                   static_cast<void*>(&reserved))
            .ok() &&
        driver_
            ->call(driver_->memPoolGetAttribute, pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT,
                   static_cast<void*>(&used))
            .ok() &&
        reserved > used) {
      idle += reserved - used;
    }
  }
  return idle;
}

Status CudaContext::memPoolGetAttribute(uint64_t pool, int attribute, uint64_t* value) {
  CUmemoryPool found = nullptr;
  if (Status s = findPool(pool, &found); !s.ok()) return s;
  auto which = static_cast<CUmemPool_attribute>(attribute);
  if (intPoolAttribute(attribute)) {
    int flag = 0;
    Status s = driver_->call(driver_->memPoolGetAttribute, found, which, &flag);
    *value = static_cast<uint64_t>(flag);
    return s;
  }
  cuuint64_t wide = 0;
  Status s = driver_->call(driver_->memPoolGetAttribute, found, which, &wide);
  *value = wide;
  return s;
}

Status CudaContext::memPoolSetAttribute(uint64_t pool, int attribute, uint64_t value) {
  CUmemoryPool found = nullptr;
  if (Status s = findPool(pool, &found); !s.ok()) return s;
  auto which = static_cast<CUmemPool_attribute>(attribute);
  if (intPoolAttribute(attribute)) {
    int flag = static_cast<int>(value);
    return driver_->call(driver_->memPoolSetAttribute, found, which, &flag);
  }
  cuuint64_t wide = value;
  return driver_->call(driver_->memPoolSetAttribute, found, which, &wide);
}

// Applied to this client context's own driver context, where its kernels run: a kernel that
// recurses deeper than the default 1 KiB stack needs it (without it the launch faults).
Status CudaContext::limit(uint32_t which, bool set, uint64_t value, uint64_t* held) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  const auto limit = static_cast<CUlimit>(which);
  if (set) {
    if (Status s = driver_->call(driver_->ctxSetLimit, limit, static_cast<size_t>(value));
        !s.ok()) {
      return s;
    }
  }
  size_t now = 0;
  if (Status s = driver_->call(driver_->ctxGetLimit, &now, limit); !s.ok()) return s;
  *held = now;
  return Status::success();
}

Status CudaContext::memGetInfo(uint64_t* freeBytes, uint64_t* totalBytes) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  size_t free = 0, total = 0;
  if (Status s = driver_->call(driver_->memGetInfo, &free, &total); !s.ok()) return s;
  *freeBytes = free;
  *totalBytes = total;
  return Status::success();
}

Status CudaContext::memGetAddressRange(uint64_t address, uint64_t* base, uint64_t* bytes) {
  // Answered from this context's own ranges: asking the driver would reveal other tenants'.
  auto range = addresses_.find(address);
  if (!range) {
    return Status::error(CUDA_ERROR_NOT_FOUND,
                         hex(address) + " is not inside memory of this context");
  }
  *base = range->base;
  *bytes = range->bytes;
  return Status::success();
}

// --- Copies ---

const std::map<uint64_t, uint64_t>* CudaContext::managedVariablesAround(uint64_t address,
                                                                        uint64_t bytes) const {
  const uint64_t end = address + bytes;
  for (const auto& [module, ranges] : managedRanges_) {
    auto range = ranges.upper_bound(address);
    if (range == ranges.begin()) continue;
    --range;
    if (end > range->first + range->second) continue;
    auto variables = managedVariables_.find(module);
    return variables != managedVariables_.end() ? &variables->second : nullptr;
  }
  return nullptr;
}

template <typename Copy>
Status CudaContext::copyManagedVariables(const std::map<uint64_t, uint64_t>& variables,
                                         uint64_t address, uint64_t bytes, uint64_t stream,
                                         CUstream cuStream, Copy copy) {
  if (stream != 0) {
    if (Status s = driver_->call(driver_->streamSynchronize, cuStream); !s.ok()) return s;
  }
  const uint64_t end = address + bytes;
  for (const auto& [variable, size] : variables) {
    const uint64_t from = std::max(address, variable), to = std::min(end, variable + size);
    if (from >= to) continue;
    if (Status s = copy(from, from - address, to - from); !s.ok()) return s;
  }
  return Status::success();
}

Status CudaContext::copyHostToDevice(uint64_t dst, const void* src, uint64_t bytes, uint64_t stream,
                                     bool async) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  CUstream cuStream = nullptr;
  if (Status s = findStream(stream, &cuStream); !s.ok()) return s;
  if (bytes == 0) return Status::success();
  if (Status s = checkRange("destination", dst, bytes); !s.ok()) return s;
  if (const auto* variables = managedVariablesAround(dst, bytes)) {
    return copyManagedVariables(
        *variables, dst, bytes, stream, cuStream, [&](uint64_t to, uint64_t offset, uint64_t n) {
          return driver_->call(driver_->memcpyHtoD, to, static_cast<const char*>(src) + offset, n);
        });
  }
  if (!async) return driver_->call(driver_->memcpyHtoD, dst, src, bytes);
  // `src` belongs to the caller only until we return, so the copy must have read it by then:
  // wait for the stream. (A pinned staging buffer would let this return earlier.)
  if (Status s = driver_->call(driver_->memcpyHtoDAsync, dst, src, bytes, cuStream); !s.ok()) {
    return s;
  }
  return driver_->call(driver_->streamSynchronize, cuStream);
}

Status CudaContext::copyDeviceToHost(void* dst, uint64_t src, uint64_t bytes, uint64_t stream) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  CUstream cuStream = nullptr;
  if (Status s = findStream(stream, &cuStream); !s.ok()) return s;
  if (bytes == 0) return Status::success();
  if (Status s = checkRange("source", src, bytes); !s.ok()) return s;
  if (const auto* variables = managedVariablesAround(src, bytes)) {
    // The bytes of the pages that belong to no variable read as zeros.
    std::memset(dst, 0, bytes);
    return copyManagedVariables(
        *variables, src, bytes, stream, cuStream, [&](uint64_t from, uint64_t offset, uint64_t n) {
          return driver_->call(driver_->memcpyDtoH, static_cast<char*>(dst) + offset, from, n);
        });
  }
  if (stream == 0) return driver_->call(driver_->memcpyDtoH, dst, src, bytes);
  // Ordered after the stream's earlier work, and complete on return as the contract requires.
  if (Status s = driver_->call(driver_->memcpyDtoHAsync, dst, src, bytes, cuStream); !s.ok()) {
    return s;
  }
  return driver_->call(driver_->streamSynchronize, cuStream);
}

Status CudaContext::stagingBuffer(unsigned slot, void** buffer) {
  *buffer = nullptr;
  if (Status s = makeCurrent(); !s.ok()) return s;
  if (!staging_) staging_ = std::make_unique<CudaStaging>(driver_, pinnedMemory_);
  return staging_->buffer(slot, buffer);
}

// Resolves the stream and checks the range, as every copy does, before a chunk is handed to the
// staging buffers (which stagingBuffer created).
Status CudaContext::prepareStaged(const char* what, uint64_t address, uint64_t bytes,
                                  uint64_t stream, CUstream* cuStream) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  if (Status s = findStream(stream, cuStream); !s.ok()) return s;
  if (Status s = checkRange(what, address, bytes); !s.ok()) return s;
  if (!staging_) return Status::error(CUDA_ERROR_INVALID_VALUE, "call stagingBuffer first");
  return Status::success();
}

Status CudaContext::stageToDevice(unsigned slot, uint64_t dst, uint64_t bytes, uint64_t stream) {
  CUstream cuStream = nullptr;
  if (Status s = prepareStaged("destination", dst, bytes, stream, &cuStream); !s.ok()) return s;
  return staging_->toDevice(slot, dst, bytes, cuStream);
}

Status CudaContext::stageFromDevice(unsigned slot, uint64_t src, uint64_t bytes, uint64_t stream) {
  CUstream cuStream = nullptr;
  if (Status s = prepareStaged("source", src, bytes, stream, &cuStream); !s.ok()) return s;
  return staging_->fromDevice(slot, src, bytes, cuStream);
}

Status CudaContext::copyDeviceToDevice(uint64_t dst, uint64_t src, uint64_t bytes, uint64_t stream,
                                       bool async) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  CUstream cuStream = nullptr;
  if (Status s = findStream(stream, &cuStream); !s.ok()) return s;
  if (bytes == 0) return Status::success();
  if (Status s = checkRange("source", src, bytes); !s.ok()) return s;
  if (Status s = checkRange("destination", dst, bytes); !s.ok()) return s;
  if (!async) return driver_->call(driver_->memcpyDtoD, dst, src, bytes);
  return driver_->call(driver_->memcpyDtoDAsync, dst, src, bytes, cuStream);
}

Status CudaContext::copy2D(const Copy2D& copy, uint64_t stream, bool async) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  CUstream cuStream = nullptr;
  if (Status s = findStream(stream, &cuStream); !s.ok()) return s;
  if (copy.widthBytes == 0 || copy.height == 0) return Status::success();
  if (copy.srcIsDevice) {
    if (Status s = checkPitchedRange("source", copy.srcDevice, copy.srcPitch, copy.widthBytes,
                                     copy.height);
        !s.ok()) {
      return s;
    }
  }
  if (copy.dstIsDevice) {
    if (Status s = checkPitchedRange("destination", copy.dstDevice, copy.dstPitch, copy.widthBytes,
                                     copy.height);
        !s.ok()) {
      return s;
    }
  }
  CUDA_MEMCPY2D params{};
  params.srcMemoryType = copy.srcIsDevice ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
  params.srcDevice = copy.srcDevice;
  params.srcHost = copy.srcHost;
  params.srcPitch = copy.srcPitch;
  params.dstMemoryType = copy.dstIsDevice ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
  params.dstDevice = copy.dstDevice;
  params.dstHost = copy.dstHost;
  params.dstPitch = copy.dstPitch;
  params.WidthInBytes = copy.widthBytes;
  params.Height = copy.height;
  if (!async) return driver_->call(driver_->memcpy2D, &params);
  if (Status s = driver_->call(driver_->memcpy2DAsync, &params, cuStream); !s.ok()) return s;
  // A host end is the caller's buffer: it must be consumed (or filled) before we return.
  if (copy.srcIsDevice && copy.dstIsDevice) return Status::success();
  return driver_->call(driver_->streamSynchronize, cuStream);
}

Status CudaContext::memset(uint64_t dst, uint32_t value, unsigned elementSize, uint64_t width,
                           uint64_t height, uint64_t pitch, uint64_t stream, bool async) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  CUstream cuStream = nullptr;
  if (Status s = findStream(stream, &cuStream); !s.ok()) return s;
  if (elementSize != 1 && elementSize != 2 && elementSize != 4) {
    return Status::error(CUDA_ERROR_INVALID_VALUE, "memset element size must be 1, 2 or 4, not " +
                                                       std::to_string(elementSize));
  }
  if (width == 0 || height == 0) return Status::success();
  if (width > std::numeric_limits<uint64_t>::max() / elementSize) {
    return Status::error(CUDA_ERROR_INVALID_VALUE, "memset width overflows");
  }
  if (Status s = checkPitchedRange("destination", dst, pitch, width * elementSize, height);
      !s.ok()) {
    return s;
  }
  const CudaDriver& d = *driver_;
  auto u8 = static_cast<unsigned char>(value);
  auto u16 = static_cast<unsigned short>(value);
  if (height == 1) {
    switch (elementSize) {
      case 1:
        return async ? d.call(d.memsetD8Async, dst, u8, width, cuStream)
                     : d.call(d.memsetD8, dst, u8, width);
      case 2:
        return async ? d.call(d.memsetD16Async, dst, u16, width, cuStream)
                     : d.call(d.memsetD16, dst, u16, width);
      default:
        return async ? d.call(d.memsetD32Async, dst, value, width, cuStream)
                     : d.call(d.memsetD32, dst, value, width);
    }
  }
  switch (elementSize) {
    case 1:
      return async ? d.call(d.memsetD2D8Async, dst, pitch, u8, width, height, cuStream)
                   : d.call(d.memsetD2D8, dst, pitch, u8, width, height);
    case 2:
      return async ? d.call(d.memsetD2D16Async, dst, pitch, u16, width, height, cuStream)
                   : d.call(d.memsetD2D16, dst, pitch, u16, width, height);
    default:
      return async ? d.call(d.memsetD2D32Async, dst, pitch, value, width, height, cuStream)
                   : d.call(d.memsetD2D32, dst, pitch, value, width, height);
  }
}

// --- Modules ---

Status CudaContext::moduleLoad(std::span<const uint8_t> image, uint64_t* module) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  // The driver takes no size: the image must not claim more bytes than were received.
  if (auto extent = image::imageExtent(image); !extent) return extent.status();
  CUmodule handle = nullptr;
  if (Status s = driver_->call(driver_->moduleLoadData, &handle, image.data()); !s.ok()) return s;
  *module = mintId();
  modules_[*module] = handle;
  return Status::success();
}

Status CudaContext::moduleUnload(uint64_t module) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  auto it = modules_.find(module);
  if (it == modules_.end()) return invalidHandle("module", module);
  if (Status s = driver_->call(driver_->moduleUnload, it->second); !s.ok()) return s;
  modules_.erase(it);
  boundReferences_.erase(module);
  addresses_.removeOwnedBy(module);
  managedRanges_.erase(module);
  managedVariables_.erase(module);
  std::erase_if(functions_, [&](const auto& entry) {
    if (entry.second.module != module) return false;
    functionIds_.erase(entry.second.handle);
    return true;
  });
  return Status::success();
}

Status CudaContext::describeFunction(CUfunction handle, FunctionDescription* function) {
  function->params.clear();
  for (size_t index = 0; index < kMaxKernelParams; ++index) {
    size_t offset = 0, size = 0;
    Status s = driver_->call(driver_->funcGetParamInfo, handle, index, &offset, &size);
    if (s.code == CUDA_ERROR_INVALID_VALUE) break;  // past the last parameter
    if (!s.ok()) return s;
    function->params.push_back(
        ParamLayout{static_cast<uint32_t>(offset), static_cast<uint32_t>(size)});
  }
  function->attributes.assign(CU_FUNC_ATTRIBUTE_MAX, 0);
  for (int attribute = 0; attribute < CU_FUNC_ATTRIBUTE_MAX; ++attribute) {
    int value = 0;
    if (driver_
            ->call(driver_->funcGetAttribute, &value, static_cast<CUfunction_attribute>(attribute),
                   handle)
            .ok()) {
      function->attributes[attribute] = value;
    }
  }
  return Status::success();
}

Status CudaContext::moduleGetFunction(uint64_t module, const std::string& name,
                                      FunctionDescription* function) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  auto it = modules_.find(module);
  if (it == modules_.end()) return invalidHandle("module", module);
  CUfunction handle = nullptr;
  if (Status s = driver_->call(driver_->moduleGetFunction, &handle, it->second, name.c_str());
      !s.ok()) {
    return s;
  }
  if (Status s = describeFunction(handle, function); !s.ok()) return s;
  auto known = functionIds_.find(handle);
  if (known != functionIds_.end()) {
    function->handle = known->second;
  } else {
    function->handle = mintId();
    functionIds_[handle] = function->handle;
  }
  functions_[function->handle] = Function{handle, module, function->params};
  return Status::success();
}

Status CudaContext::moduleFunctionNames(uint64_t module, std::vector<std::string>* names) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  auto it = modules_.find(module);
  if (it == modules_.end()) return invalidHandle("module", module);
  unsigned count = 0;
  if (Status s = driver_->call(driver_->moduleGetFunctionCount, &count, it->second); !s.ok()) {
    return s;
  }
  std::vector<CUfunction> functions(count);
  if (Status s =
          driver_->call(driver_->moduleEnumerateFunctions, functions.data(), count, it->second);
      !s.ok()) {
    return s;
  }
  for (CUfunction f : functions) {
    const char* name = nullptr;
    if (Status s = driver_->call(driver_->funcGetName, &name, f); !s.ok()) return s;
    names->push_back(name ? name : "");
  }
  return Status::success();
}

namespace {

// The driver's logs of one link state, capped as a client's buffers would be, with the scalar
// options as given.
struct DriverLinkLogs {
  static constexpr size_t kLogBytes = 64 * 1024;
  std::vector<char> info = std::vector<char>(kLogBytes, 0);
  std::vector<char> error = std::vector<char>(kLogBytes, 0);
  std::vector<CUjit_option> keys = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                                    CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  std::vector<void*> values;

  explicit DriverLinkLogs(std::span<const std::pair<CUjit_option, uint64_t>> options)
      : values{info.data(), reinterpret_cast<void*>(kLogBytes), error.data(),
               reinterpret_cast<void*>(kLogBytes)} {
    for (auto [option, value] : options) {
      keys.push_back(option);
      values.push_back(reinterpret_cast<void*>(static_cast<uintptr_t>(value)));
    }
  }
  void into(LinkOutcome* outcome) const {
    outcome->infoLog = std::string(info.data(), strnlen(info.data(), info.size()));
    outcome->errorLog = std::string(error.data(), strnlen(error.data(), error.size()));
  }
};

}  // namespace

// The driver compiles each input as it is added; without `complete` that check is all it does.
Status CudaContext::runDriverLink(std::span<const LinkInput> inputs,
                                  std::span<const std::pair<CUjit_option, uint64_t>> options,
                                  bool complete, LinkOutcome* outcome) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  DriverLinkLogs logs(options);
  CUlinkState state = nullptr;
  Status status = driver_->call(driver_->linkCreate, static_cast<unsigned>(logs.keys.size()),
                                logs.keys.data(), logs.values.data(), &state);
  if (!status.ok()) return status;
  for (const LinkInput& in : inputs) {
    if (!status.ok()) break;
    status =
        driver_->call(driver_->linkAddData, state, in.type, const_cast<uint8_t*>(in.bytes.data()),
                      in.bytes.size(), in.name.c_str(), 0u, nullptr, nullptr);
  }
  void* cubin = nullptr;
  size_t cubinBytes = 0;
  if (status.ok() && complete) {
    status = driver_->call(driver_->linkComplete, state, &cubin, &cubinBytes);
    if (status.ok()) {
      const auto* bytes = static_cast<const uint8_t*>(cubin);
      outcome->image.assign(bytes, bytes + cubinBytes);
    }
  }
  outcome->result = status.code;
  logs.into(outcome);
  (void)driver_->call(driver_->linkDestroy, state);
  return Status::success();
}

Status CudaContext::link(std::span<const LinkInput> inputs,
                         std::span<const std::pair<CUjit_option, uint64_t>> options,
                         LinkOutcome* outcome) {
  return runDriverLink(inputs, options, true, outcome);
}

Status CudaContext::linkCheckInput(const LinkInput& input,
                                   std::span<const std::pair<CUjit_option, uint64_t>> options,
                                   LinkOutcome* outcome) {
  return runDriverLink(std::span<const LinkInput>(&input, 1), options, false, outcome);
}

Status CudaContext::moduleGetGlobal(uint64_t module, const std::string& name, uint64_t* address,
                                    uint64_t* bytes) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  auto it = modules_.find(module);
  if (it == modules_.end()) return invalidHandle("module", module);
  CUdeviceptr pointer = 0;
  size_t size = 0;
  if (Status s = driver_->call(driver_->moduleGetGlobal, &pointer, &size, it->second, name.c_str());
      !s.ok()) {
    return s;
  }
  // The global becomes memory this context may copy to and from, until the module goes; for a
  // __managed__ variable, the whole pages of managed memory holding it, which travel to and from
  // the client's mirror page by page.
  uint64_t managedBase = 0, managedBytes = 0;
  if (Status s = managedRangeOf(module, pointer, size, &managedBase, &managedBytes); !s.ok()) {
    return s;
  }
  if (!managedBytes) addresses_.add(pointer, size, module);
  *address = pointer;
  *bytes = size;
  return Status::success();
}

Status CudaContext::managedRangeOf(uint64_t module, uint64_t address, uint64_t size, uint64_t* base,
                                   uint64_t* bytes) {
  *base = 0;
  *bytes = 0;
  // A driver without pointer attributes has no managed memory to speak of.
  if (!driver_->pointerGetAttribute.fn) return Status::success();
  unsigned isManaged = 0;
  if (Status s = driver_->call(driver_->pointerGetAttribute, &isManaged,
                               CU_POINTER_ATTRIBUTE_IS_MANAGED, CUdeviceptr{address});
      !s.ok() || !isManaged) {
    return Status::success();  // not memory the driver tracks as managed
  }
  constexpr uint64_t kPage = 4096;
  const uint64_t end = address + std::max<uint64_t>(size, 1);
  // The allocation holding it, when the driver names one. NVIDIA's driver does not for a module's
  // managed variables (cuMemGetAddressRange fails there, as it may for any managed memory): then
  // the variable's own pages, joined with those of the module's other managed variables they
  // overlap, as one module's variables may share a page.
  uint64_t first = address / kPage * kPage;
  uint64_t last = (end + kPage - 1) / kPage * kPage;
  CUdeviceptr rangeBase = 0;
  size_t rangeBytes = 0;
  if (driver_->call(driver_->memGetAddressRange, &rangeBase, &rangeBytes, CUdeviceptr{address})
          .ok() &&
      rangeBase <= address && end - rangeBase <= rangeBytes) {
    first = std::min<uint64_t>(first, rangeBase / kPage * kPage);
    last = std::max<uint64_t>(last, (rangeBase + rangeBytes + kPage - 1) / kPage * kPage);
  }
  auto& ranges = managedRanges_[module];
  for (auto it = ranges.begin(); it != ranges.end();) {
    if (it->first >= last || it->first + it->second <= first) {
      ++it;
      continue;
    }
    first = std::min(first, it->first);
    last = std::max(last, it->first + it->second);
    addresses_.remove(it->first);
    it = ranges.erase(it);
  }
  ranges[first] = last - first;
  addresses_.add(first, last - first, module);
  managedVariables_[module][address] = std::max<uint64_t>(size, 1);
  *base = first;
  *bytes = last - first;
  return Status::success();
}

Status CudaContext::moduleManagedRange(uint64_t module, uint64_t address, uint64_t* base,
                                       uint64_t* bytes) {
  *base = 0;
  *bytes = 0;
  if (modules_.find(module) == modules_.end()) return invalidHandle("module", module);
  // As the lookup of the variable (moduleGetGlobal) recorded it.
  auto found = managedRanges_.find(module);
  if (found == managedRanges_.end()) return Status::success();
  auto it = found->second.upper_bound(address);
  if (it == found->second.begin()) return Status::success();
  --it;
  if (address - it->first >= it->second) return Status::success();
  *base = it->first;
  *bytes = it->second;
  return Status::success();
}

// --- Kernels ---

Status CudaContext::launch(uint64_t function, const LaunchShape& shape, uint64_t stream,
                           std::span<const uint8_t> params) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  const Function* f = nullptr;
  if (Status s = findFunction(function, &f); !s.ok()) return s;
  CUstream cuStream = nullptr;
  if (Status s = findStream(stream, &cuStream); !s.ok()) return s;
  std::vector<void*> arguments;
  if (Status s = kernelArguments(*f, params, &arguments); !s.ok()) return s;
  auto start = [&] {
    if (shape.clustered()) {
      // cuLaunchKernelEx with the cluster's shape (and cooperation, if asked).
      CUlaunchAttribute attributes[2] = {};
      const CUlaunchConfig config = launchConfig(shape, cuStream, attributes);
      return driver_->call(driver_->launchKernelEx, &config, f->handle,
                           arguments.empty() ? nullptr : arguments.data(),
                           static_cast<void**>(nullptr));
    }
    if (shape.cooperative) {
      return driver_->call(driver_->launchCooperativeKernel, f->handle, shape.grid[0],
                           shape.grid[1], shape.grid[2], shape.block[0], shape.block[1],
                           shape.block[2], shape.sharedBytes, cuStream,
                           arguments.empty() ? nullptr : arguments.data());
    }
    return driver_->call(driver_->launchKernel, f->handle, shape.grid[0], shape.grid[1],
                         shape.grid[2], shape.block[0], shape.block[1], shape.block[2],
                         shape.sharedBytes, cuStream,
                         arguments.empty() ? nullptr : arguments.data(), nullptr);
  };
  return gated_ ? gated_->launch(cuStream, start) : start();
}

CUlaunchConfig CudaContext::launchConfig(const LaunchShape& shape, CUstream stream,
                                         CUlaunchAttribute (&attributes)[2]) {
  CUlaunchConfig config{};
  config.gridDimX = shape.grid[0];
  config.gridDimY = shape.grid[1];
  config.gridDimZ = shape.grid[2];
  config.blockDimX = shape.block[0];
  config.blockDimY = shape.block[1];
  config.blockDimZ = shape.block[2];
  config.sharedMemBytes = shape.sharedBytes;
  config.hStream = stream;
  config.attrs = attributes;
  // No cluster attribute for none: a kernel compiled with a cluster size of its own refuses any
  // other, 1x1x1 included.
  if (shape.clustered()) {
    CUlaunchAttribute& cluster = attributes[config.numAttrs++];
    cluster.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    cluster.value.clusterDim.x = shape.cluster[0];
    cluster.value.clusterDim.y = shape.cluster[1];
    cluster.value.clusterDim.z = shape.cluster[2];
  }
  if (shape.cooperative) {
    CUlaunchAttribute& cooperative = attributes[config.numAttrs++];
    cooperative.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    cooperative.value.cooperative = 1;
  }
  return config;
}

Status CudaContext::occupancyClusters(uint64_t function, const LaunchShape& shape,
                                      bool potentialSize, int* value) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  const Function* f = nullptr;
  if (Status s = findFunction(function, &f); !s.ok()) return s;
  CUlaunchAttribute attributes[2] = {};
  CUlaunchConfig config = launchConfig(shape, nullptr, attributes);
  return potentialSize ? driver_->call(driver_->occupancyMaxPotentialClusterSize, value, f->handle,
                                       static_cast<const CUlaunchConfig*>(&config))
                       : driver_->call(driver_->occupancyMaxActiveClusters, value, f->handle,
                                       static_cast<const CUlaunchConfig*>(&config));
}

Status CudaContext::kernelArguments(const Function& function, std::span<const uint8_t> params,
                                    std::vector<void*>* arguments) {
  // kernelParams (one pointer per parameter into the packed block) is the path every driver
  // supports; the driver only reads through these pointers, hence the const_cast.
  arguments->clear();
  arguments->reserve(function.params.size());
  for (const ParamLayout& param : function.params) {
    if (uint64_t{param.offset} + param.size > params.size()) {
      return Status::error(CUDA_ERROR_INVALID_VALUE,
                           "kernel parameter block is " + std::to_string(params.size()) +
                               " bytes; the kernel needs " +
                               std::to_string(uint64_t{param.offset} + param.size));
    }
    arguments->push_back(const_cast<uint8_t*>(params.data() + param.offset));
  }
  return Status::success();
}

void CudaContext::setLaunchGate(std::shared_ptr<LaunchGate> gate) {
  gated_ = gate ? std::make_unique<CudaGatedLaunches>(driver_, context_, std::move(gate)) : nullptr;
}

Status CudaContext::funcSetAttribute(uint64_t function, int attribute, int value) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  const Function* f = nullptr;
  if (Status s = findFunction(function, &f); !s.ok()) return s;
  return driver_->call(driver_->funcSetAttribute, f->handle,
                       static_cast<CUfunction_attribute>(attribute), value);
}

Status CudaContext::occupancyMaxActiveBlocks(uint64_t function, int blockSize,
                                             uint64_t dynamicSharedBytes, unsigned flags,
                                             int* numBlocks) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  const Function* f = nullptr;
  if (Status s = findFunction(function, &f); !s.ok()) return s;
  return driver_->call(driver_->occupancyMaxActiveBlocks, numBlocks, f->handle, blockSize,
                       static_cast<size_t>(dynamicSharedBytes), flags);
}

// --- Streams and events ---

Status CudaContext::streamCreate(unsigned flags, int priority, uint64_t* stream) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  CUstream handle = nullptr;
  if (Status s = driver_->call(driver_->streamCreate, &handle, flags, priority); !s.ok()) {
    return s;
  }
  *stream = mintId();
  streams_.add(*stream, handle);
  return Status::success();
}

Status CudaContext::streamDestroy(uint64_t stream) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  std::optional<Status> removed = streams_.remove(stream);
  return removed ? *removed : invalidHandle("stream", stream);
}

// May run on a waiter thread (server/backend.h): the table keeps the stream alive meanwhile.
Status CudaContext::streamSynchronize(uint64_t stream) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  auto synchronize = [this](CUstream cuStream) {
    return driver_->call(driver_->streamSynchronize, cuStream);
  };
  if (stream == 0) return synchronize(nullptr);  // the legacy default stream
  std::optional<Status> waited = streams_.wait(stream, synchronize);
  return waited ? *waited : invalidHandle("stream", stream);
}

Status CudaContext::streamQuery(uint64_t stream) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  CUstream cuStream = nullptr;
  if (Status s = findStream(stream, &cuStream); !s.ok()) return s;
  return driver_->call(driver_->streamQuery, cuStream);
}

Status CudaContext::streamWaitEvent(uint64_t stream, uint64_t event) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  CUstream cuStream = nullptr;
  if (Status s = findStream(stream, &cuStream); !s.ok()) return s;
  CUevent cuEvent = nullptr;
  if (Status s = findEvent(event, &cuEvent); !s.ok()) return s;
  return driver_->call(driver_->streamWaitEvent, cuStream, cuEvent, 0u);
}

Status CudaContext::streamHostWork(uint64_t stream, std::function<void()> work) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  CUstream cuStream = nullptr;
  if (Status s = findStream(stream, &cuStream); !s.ok()) return s;
  // The driver runs it on its own callback thread, where blocking holds only this stream (and the
  // driver's other host functions, which the gate's client releases without waiting on them).
  auto* heap = new std::function<void()>(std::move(work));
  Status s = driver_->call(
      driver_->launchHostFunc, cuStream,
      [](void* data) {
        std::unique_ptr<std::function<void()>> run(static_cast<std::function<void()>*>(data));
        (*run)();
      },
      static_cast<void*>(heap));
  if (!s.ok()) delete heap;
  return s;
}

// The driver's form of `ops`, each address checked to be this context's.
Status CudaContext::driverMemOps(std::span<const StreamMemOp> ops,
                                 std::vector<CUstreamBatchMemOpParams>* params) const {
  params->assign(ops.size(), CUstreamBatchMemOpParams{});
  for (size_t i = 0; i < ops.size(); ++i) {
    const StreamMemOp& op = ops[i];
    CUstreamBatchMemOpParams& p = (*params)[i];
    p.operation = op.kind;
    switch (op.kind) {
      case CU_STREAM_MEM_OP_BARRIER:
        p.memoryBarrier.flags = op.flags;
        continue;
      case CU_STREAM_MEM_OP_WAIT_VALUE_32:
      case CU_STREAM_MEM_OP_WAIT_VALUE_64:
        p.waitValue.address = op.address;
        p.waitValue.flags = op.flags;
        if (op.kind == CU_STREAM_MEM_OP_WAIT_VALUE_64) {
          p.waitValue.value64 = op.value;
        } else {
          p.waitValue.value = static_cast<cuuint32_t>(op.value);
        }
        break;
      default:
        p.writeValue.address = op.address;
        p.writeValue.flags = op.flags;
        if (op.kind == CU_STREAM_MEM_OP_WRITE_VALUE_64) {
          p.writeValue.value64 = op.value;
        } else {
          p.writeValue.value = static_cast<cuuint32_t>(op.value);
        }
        break;
    }
    if (Status s = checkRange("stream memory operation", op.address, op.wide() ? 8 : 4); !s.ok()) {
      return s;
    }
  }
  return Status::success();
}

// The driver's own cuStreamBatchMemOp_v2, after the addresses are checked to be this context's.
Status CudaContext::streamMemOps(uint64_t stream, std::span<const StreamMemOp> ops) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  CUstream cuStream = nullptr;
  if (Status s = findStream(stream, &cuStream); !s.ok()) return s;
  std::vector<CUstreamBatchMemOpParams> params;
  if (Status s = driverMemOps(ops, &params); !s.ok()) return s;
  Status s = driver_->call(driver_->streamBatchMemOp, cuStream,
                           static_cast<unsigned>(params.size()), params.data(), 0u);
  if (s.ok()) notePendingWaits(cuStream, ops);
  return s;
}

void CudaContext::notePendingWaits(CUstream stream, std::span<const StreamMemOp> ops) {
  PendingWaits pending;
  for (const StreamMemOp& op : ops) {
    if (op.isWait()) pending.waits.push_back(op);
  }
  if (pending.waits.empty()) return;  // the usual graph launch: nothing to look at
  std::lock_guard lock(pendingMutex_);
  dropMetWaits();
  // Without the event the wait cannot be released at teardown; the work is queued already, so
  // that is the only cost.
  if (driver_->call(driver_->eventCreate, &pending.passed, CU_EVENT_DISABLE_TIMING).ok()) {
    if (driver_->call(driver_->eventRecord, pending.passed, stream).ok()) {
      pendingWaits_.push_back(std::move(pending));
    } else {
      (void)driver_->call(driver_->eventDestroy, pending.passed);
    }
  }
}

void CudaContext::dropMetWaits() {
  std::erase_if(pendingWaits_, [&](const PendingWaits& p) {
    if (driver_->call(driver_->eventQuery, p.passed).code == CUDA_ERROR_NOT_READY) return false;
    (void)driver_->call(driver_->eventDestroy, p.passed);
    return true;
  });
}

// Writes, for each wait still pending, a value that meets it (the memory is about to be freed, and
// nobody else can see it), in the order they were queued, giving each batch a moment to pass.
void CudaContext::releasePendingWaits() {
  std::lock_guard lock(pendingMutex_);
  dropMetWaits();
  if (pendingWaits_.empty()) return;
  CUstream helper = nullptr;
  if (!driver_->call(driver_->streamCreate, &helper, CU_STREAM_NON_BLOCKING, 0).ok()) return;
  for (PendingWaits& p : pendingWaits_) {
    std::vector<CUstreamBatchMemOpParams> writes;
    for (const StreamMemOp& w : p.waits) {
      const bool wide = w.wide();
      const uint64_t mask = wide ? ~uint64_t{0} : 0xffffffffull;
      uint64_t value = w.value & mask;
      switch (w.flags) {
        case CU_STREAM_WAIT_VALUE_AND:
          if (value == 0) continue;  // nothing meets it
          break;
        case CU_STREAM_WAIT_VALUE_NOR:
          if (value == mask) continue;  // nothing meets it
          value = 0;
          break;
        default:  // GEQ and EQ: the value itself
          break;
      }
      CUstreamBatchMemOpParams write;
      std::memset(&write, 0, sizeof write);
      write.writeValue.operation =
          wide ? CU_STREAM_MEM_OP_WRITE_VALUE_64 : CU_STREAM_MEM_OP_WRITE_VALUE_32;
      write.writeValue.address = w.address;
      if (wide) {
        write.writeValue.value64 = value;
      } else {
        write.writeValue.value = static_cast<cuuint32_t>(value);
      }
      writes.push_back(write);
    }
    if (!writes.empty()) {
      (void)driver_->call(driver_->streamBatchMemOp, helper, static_cast<unsigned>(writes.size()),
                          writes.data(), 0u);
      (void)driver_->call(driver_->streamSynchronize, helper);
    }
    // Bounded: a wait nothing can meet must not hold the teardown either.
    for (int i = 0; i < 200; ++i) {
      if (driver_->call(driver_->eventQuery, p.passed).code != CUDA_ERROR_NOT_READY) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    (void)driver_->call(driver_->eventDestroy, p.passed);
  }
  pendingWaits_.clear();
  (void)driver_->call(driver_->streamDestroy, helper);
}

Status CudaContext::eventCreate(unsigned flags, uint64_t* event) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  CUevent handle = nullptr;
  if (Status s = driver_->call(driver_->eventCreate, &handle, flags); !s.ok()) return s;
  *event = mintId();
  events_.add(*event, handle);
  return Status::success();
}

Status CudaContext::eventDestroy(uint64_t event) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  std::optional<Status> removed = events_.remove(event);
  return removed ? *removed : invalidHandle("event", event);
}

Status CudaContext::eventRecord(uint64_t event, uint64_t stream) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  CUevent cuEvent = nullptr;
  if (Status s = findEvent(event, &cuEvent); !s.ok()) return s;
  CUstream cuStream = nullptr;
  if (Status s = findStream(stream, &cuStream); !s.ok()) return s;
  return driver_->call(driver_->eventRecord, cuEvent, cuStream);
}

// May run on a waiter thread, as streamSynchronize.
Status CudaContext::eventSynchronize(uint64_t event) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  std::optional<Status> waited = events_.wait(
      event, [this](CUevent cuEvent) { return driver_->call(driver_->eventSynchronize, cuEvent); });
  return waited ? *waited : invalidHandle("event", event);
}

Status CudaContext::eventQuery(uint64_t event) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  CUevent cuEvent = nullptr;
  if (Status s = findEvent(event, &cuEvent); !s.ok()) return s;
  return driver_->call(driver_->eventQuery, cuEvent);
}

Status CudaContext::eventElapsedTime(uint64_t start, uint64_t end, float* milliseconds) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  CUevent cuStart = nullptr, cuEnd = nullptr;
  if (Status s = findEvent(start, &cuStart); !s.ok()) return s;
  if (Status s = findEvent(end, &cuEnd); !s.ok()) return s;
  return driver_->call(driver_->eventElapsedTime, milliseconds, cuStart, cuEnd);
}

// May run on a waiter thread: the driver's context synchronization is thread-safe.
// From any thread (the server's watch on busy sessions, or the session's end), while other threads
// may use the context: the pending waits are under their own lock.
void CudaContext::cancel() {
  (void)makeCurrent();
  releasePendingWaits();
}

Status CudaContext::synchronize() {
  if (Status s = makeCurrent(); !s.ok()) return s;
  return driver_->call(driver_->ctxSynchronize);
}

}  // namespace gpupool::server
