// Pinned host memory that a client on the server's own host shares with its session as memory
// files (over shm: the file comes with SCM_RIGHTS, then a share request names it). Each is mapped
// here once, so a copy from or to it names (file, offset) and its bytes move once, between this
// mapping and device memory, instead of through the ring. The mappings go with the session.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "common/status.h"
#include "transport/file_descriptor.h"

namespace gpupool::server {

// At most this many files, and this many bytes in all, per session: every mapping costs address
// space and a map entry here, whatever a client asks.
constexpr size_t kMaxSharedHostFiles = 4096;
constexpr uint64_t kMaxSharedHostBytes = uint64_t{1} << 40;

class SharedHostFiles {
 public:
  // One mapped file; unmapped when the last holder lets go.
  class Mapping {
   public:
    Mapping(std::byte* base, uint64_t bytes) : base_(base), bytes_(bytes) {}
    Mapping(const Mapping&) = delete;
    Mapping& operator=(const Mapping&) = delete;
    ~Mapping();
    std::byte* base() const { return base_; }
    uint64_t bytes() const { return bytes_; }

   private:
    std::byte* base_;
    uint64_t bytes_;
  };

  // A range of a shared file, held mapped while the holder lives.
  struct Range {
    std::shared_ptr<const Mapping> mapping;
    std::byte* data = nullptr;
  };

  // Maps `file` as the client's file `id` of `bytes` bytes after checking that it is what a
  // client's pinned memory is: a regular memory file of exactly that size, sealed against shrinking
  // and growing (a file shrunk under the mapping would turn reads of it into SIGBUS), its pages all
  // allocated already (the client's, so this server is never made to allocate them), and `id` not
  // in use. CUDA_ERROR_INVALID_VALUE with the reason otherwise; `file` is closed either way.
  Status share(uint64_t id, uint64_t bytes, transport::FileDescriptor file);
  // Where a file is mapped into device addresses too (BackendContext::hostFileMap).
  struct DeviceMapping {
    uint64_t context = 0;  // 0: nowhere
    uint64_t address = 0;
    uint64_t bytes = 0;
  };
  // File `id`'s descriptor and size, for mapping it into device addresses.
  Status descriptor(uint64_t id, std::shared_ptr<int>* memfd, uint64_t* bytes) const;
  // Notes where file `id` is mapped into device addresses (one place per file);
  // CUDA_ERROR_INVALID_VALUE when it is already mapped or unknown.
  Status noteDeviceMapping(uint64_t id, const DeviceMapping& mapping);
  // Forgets file `id` (copies holding a Range of it finish first); *unmap says where it is still
  // mapped into device addresses, for the caller to undo.
  Status release(uint64_t id, DeviceMapping* unmap = nullptr);
  // [offset, offset + bytes) of file `id`; CUDA_ERROR_INVALID_VALUE naming `what` when the file is
  // unknown or the range does not lie inside it.
  Status find(uint64_t id, uint64_t offset, uint64_t bytes, const char* what, Range* range) const;

  size_t count() const;
  uint64_t totalBytes() const;

 private:
  struct Entry {
    std::shared_ptr<const Mapping> mapping;
    std::shared_ptr<int> memfd;  // closed when the last holder lets go
    DeviceMapping device;
  };
  mutable std::mutex mutex_;
  std::map<uint64_t, Entry> files_;
  uint64_t totalBytes_ = 0;
};

}  // namespace gpupool::server
