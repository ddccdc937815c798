#include "vmm_shareable_fd.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gpupool::client {
namespace {
constexpr char kVmmShareableMagic[16] = "gpupool-vmm-fd1";
}  // namespace

int writeVmmShareableFd(VmmShareableRecord record) {
  std::memcpy(record.magic, kVmmShareableMagic, sizeof(record.magic));
  int fd = memfd_create("gpupool-vmm-shareable", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return -1;
  // Sealed, so no process it is passed to can change what it names.
  if (pwrite(fd, &record, sizeof(record), 0) != static_cast<ssize_t>(sizeof(record)) ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
    int saved = errno;
    close(fd);
    errno = saved;
    return -1;
  }
  return fd;
}

bool readVmmShareableFd(int fd, VmmShareableRecord* record) {
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      st.st_size != static_cast<off_t>(sizeof(*record))) {
    return false;
  }
  if (pread(fd, record, sizeof(*record), 0) != static_cast<ssize_t>(sizeof(*record))) return false;
  return std::memcmp(record->magic, kVmmShareableMagic, sizeof(record->magic)) == 0;
}

}  // namespace gpupool::client
