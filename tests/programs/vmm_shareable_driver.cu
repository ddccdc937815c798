// Shareable handles of virtual-memory allocations between two processes, through the driver API:
// the parent creates an allocation asking for POSIX file-descriptor handles, maps it, fills it
// and exports it (cuMemExportToShareableHandle); the descriptor travels to a child forked before
// either touched CUDA, over a Unix socket (SCM_RIGHTS), as applications pass it. The child imports
// it (cuMemImportFromShareableHandle), maps it, checks the parent's data with a kernel and writes
// its own, which the parent then reads through its mapping. With the driver's answers to misuse:
// an allocation made without the handle type, unknown handle types, descriptors that are not
// shareable handles.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "driver_check.h"
#include "process_pipe.h"
#include "shared_buffer_check.h"

namespace {

// Counts the elements that differ from the pattern of `salt` into *wrong.
__global__ void countMismatches(const uint32_t* p, size_t n, uint32_t salt,
                                unsigned long long* wrong) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    if (p[i] != sharedPattern(i, salt)) atomicAdd(wrong, 1ull);
  }
}

unsigned long long mismatchesOnDevice(CUdeviceptr p, size_t count, uint32_t salt) {
  CUdeviceptr wrong = 0;
  CHECK_CU(cuMemAlloc(&wrong, sizeof(unsigned long long)));
  CHECK_CU(cuMemsetD8(wrong, 0, sizeof(unsigned long long)));
  countMismatches<<<64, 256>>>(reinterpret_cast<const uint32_t*>(p), count, salt,
                               reinterpret_cast<unsigned long long*>(wrong));
  CHECK_CUDA(cudaGetLastError());
  unsigned long long host = 0;
  CHECK_CU(cuMemcpyDtoH(&host, wrong, sizeof(host)));
  CHECK_CU(cuMemFree(wrong));
  return host;
}

void sendDescriptor(int socket, int fd) {
  char byte = 'f';
  iovec io{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &io;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  cmsghdr* header = CMSG_FIRSTHDR(&message);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(header), &fd, sizeof(int));
  CHECK(sendmsg(socket, &message, 0) == 1, "sendmsg failed");
}

int receiveDescriptor(int socket) {
  char byte = 0;
  iovec io{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &io;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  CHECK(recvmsg(socket, &message, 0) == 1, "recvmsg failed");
  cmsghdr* header = CMSG_FIRSTHDR(&message);
  CHECK(header && header->cmsg_type == SCM_RIGHTS, "no descriptor received");
  int fd = -1;
  std::memcpy(&fd, CMSG_DATA(header), sizeof(int));
  return fd;
}

CUmemAllocationProp deviceProp(CUdevice device, CUmemAllocationHandleType handleTypes) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  prop.requestedHandleTypes = handleTypes;
  return prop;
}

// Reserves `bytes`, maps `handle` there with read-write access for `device`.
CUdeviceptr mapReadWrite(CUmemGenericAllocationHandle handle, size_t bytes, CUdevice device) {
  CUdeviceptr at = 0;
  CHECK_CU(cuMemAddressReserve(&at, bytes, 0, 0, 0));
  CHECK_CU(cuMemMap(at, bytes, 0, handle, 0));
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CHECK_CU(cuMemSetAccess(at, bytes, &access, 1));
  return at;
}

void unmapAndFree(CUdeviceptr at, size_t bytes) {
  CHECK_CU(cuMemUnmap(at, bytes));
  CHECK_CU(cuMemAddressFree(at, bytes));
}

void* asOsHandle(int fd) { return reinterpret_cast<void*>(static_cast<intptr_t>(fd)); }

