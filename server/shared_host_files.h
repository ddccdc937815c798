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
  // Forgets file `id` (copies holding a Range of it finish first).
  Status release(uint64_t id);
  // [offset, offset + bytes) of file `id`; CUDA_ERROR_INVALID_VALUE naming `what` when the file is
  // unknown or the range does not lie inside it.
  Status find(uint64_t id, uint64_t offset, uint64_t bytes, const char* what, Range* range) const;

  size_t count() const;
  uint64_t totalBytes() const;

 private:
  mutable std::mutex mutex_;
  std::map<uint64_t, std::shared_ptr<const Mapping>> files_;
  uint64_t totalBytes_ = 0;
};

}  // namespace gpupool::server
