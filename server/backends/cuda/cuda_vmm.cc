// Virtual memory management on the real driver: cuMemCreate, cuMemAddressReserve, cuMemMap and
// the rest, forwarded once the handle, reservation or mapping is known to be this context's (the
// driver would take any tenant's). Read-write mappings enter the context's address map, so copies
// and launches may use them, across chunk boundaries too. Shareable handles pass between sessions
// as the driver's own POSIX file descriptors (all sessions' contexts are in this process).
#include <unistd.h>

#include <algorithm>
#include <cstdint>

#include "common/hex.h"
#include "server/backends/cuda/cuda_context.h"

namespace gpupool::server {
namespace {
Status notThisContexts(const std::string& what) {
  return Status::error(CUDA_ERROR_INVALID_VALUE, what + " is not this context's");
}
}  // namespace

std::map<uint64_t, uint64_t>::const_iterator CudaContext::vmmReservationOf(uint64_t address,
                                                                           uint64_t bytes) const {
  auto it = vmmReservations_.upper_bound(address);
  if (it == vmmReservations_.begin()) return vmmReservations_.end();
  --it;
  if (address - it->first >= it->second || bytes > it->second - (address - it->first)) {
    return vmmReservations_.end();
  }
  return it;
}

std::map<uint64_t, CudaContext::VmmMapping>::const_iterator CudaContext::vmmMappingOf(
    uint64_t address) const {
  auto it = vmmMappings_.upper_bound(address);
  if (it == vmmMappings_.begin()) return vmmMappings_.end();
  --it;
  return address - it->first < it->second.bytes ? it : vmmMappings_.end();
}

void CudaContext::vmmPublish() {
  addresses_.removeOwnedBy(DeviceAddressMap::kVmmMapping);
  uint64_t start = 0, end = 0;
  auto flush = [&] {
    if (end > start) addresses_.add(start, end - start, DeviceAddressMap::kVmmMapping);
    start = end = 0;
  };
  for (auto& [base, m] : vmmMappings_) {
    if (!m.readWrite || base != end) flush();
    if (!m.readWrite) continue;
    if (end == 0) start = base;
    end = base + m.bytes;
  }
  flush();
}

void CudaContext::vmmDropIfUnused(uint64_t id, uint64_t* freed) {
  auto it = vmmAllocations_.find(id);
  if (it == vmmAllocations_.end() || it->second.refs || it->second.mappings) return;
  if (it->second.counted) {
    memoryUsed_ -= it->second.bytes;
    *deviceMemoryUsed_ -= it->second.bytes;
    if (freed) *freed += it->second.bytes;
  }
  vmmAllocations_.erase(it);
}

Status CudaContext::vmmCreate(uint64_t bytes, bool shareable, uint64_t* handle) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device_;
  if (shareable) prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  CUmemGenericAllocationHandle real = 0;
  if (Status s = driver_->call(driver_->memCreate, &real, bytes, &prop, 0ull); !s.ok()) return s;
  *handle = mintId();
  vmmAllocations_[*handle] = VmmAllocation{real, bytes, 1, 0, shareable, true};
  memoryUsed_ += bytes;
  memoryPeak_ = std::max(memoryPeak_.load(), memoryUsed_.load());
  *deviceMemoryUsed_ += bytes;
  return Status::success();
}

namespace {
// The driver's shareable handle of an exported allocation, closed when the export is withdrawn.
struct CudaVmmExportFd {
  int fd = -1;
  ~CudaVmmExportFd() {
    if (fd >= 0) close(fd);
  }
};
}  // namespace

// Every session's contexts live in this process, so the driver's own file descriptor carries the
// allocation from the exporting context to the importing one.
Status CudaContext::vmmExport(uint64_t handle, VmmExportedAllocation* exported) {
  auto it = vmmAllocations_.find(handle);
  if (it == vmmAllocations_.end() || it->second.refs == 0) {
    return notThisContexts("allocation handle " + std::to_string(handle));
  }
  if (!it->second.shareable) {
    return Status::error(CUDA_ERROR_INVALID_VALUE,
                         "the allocation was not created with requestedHandleTypes "
                         "CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR");
  }
  if (Status s = makeCurrent(); !s.ok()) return s;
  auto fd = std::make_shared<CudaVmmExportFd>();
  if (Status s = driver_->call(driver_->memExportToShareableHandle, static_cast<void*>(&fd->fd),
                               it->second.handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0ull);
      !s.ok()) {
    return s;
  }
  exported->memorySpace = deviceMemoryUsed_.get();
  exported->bytes = it->second.bytes;
  exported->state = fd;
  return Status::success();
}

