// Pinned host memory in memory files, for sessions whose server runs on this host (shm): the
// server maps each file once (server/shared_host_files.h), so a copy from or to it names (file,
// offset) and its bytes move once, on the server, between the file and device memory, instead of
// through the rings. Used by cuMemHostAlloc and cuMemAllocHost when the current context's session
// shares host files (an shm session whose server accepts them; GPU_POOL_SHM_HOST_FILES=0 turns it
// off); memory the application registers (cuMemHostRegister) is its own and keeps travelling.
//
// A file is shared with a session lazily, by the first copy there that names it, and released
// there when the memory is freed.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "transport/file_descriptor.h"

namespace gpupool::client {

class RemoteSession;

// Copies smaller than this travel through the ring as before: a shared-file copy that must
// complete before the call returns costs a round trip, which a small copy's bytes do not.
constexpr size_t kSharedHostCopyMinBytes = 64 * 1024;

struct SharedHostFile {
  transport::FileDescriptor file;
  uint64_t id = 0;   // unique in this process, never reused
  size_t bytes = 0;  // the file's (and mapping's) size: whole pages
  // Mapped pinned memory: where the file lies here and in its server's device addresses (the
  // same address); 0 for other pinned memory.
  uint64_t deviceAddress = 0;
  std::mutex mutex;                        // guards the two lists
  std::vector<RemoteSession*> sharedWith;  // sessions that mapped it (they live until exit)
  std::vector<RemoteSession*> refusedBy;   // sessions that would not: copies there use the ring
};

// Maps `bytes` of zeroed, populated memory from a new sealed memory file; null (errno set) when
// the file cannot be made, so the caller can fall back to ordinary memory.
void* allocateSharedHostMemory(size_t bytes, std::shared_ptr<SharedHostFile>* file);

// Mapped pinned memory where `session` can serve it (RemoteSession::mapsHostMemory: then every
// cuMemHostAlloc is, with or without CU_MEMHOSTALLOC_DEVICEMAP): a file of whole pages, shared
// with `session`, mapped into the device addresses of its context `remoteContext` there, and
// mapped here at that same address (inside the device window this process keeps reserved), so one
// pointer is the host's and the device's, as under unified addressing. Null with *error set when
// it cannot be made.
void* allocateMappedHostMemory(RemoteSession& session, uint64_t remoteContext, size_t bytes,
                               std::shared_ptr<SharedHostFile>* file, CUresult* error);

// Takes `file`'s memory out of this process (after releaseSharedHostMemory): unmapped, or for
// mapped pinned memory given back to the device window's reservation.
void unmapSharedHostMemory(void* p, const SharedHostFile& file);

// Whether copies to and from `file` in `session` may name it: shares it there first when it has
// not been (once; a refusal is remembered and logged).
bool shareHostFileWith(RemoteSession& session, SharedHostFile& file);

// Tells every session that mapped `file` to forget it (posted), before the caller unmaps it.
void releaseSharedHostMemory(SharedHostFile& file);

// Where [p, p + bytes) lies when a copy of it in `session` can name a shared file instead of
// carrying its bytes: the file's id and the offset in it.
struct SharedHostRange {
  uint64_t file = 0;
  uint64_t offset = 0;
};
std::optional<SharedHostRange> sharedHostRange(RemoteSession& session, const void* p, size_t bytes);

}  // namespace gpupool::client
