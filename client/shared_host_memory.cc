#include "shared_host_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <string>

#include "client_log.h"
#include "driver_state.h"
#include "remote_session.h"

namespace gpupool::client {
namespace {

// Sealed as the server requires: it maps the file and must never see it shrink under it.
constexpr int kSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

std::atomic<uint64_t> nextFileId{1};

bool contains(const std::vector<RemoteSession*>& sessions, const RemoteSession* s) {
  return std::find(sessions.begin(), sessions.end(), s) != sessions.end();
}

// A sealed memory file of `bytes` rounded up to `unit`, its pages allocated now, as pinned memory's
// are: they are this process's before the server ever touches them (it refuses a file with holes).
std::shared_ptr<SharedHostFile> createFile(size_t bytes, size_t unit) {
  if (bytes > SIZE_MAX - unit) {
    errno = ENOMEM;
    return nullptr;
  }
  size_t rounded = (bytes + unit - 1) / unit * unit;
  transport::FileDescriptor file(::memfd_create("gpupool-pinned", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (file.get() < 0 || ::ftruncate(file.get(), static_cast<off_t>(rounded)) != 0 ||
      ::fallocate(file.get(), 0, 0, static_cast<off_t>(rounded)) != 0 ||
      ::fcntl(file.get(), F_ADD_SEALS, kSeals) != 0)
    return nullptr;
  auto shared = std::make_shared<SharedHostFile>();
  shared->file = std::move(file);
  shared->id = nextFileId.fetch_add(1, std::memory_order_relaxed);
  shared->bytes = rounded;
  return shared;
}

}  // namespace

void* allocateSharedHostMemory(size_t bytes, std::shared_ptr<SharedHostFile>* out) {
  auto shared = createFile(bytes, static_cast<size_t>(::sysconf(_SC_PAGESIZE)));
  if (!shared) return nullptr;
  void* p = ::mmap(nullptr, shared->bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                   shared->file.get(), 0);
  if (p == MAP_FAILED) return nullptr;
  *out = std::move(shared);
  return p;
}

void* allocateMappedHostMemory(RemoteSession& session, uint64_t remoteContext, size_t bytes,
                               std::shared_ptr<SharedHostFile>* out, CUresult* error) {
  auto shared = createFile(bytes, static_cast<size_t>(::sysconf(_SC_PAGESIZE)));
  if (!shared) {
    *error = CUDA_ERROR_OUT_OF_MEMORY;
    return nullptr;
  }
  if (!shareHostFileWith(session, *shared)) {
    *error = CUDA_ERROR_OUT_OF_MEMORY;
    return nullptr;
  }
  uint64_t address = 0;
  *error = session.mapHostFile(shared->id, remoteContext, &address);
  if (*error != CUDA_SUCCESS) {
    releaseSharedHostMemory(*shared);
    return nullptr;
  }
  if (!session.reservedWindowHolds(address, shared->bytes)) {
    releaseSharedHostMemory(*shared);
    *error = refuseCall(CUDA_ERROR_UNKNOWN,
                        "cuMemHostAlloc: the server mapped pinned memory outside its device "
                        "address window");
    return nullptr;
  }
  // Over this process's own PROT_NONE reservation of the window: nothing else lives there.
  void* p = ::mmap(reinterpret_cast<void*>(address), shared->bytes, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_FIXED | MAP_POPULATE, shared->file.get(), 0);
  if (p == MAP_FAILED) {
    releaseSharedHostMemory(*shared);
    *error = CUDA_ERROR_OUT_OF_MEMORY;
    return nullptr;
  }
  shared->deviceAddress = address;
  *out = std::move(shared);
  return p;
}

void unmapSharedHostMemory(void* p, const SharedHostFile& file) {
  if (!file.deviceAddress) {
    ::munmap(p, file.bytes);
    return;
  }
  // Back to the window's reservation, so no host mapping can land on device addresses.
  (void)::mmap(p, file.bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
               -1, 0);
}

bool shareHostFileWith(RemoteSession& session, SharedHostFile& file) {
  std::lock_guard lock(file.mutex);
  if (contains(file.sharedWith, &session)) return true;
  if (contains(file.refusedBy, &session)) return false;
  CUresult r = session.shareHostFile(file.file.get(), file.id, file.bytes);
  if (r != CUDA_SUCCESS) {
    // Copies there carry their bytes instead, as for any other memory; the reason was logged.
    file.refusedBy.push_back(&session);
    return false;
  }
  file.sharedWith.push_back(&session);
  return true;
}

void releaseSharedHostMemory(SharedHostFile& file) {
  std::lock_guard lock(file.mutex);
  for (RemoteSession* session : file.sharedWith) session->releaseHostFile(file.id);
  file.sharedWith.clear();
}

std::optional<SharedHostRange> sharedHostRange(RemoteSession& session, const void* p,
                                               size_t bytes) {
  if (bytes < kSharedHostCopyMinBytes || !session.sharesHostFiles()) return std::nullopt;
  uintptr_t base = 0;
  HostAllocation info;
  if (!DriverState::get().findHost(p, &base, &info) || !info.file) return std::nullopt;
  uintptr_t offset = reinterpret_cast<uintptr_t>(p) - base;
  if (offset > info.size || bytes > info.size - offset) return std::nullopt;
  if (!shareHostFileWith(session, *info.file)) return std::nullopt;
  return SharedHostRange{info.file->id, offset};
}

}  // namespace gpupool::client