Status CudaContext::vmmImport(const VmmExportedAllocation& exported, uint64_t* handle) {
  if (exported.memorySpace != deviceMemoryUsed_.get() || !exported.state) {
    return Status::error(CUDA_ERROR_INVALID_DEVICE,
                         "the shareable handle names memory of another device");
  }
  auto fd = std::static_pointer_cast<CudaVmmExportFd>(exported.state);
  if (Status s = makeCurrent(); !s.ok()) return s;
  CUmemGenericAllocationHandle real = 0;
  if (Status s = driver_->call(driver_->memImportFromShareableHandle, &real,
                               reinterpret_cast<void*>(static_cast<intptr_t>(fd->fd)),
                               CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
      !s.ok()) {
    return s;
  }
  *handle = mintId();
  vmmAllocations_[*handle] = VmmAllocation{real, exported.bytes, 1, 0, true, false};
  return Status::success();
}

Status CudaContext::vmmRetain(uint64_t address, uint64_t* handle) {
  auto m = vmmMappingOf(address);
  if (m == vmmMappings_.end()) return notThisContexts("a mapping at " + hex(address));
  if (Status s = makeCurrent(); !s.ok()) return s;
  CUmemGenericAllocationHandle real = 0;
  if (Status s = driver_->call(driver_->memRetainAllocationHandle, &real,
                               reinterpret_cast<void*>(address));
      !s.ok()) {
    return s;
  }
  vmmAllocations_.at(m->second.allocation).refs++;
  *handle = m->second.allocation;
  return Status::success();
}

Status CudaContext::vmmRelease(uint64_t handle, uint64_t* freed) {
  auto it = vmmAllocations_.find(handle);
  if (it == vmmAllocations_.end() || it->second.refs == 0) {
    return notThisContexts("allocation handle " + std::to_string(handle));
  }
  if (Status s = makeCurrent(); !s.ok()) return s;
  if (Status s = driver_->call(driver_->memRelease, it->second.handle); !s.ok()) return s;
  it->second.refs--;
  vmmDropIfUnused(handle, freed);
  return Status::success();
}

Status CudaContext::vmmReserve(uint64_t bytes, uint64_t alignment, uint64_t hint,
                               uint64_t* address) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  CUdeviceptr pointer = 0;
  if (Status s = driver_->call(driver_->memAddressReserve, &pointer, bytes, alignment,
                               static_cast<CUdeviceptr>(hint), 0ull);
      !s.ok()) {
    return s;
  }
  vmmReservations_[pointer] = bytes;
  *address = pointer;
  return Status::success();
}

Status CudaContext::vmmFree(uint64_t address, uint64_t bytes) {
  auto it = vmmReservations_.find(address);
  if (it == vmmReservations_.end() || it->second != bytes) {
    return notThisContexts("the reservation " + hex(address));
  }
  if (Status s = makeCurrent(); !s.ok()) return s;
  if (Status s = driver_->call(driver_->memAddressFree, static_cast<CUdeviceptr>(address), bytes);
      !s.ok()) {
    return s;
  }
  vmmReservations_.erase(it);
  return Status::success();
}

Status CudaContext::vmmMap(uint64_t address, uint64_t bytes, uint64_t handle, uint64_t offset) {
  auto a = vmmAllocations_.find(handle);
  if (a == vmmAllocations_.end() || a->second.refs == 0) {
    return Status::error(CUDA_ERROR_INVALID_HANDLE, "not an allocation handle of this context");
  }
  if (vmmReservationOf(address, bytes) == vmmReservations_.end()) {
    return notThisContexts("[" + hex(address) + ", +" + std::to_string(bytes) + ")");
  }
  if (Status s = makeCurrent(); !s.ok()) return s;
  if (Status s = driver_->call(driver_->memMap, static_cast<CUdeviceptr>(address), bytes, offset,
                               a->second.handle, 0ull);
      !s.ok()) {
    return s;
  }
  vmmMappings_[address] = VmmMapping{bytes, handle, false};
  a->second.mappings++;
  return Status::success();
}

