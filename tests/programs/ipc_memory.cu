// CUDA IPC memory handles through the runtime API, between two processes: the parent allocates
// and fills device memory, exports it (cudaIpcGetMemHandle) and sends the handle over a pipe; the
// child (forked before either process touches CUDA) opens it (cudaIpcOpenMemHandle), checks what
// the parent wrote with a kernel and a copy, writes its own values, and closes it. The parent then
// sees the child's values. Both check the errors the runtime gives for misuse.
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "process_pipe.h"
#include "self_check.h"

namespace {

constexpr int kCount = 4096;

__global__ void fill(int* data, int n, int base) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] = base + i;
}

// Counts elements that differ from base + i.
__global__ void countMismatches(const int* data, int n, int base, int* mismatches) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && data[i] != base + i) atomicAdd(mismatches, 1);
}

int mismatchesOnDevice(const int* data, int base) {
  int* mismatches = nullptr;
  CHECK_CUDA(cudaMalloc(&mismatches, sizeof(int)));
  CHECK_CUDA(cudaMemset(mismatches, 0, sizeof(int)));
  countMismatches<<<(kCount + 255) / 256, 256>>>(data, kCount, base, mismatches);
  CHECK_CUDA(cudaGetLastError());
  int count = -1;
  CHECK_CUDA(cudaMemcpy(&count, mismatches, sizeof(int), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaFree(mismatches));
  return count;
}

// The child: opens the parent's memory, checks it, overwrites it, closes it.
int child(int fromParent, int toParent) {
  cudaIpcMemHandle_t handle;
  readAll(fromParent, &handle, sizeof(handle));

  // Unknown flags are refused; so is a handle whose token was changed.
  void* opened = nullptr;
  CHECK(cudaIpcOpenMemHandle(&opened, handle, 0x10) != cudaSuccess, "flags 0x10 were accepted");
  cudaGetLastError();
  cudaIpcMemHandle_t forged = handle;
  forged.reserved[12] ^= 0x5a;
  CHECK(cudaIpcOpenMemHandle(&opened, forged, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess,
        "a forged handle opened");
  cudaGetLastError();

  CHECK_CUDA(cudaIpcOpenMemHandle(&opened, handle, cudaIpcMemLazyEnablePeerAccess));
  int* data = static_cast<int*>(opened);
  CHECK(mismatchesOnDevice(data, 1000) == 0, "the child's kernel does not see the parent's data");
  std::vector<int> host(kCount);
  CHECK_CUDA(cudaMemcpy(host.data(), data, kCount * sizeof(int), cudaMemcpyDeviceToHost));
  for (int i = 0; i < kCount; ++i) CHECK(host[i] == 1000 + i, "element %d reads %d", i, host[i]);

  cudaPointerAttributes attributes{};
  CHECK_CUDA(cudaPointerGetAttributes(&attributes, data));
  CHECK(attributes.type == cudaMemoryTypeDevice, "opened memory is not device memory");
  CHECK(attributes.devicePointer == data, "opened memory's device pointer differs");

  // Opened memory is closed, never freed.
  CHECK(cudaFree(data) != cudaSuccess, "cudaFree accepted memory opened by IPC");
  cudaGetLastError();

  fill<<<(kCount + 255) / 256, 256>>>(data, kCount, 5000);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  CHECK_CUDA(cudaIpcCloseMemHandle(data));
  CHECK(cudaIpcCloseMemHandle(data) != cudaSuccess, "a second close succeeded");
  cudaGetLastError();
  char done = 'd';
  writeAll(toParent, &done, 1);
  return 0;
}

}  // namespace

int main() {
  int down[2], up[2];
  CHECK(pipe(down) == 0 && pipe(up) == 0, "pipe failed");
  // Fork before either process makes a CUDA call: the child starts with no CUDA state.
  pid_t pid = fork();
  CHECK(pid >= 0, "fork failed");
  if (pid == 0) {
    close(down[1]);
    close(up[0]);
    std::exit(child(down[0], up[1]));
  }
  close(down[0]);
  close(up[1]);

  int* data = nullptr;
  CHECK_CUDA(cudaMalloc(&data, kCount * sizeof(int)));
  fill<<<(kCount + 255) / 256, 256>>>(data, kCount, 1000);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());

  // Only the base of an allocation has a handle.
  cudaIpcMemHandle_t handle;
  EXPECT_CUDA_ERROR(cudaIpcGetMemHandle(&handle, data + 1), cudaErrorInvalidValue);
  CHECK_CUDA(cudaIpcGetMemHandle(&handle, data));
  cudaIpcMemHandle_t again;
  CHECK_CUDA(cudaIpcGetMemHandle(&again, data));
  CHECK(std::memcmp(&handle, &again, sizeof(handle)) == 0, "a second handle differs");

  // The exporting process cannot open its own handle.
  void* self = nullptr;
  CHECK(cudaIpcOpenMemHandle(&self, handle, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess,
        "the exporting process opened its own handle");
  cudaGetLastError();
  // Memory that was not opened cannot be closed.
  CHECK(cudaIpcCloseMemHandle(data) != cudaSuccess, "closed memory that was not opened");
  cudaGetLastError();

  writeAll(down[1], &handle, sizeof(handle));
  char done = 0;
  readAll(up[0], &done, 1);
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid, "waitpid failed");
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child failed (status %d)", status);

  CHECK(mismatchesOnDevice(data, 5000) == 0, "the parent does not see the child's writes");
  CHECK_CUDA(cudaFree(data));
  std::printf("two processes shared %d ints through an IPC memory handle\n", kCount);
  return pass();
}