int child(int socket, int toParent) {
  int fd = receiveDescriptor(socket);
  CUcontext context = nullptr;
  startPrimaryContext(&context);
  CUdevice device = 0;
  CHECK_CU(cuCtxGetDevice(&device));

  CUmemGenericAllocationHandle imported = 0;
  expectError(cuMemImportFromShareableHandle(nullptr, asOsHandle(fd),
                                             CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
              CUDA_ERROR_INVALID_VALUE, "cuMemImportFromShareableHandle(null)");
  CHECK_CU(cuMemImportFromShareableHandle(&imported, asOsHandle(fd),
                                          CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
  close(fd);  // the handle does not need the descriptor any more

  CUmemAllocationProp prop{};
  CHECK_CU(cuMemGetAllocationPropertiesFromHandle(&prop, imported));
  CHECK(prop.type == CU_MEM_ALLOCATION_TYPE_PINNED &&
            prop.location.type == CU_MEM_LOCATION_TYPE_DEVICE && prop.location.id == device,
        "imported allocation's properties");
  // The imported allocation reports no requested handle types (observed on driver 580.159.04,
  // H200).
  CHECK(prop.requestedHandleTypes == CU_MEM_HANDLE_TYPE_NONE,
        "imported allocation's requested handle types: %d",
        static_cast<int>(prop.requestedHandleTypes));

  size_t granularity = 0;
  CHECK_CU(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  const size_t bytes = 2 * granularity;
  const size_t count = bytes / sizeof(uint32_t);
  CUdeviceptr at = mapReadWrite(imported, bytes, device);
  CHECK(mismatchesOnDevice(at, count, 0x5eed) == 0,
        "the child's kernel does not see the parent's data");
  checkHolds(at, count, 0x5eed, "the child reading the parent's data");
  fillOnDevice(at, count, 0xc0de);
  // Unmapped and released here: the parent's allocation stays.
  unmapAndFree(at, bytes);
  CHECK_CU(cuMemRelease(imported));
  char done = 'd';
  writeAll(toParent, &done, 1);
  return 0;
}

int parent(int socket, int fromChild, pid_t pid) {
  CUcontext context = nullptr;
  startPrimaryContext(&context);
  CUdevice device = 0;
  CHECK_CU(cuCtxGetDevice(&device));
  int posixHandles = 0;
  CHECK_CU(cuDeviceGetAttribute(
      &posixHandles, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, device));
  CHECK(posixHandles == 1, "the device reports no POSIX file-descriptor handles");

  CUmemAllocationProp prop = deviceProp(device, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  size_t granularity = 0;
  CHECK_CU(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  const size_t bytes = 2 * granularity;
  const size_t count = bytes / sizeof(uint32_t);

  // An allocation made without asking for the handle type cannot be exported.
  CUmemAllocationProp plainProp = deviceProp(device, CU_MEM_HANDLE_TYPE_NONE);
  CUmemGenericAllocationHandle plain = 0;
  CHECK_CU(cuMemCreate(&plain, bytes, &plainProp, 0));
  int fd = -1;
  expectError(cuMemExportToShareableHandle(&fd, plain, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
              CUDA_ERROR_INVALID_VALUE, "exporting an allocation made without the handle type");
  CHECK_CU(cuMemRelease(plain));

  CUmemGenericAllocationHandle shared = 0;
  CHECK_CU(cuMemCreate(&shared, bytes, &prop, 0));
  CUmemAllocationProp got{};
  CHECK_CU(cuMemGetAllocationPropertiesFromHandle(&got, shared));
  CHECK(got.requestedHandleTypes == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
        "requested handle types read back as %d", static_cast<int>(got.requestedHandleTypes));
  CUdeviceptr at = mapReadWrite(shared, bytes, device);
  fillOnDevice(at, count, 0x5eed);

  expectError(
      cuMemExportToShareableHandle(nullptr, shared, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
      CUDA_ERROR_INVALID_VALUE, "cuMemExportToShareableHandle(null)");
  expectError(
      cuMemExportToShareableHandle(&fd, shared, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 1),
      CUDA_ERROR_INVALID_VALUE, "cuMemExportToShareableHandle(flags 1)");
  CHECK(cuMemExportToShareableHandle(&fd, shared, CU_MEM_HANDLE_TYPE_FABRIC, 0) != CUDA_SUCCESS,
        "a fabric handle exported from an allocation that did not ask for one");
  CHECK_CU(cuMemExportToShareableHandle(&fd, shared, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  CHECK(fd >= 0, "exported descriptor %d", fd);

  // Descriptors that are not shareable handles import nothing.
  CUmemGenericAllocationHandle bogus = 0;
  int devNull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  CHECK(devNull >= 0, "cannot open /dev/null");
  CHECK(cuMemImportFromShareableHandle(&bogus, asOsHandle(devNull),
                                       CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) != CUDA_SUCCESS,
        "/dev/null imported as an allocation");
  close(devNull);
  CHECK(cuMemImportFromShareableHandle(&bogus, asOsHandle(-1),
                                       CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) != CUDA_SUCCESS,
        "descriptor -1 imported as an allocation");

  // The exporting process may import its own descriptor: the same memory.
  CUmemGenericAllocationHandle own = 0;
  CHECK_CU(cuMemImportFromShareableHandle(&own, asOsHandle(fd),
                                          CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
  CUdeviceptr alias = mapReadWrite(own, bytes, device);
  checkHolds(alias, count, 0x5eed, "the exporter's own import");
  unmapAndFree(alias, bytes);
  CHECK_CU(cuMemRelease(own));

  // A duplicate travels to the child; the original is closed here.
  int copy = dup(fd);
  CHECK(copy >= 0, "dup failed");
  close(fd);
  sendDescriptor(socket, copy);
  close(copy);

  char done = 0;
  readAll(fromChild, &done, 1);
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid, "waitpid failed");
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child failed (status %d)", status);

  CHECK(mismatchesOnDevice(at, count, 0xc0de) == 0,
        "the parent's kernel does not see the child's writes");
  checkHolds(at, count, 0xc0de, "the parent reading the child's writes");
  unmapAndFree(at, bytes);
  CHECK_CU(cuMemRelease(shared));
  std::printf("two processes shared %zu bytes through a POSIX file-descriptor shareable handle\n",
              bytes);
  return pass();
}

}  // namespace

int main() {
  int sockets[2], up[2];
  CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sockets) == 0 && pipe(up) == 0,
        "socketpair or pipe failed");
  pid_t pid = fork();  // before either process makes a CUDA call
  CHECK(pid >= 0, "fork failed");
  if (pid == 0) {
    close(sockets[0]);
    close(up[0]);
    std::exit(child(sockets[1], up[1]));
  }
  close(sockets[1]);
  close(up[1]);
  return parent(sockets[0], up[0], pid);
}