Status CudaContext::vmmUnmap(uint64_t address, uint64_t bytes, uint64_t* freed) {
  // Only whole mappings of this context's, one after another.
  uint64_t at = address;
  for (auto it = vmmMappings_.find(address); at < address + bytes; ++it) {
    if (it == vmmMappings_.end() || it->first != at || it->second.bytes > address + bytes - at) {
      return notThisContexts("a mapping at " + hex(at));
    }
    at += it->second.bytes;
  }
  if (bytes == 0) return Status::error(CUDA_ERROR_INVALID_VALUE, "an empty range");
  if (Status s = makeCurrent(); !s.ok()) return s;
  if (Status s = driver_->call(driver_->memUnmap, static_cast<CUdeviceptr>(address), bytes);
      !s.ok()) {
    return s;
  }
  for (auto it = vmmMappings_.find(address);
       it != vmmMappings_.end() && it->first < address + bytes;) {
    uint64_t id = it->second.allocation;
    it = vmmMappings_.erase(it);
    vmmAllocations_.at(id).mappings--;
    vmmDropIfUnused(id, freed);
  }
  vmmPublish();
  return Status::success();
}

Status CudaContext::vmmSetAccess(uint64_t address, uint64_t bytes, bool readWrite) {
  // Mapped throughout by mappings of this context's.
  auto first = vmmMappings_.upper_bound(address);
  if (first == vmmMappings_.begin() || bytes == 0) {
    return notThisContexts("a mapping at " + hex(address));
  }
  --first;
  uint64_t at = address;
  for (auto it = first; at < address + bytes; ++it) {
    if (it == vmmMappings_.end() || it->first > at || it->first + it->second.bytes <= at) {
      return notThisContexts("a mapping at " + hex(at));
    }
    at = it->first + it->second.bytes;
  }
  if (Status s = makeCurrent(); !s.ok()) return s;
  CUmemAccessDesc desc{};
  desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  desc.location.id = device_;
  desc.flags = readWrite ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE : CU_MEM_ACCESS_FLAGS_PROT_NONE;
  if (Status s = driver_->call(driver_->memSetAccess, static_cast<CUdeviceptr>(address), bytes,
                               &desc, size_t{1});
      !s.ok()) {
    return s;
  }
  for (auto it = first; it != vmmMappings_.end() && it->first < address + bytes; ++it) {
    it->second.readWrite = readWrite;
  }
  vmmPublish();
  return Status::success();
}

Status CudaContext::vmmGetAccess(uint64_t address, bool* readWrite) {
  auto m = vmmMappingOf(address);
  if (m == vmmMappings_.end()) return notThisContexts("a mapping at " + hex(address));
  if (Status s = makeCurrent(); !s.ok()) return s;
  CUmemLocation location{};
  location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  location.id = device_;
  unsigned long long flags = 0;
  if (Status s = driver_->call(driver_->memGetAccess, &flags, &location,
                               static_cast<CUdeviceptr>(address));
      !s.ok()) {
    return s;
  }
  *readWrite = flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return Status::success();
}

void CudaContext::vmmReleaseAll() {
  for (auto& [base, m] : vmmMappings_) {
    (void)driver_->call(driver_->memUnmap, static_cast<CUdeviceptr>(base), m.bytes);
  }
  vmmMappings_.clear();
  for (auto& [id, a] : vmmAllocations_) {
    for (unsigned i = 0; i < a.refs; ++i) (void)driver_->call(driver_->memRelease, a.handle);
    if (!a.counted) continue;
    memoryUsed_ -= a.bytes;
    *deviceMemoryUsed_ -= a.bytes;
  }
  vmmAllocations_.clear();
  for (auto& [base, bytes] : vmmReservations_) {
    (void)driver_->call(driver_->memAddressFree, static_cast<CUdeviceptr>(base), bytes);
  }
  vmmReservations_.clear();
  addresses_.removeOwnedBy(DeviceAddressMap::kVmmMapping);
}

}  // namespace gpupool::server
