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

}  // namespace

void* allocateSharedHostMemory(size_t bytes, std::shared_ptr<SharedHostFile>* out) {
  size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  if (bytes > SIZE_MAX - page) {
    errno = ENOMEM;
    return nullptr;
  }
  size_t rounded = (bytes + page - 1) / page * page;
  transport::FileDescriptor file(::memfd_create("gpupool-pinned", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  // Allocated now, as pinned memory is: its pages are this process's before the server ever
  // touches them (it refuses a file with holes).
  if (file.get() < 0 || ::ftruncate(file.get(), static_cast<off_t>(rounded)) != 0 ||
      ::fallocate(file.get(), 0, 0, static_cast<off_t>(rounded)) != 0 ||
      ::fcntl(file.get(), F_ADD_SEALS, kSeals) != 0)
    return nullptr;
  void* p =
      ::mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, file.get(), 0);
  if (p == MAP_FAILED) return nullptr;
  auto shared = std::make_shared<SharedHostFile>();
  shared->file = std::move(file);
  shared->id = nextFileId.fetch_add(1, std::memory_order_relaxed);
  shared->bytes = rounded;
  *out = std::move(shared);
  return p;
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
