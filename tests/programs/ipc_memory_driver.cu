// CUDA IPC memory handles through the driver API, between two processes (forked before either
// touches CUDA, the handle passed over a pipe): cuIpcGetMemHandle on the exporter's cuMemAlloc
// memory, cuIpcOpenMemHandle and cuIpcCloseMemHandle in the other process, with the driver's
// answers to misuse and the opened memory's pointer attributes. Kernels run through the runtime
// in the primary context, which the driver calls use too.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "driver_check.h"
#include "process_pipe.h"
#include "shared_buffer_check.h"

namespace {

constexpr size_t kCount = 1 << 14;
constexpr size_t kBytes = kCount * sizeof(uint32_t);

int child(int fromParent, int toParent) {
  CUipcMemHandle handle;
  readAll(fromParent, &handle, sizeof(handle));
  CUcontext context = nullptr;
  startPrimaryContext(&context);

  CUdeviceptr opened = 0;
  expectError(cuIpcOpenMemHandle(&opened, handle, 0x10), CUDA_ERROR_INVALID_VALUE,
              "cuIpcOpenMemHandle(flags 0x10)");
  expectError(cuIpcOpenMemHandle(nullptr, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
              CUDA_ERROR_INVALID_VALUE, "cuIpcOpenMemHandle(null)");
  CUipcMemHandle forged = handle;
  forged.reserved[20] ^= 0x21;
  CHECK(cuIpcOpenMemHandle(&opened, forged, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) != CUDA_SUCCESS,
        "a forged handle opened");

  CHECK_CU(cuIpcOpenMemHandle(&opened, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
  CHECK(opened != 0, "opened at address 0");
  // Opening it again in the same context: the same pointer, one more close.
  CUdeviceptr again = 0;
  CHECK_CU(cuIpcOpenMemHandle(&again, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
  CHECK(again == opened, "a second open returned another pointer");

  checkHolds(opened, kCount, 0x1234, "the child reading the parent's data");

  CUcontext owner = nullptr;
  CHECK_CU(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, opened));
  CHECK(owner == context, "opened memory's context is not the opener's");
  CUdeviceptr devicePointer = 0;
  CHECK_CU(cuPointerGetAttribute(&devicePointer, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, opened));
  CHECK(devicePointer == opened, "opened memory's device pointer differs");
  unsigned memoryType = 0;
  CHECK_CU(cuPointerGetAttribute(&memoryType, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, opened));
  CHECK(memoryType == CU_MEMORYTYPE_DEVICE, "opened memory is not device memory");
  CUdeviceptr base = 0;
  size_t size = 0;
  CHECK_CU(cuMemGetAddressRange(&base, &size, opened + 64));
  CHECK(base == opened && size >= kBytes, "address range [%llx, +%zu)",
        static_cast<unsigned long long>(base), size);

  expectError(cuMemFree(opened), CUDA_ERROR_INVALID_VALUE, "cuMemFree(opened memory)");
  expectError(cuIpcCloseMemHandle(opened + 4), CUDA_ERROR_INVALID_VALUE,
              "cuIpcCloseMemHandle(interior pointer)");

  fillOnDevice(opened, kCount, 0xbeef);
  CHECK_CU(cuIpcCloseMemHandle(opened));
  // Still open once: the memory is still reachable.
  checkHolds(opened, kCount, 0xbeef, "the child after one of two closes");
  CHECK_CU(cuIpcCloseMemHandle(opened));
  expectError(cuIpcCloseMemHandle(opened), CUDA_ERROR_INVALID_VALUE, "a third close");
  char done = 'd';
  writeAll(toParent, &done, 1);
  return 0;
}

}  // namespace

int main() {
  int down[2], up[2];
  CHECK(pipe(down) == 0 && pipe(up) == 0, "pipe failed");
  pid_t pid = fork();  // before either process makes a CUDA call
  CHECK(pid >= 0, "fork failed");
  if (pid == 0) {
    close(down[1]);
    close(up[0]);
    std::exit(child(down[0], up[1]));
  }
  close(down[0]);
  close(up[1]);

  CUcontext context = nullptr;
  startPrimaryContext(&context);
  CUdeviceptr data = 0;
  CHECK_CU(cuMemAlloc(&data, kBytes));
  fillOnDevice(data, kCount, 0x1234);

  unsigned ipcCapable = 0;
  CHECK_CU(
      cuPointerGetAttribute(&ipcCapable, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, data));
  CHECK(ipcCapable == 1, "cuMemAlloc memory is not reported IPC-capable");

  CUipcMemHandle handle;
  expectError(cuIpcGetMemHandle(nullptr, data), CUDA_ERROR_INVALID_VALUE,
              "cuIpcGetMemHandle(null)");
  expectError(cuIpcGetMemHandle(&handle, data + 256), CUDA_ERROR_INVALID_VALUE,
              "cuIpcGetMemHandle(interior pointer)");
  CHECK_CU(cuIpcGetMemHandle(&handle, data));

  CUdeviceptr self = 0;
  expectError(cuIpcOpenMemHandle(&self, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
              CUDA_ERROR_INVALID_CONTEXT, "cuIpcOpenMemHandle(own handle)");
  expectError(cuIpcCloseMemHandle(data), CUDA_ERROR_INVALID_VALUE,
              "cuIpcCloseMemHandle(memory that was not opened)");

  writeAll(down[1], &handle, sizeof(handle));
  char done = 0;
  readAll(up[0], &done, 1);
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid, "waitpid failed");
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child failed (status %d)", status);

  checkHolds(data, kCount, 0xbeef, "the parent reading the child's writes");
  CHECK_CU(cuMemFree(data));
  std::printf("two processes shared %zu bytes through a driver IPC memory handle\n", kBytes);
  return pass();
}
