#include "server/shared_host_files.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "server/backend.h"

namespace gpupool::server {
namespace {

constexpr int kRequiredSeals = F_SEAL_SHRINK | F_SEAL_GROW;

Status refused(const std::string& why) {
  return Status::error(CUDA_ERROR_INVALID_VALUE, "shared host memory refused: " + why);
}

}  // namespace

SharedHostFiles::Mapping::~Mapping() { ::munmap(base_, bytes_); }

Status SharedHostFiles::share(uint64_t id, uint64_t bytes, transport::FileDescriptor file) {
  if (file.get() < 0) return refused("no memory file came with the request");
  if (id == 0) return refused("file id 0");
  // Whole pages, so any backend can also map it into device addresses (hostFileMap).
  if (bytes == 0 || bytes % BackendContext::kHostFileMapGranularity)
    return refused("size " + std::to_string(bytes) + " is not whole pages");
  struct stat st {};
  if (::fstat(file.get(), &st) != 0 || !S_ISREG(st.st_mode)) return refused("not a memory file");
  if (static_cast<uint64_t>(st.st_size) != bytes)
    return refused("the file holds " + std::to_string(st.st_size) + " bytes, not " +
                   std::to_string(bytes));
  int seals = ::fcntl(file.get(), F_GET_SEALS);
  if (seals < 0 || (seals & kRequiredSeals) != kRequiredSeals)
    return refused("the file is not sealed against shrinking and growing");
  if (static_cast<uint64_t>(st.st_blocks) * 512 < bytes)
    return refused("the file's pages are not all allocated (pinned memory is populated)");
  {
    std::lock_guard lock(mutex_);
    if (files_.count(id)) return refused("file id " + std::to_string(id) + " is in use");
    if (files_.size() >= kMaxSharedHostFiles)
      return refused("more than " + std::to_string(kMaxSharedHostFiles) + " files in a session");
    if (bytes > kMaxSharedHostBytes - totalBytes_)
      return refused("more than " + std::to_string(kMaxSharedHostBytes >> 30) +
                     " GiB shared in a session");
  }
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, file.get(), 0);
  if (base == MAP_FAILED) return refused(std::string("cannot map it: ") + std::strerror(errno));
  Entry entry;
  entry.mapping = std::make_shared<const Mapping>(static_cast<std::byte*>(base), bytes);
  entry.memfd = std::shared_ptr<int>(new int(file.release()), [](int* fd) {
    ::close(*fd);
    delete fd;
  });
  std::lock_guard lock(mutex_);
  // Checked again: another thread of this session cannot share meanwhile (one request at a time),
  // but the map is the authority.
  if (!files_.emplace(id, std::move(entry)).second)
    return refused("file id " + std::to_string(id) + " is in use");
  totalBytes_ += bytes;
  return Status::success();
}

Status SharedHostFiles::descriptor(uint64_t id, std::shared_ptr<int>* memfd,
                                   uint64_t* bytes) const {
  std::lock_guard lock(mutex_);
  auto it = files_.find(id);
  if (it == files_.end())
    return Status::error(CUDA_ERROR_INVALID_VALUE,
                         "no shared host file " + std::to_string(id) + " in this session");
  *memfd = it->second.memfd;
  *bytes = it->second.mapping->bytes();
  return Status::success();
}

Status SharedHostFiles::noteDeviceMapping(uint64_t id, const DeviceMapping& mapping) {
  std::lock_guard lock(mutex_);
  auto it = files_.find(id);
  if (it == files_.end())
    return Status::error(CUDA_ERROR_INVALID_VALUE,
                         "no shared host file " + std::to_string(id) + " in this session");
  if (it->second.device.context)
    return Status::error(CUDA_ERROR_INVALID_VALUE, "shared host file " + std::to_string(id) +
                                                       " is mapped into device addresses already");
  it->second.device = mapping;
  return Status::success();
}

Status SharedHostFiles::release(uint64_t id, DeviceMapping* unmap) {
  Entry gone;  // unmapped outside the lock
  std::lock_guard lock(mutex_);
  auto it = files_.find(id);
  if (it == files_.end())
    return Status::error(CUDA_ERROR_INVALID_VALUE,
                         "no shared host file " + std::to_string(id) + " in this session");
  gone = std::move(it->second);
  totalBytes_ -= gone.mapping->bytes();
  files_.erase(it);
  if (unmap) *unmap = gone.device;
  return Status::success();
}

Status SharedHostFiles::find(uint64_t id, uint64_t offset, uint64_t bytes, const char* what,
                             Range* range) const {
  std::lock_guard lock(mutex_);
  auto it = files_.find(id);
  if (it == files_.end())
    return Status::error(CUDA_ERROR_INVALID_VALUE, std::string(what) + ": no shared host file " +
                                                       std::to_string(id) + " in this session");
  const auto& mapping = it->second.mapping;
  if (offset > mapping->bytes() || bytes > mapping->bytes() - offset)
    return Status::error(CUDA_ERROR_INVALID_VALUE,
                         std::string(what) + ": bytes " + std::to_string(offset) + "+" +
                             std::to_string(bytes) + " lie outside shared host file " +
                             std::to_string(id) + " of " + std::to_string(mapping->bytes()));
  range->mapping = mapping;
  range->data = mapping->base() + offset;
  return Status::success();
}

size_t SharedHostFiles::count() const {
  std::lock_guard lock(mutex_);
  return files_.size();
}

uint64_t SharedHostFiles::totalBytes() const {
  std::lock_guard lock(mutex_);
  return totalBytes_;
}

}  // namespace gpupool::server
