// The POSIX file descriptor cuMemExportToShareableHandle hands out: a sealed memfd whose content
// names the pool server (its instance), the device there, the export's token and the allocation's
// properties. Like NVIDIA's descriptor it can be duplicated, inherited across fork and passed over
// a Unix socket (SCM_RIGHTS); cuMemImportFromShareableHandle reads it back. The token is the only
// secret: the server opens it only for a session of the exporter's tenant.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace gpupool::client {

struct VmmShareableRecord {
  char magic[16];
  uint64_t serverInstance = 0;
  int32_t serverDevice = 0;
  uint32_t padding = 0;
  uint8_t token[16] = {};
  uint64_t bytes = 0;
  CUmemAllocationProp prop{};
};

// A new descriptor holding `record` (the magic is set here), or -1 with errno set.
int writeVmmShareableFd(VmmShareableRecord record);
// False when `fd` is not a descriptor writeVmmShareableFd made (closed, another file, too short).
bool readVmmShareableFd(int fd, VmmShareableRecord* record);

}  // namespace gpupool::client
