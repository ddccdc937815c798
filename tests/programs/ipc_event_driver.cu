// CUDA IPC event handles through the driver API, between two processes (forked before either
// touches CUDA, the handles passed over pipes): cuIpcGetEventHandle on an interprocess event
// recorded after a slow kernel, cuIpcOpenEventHandle in the other process, whose stream waits on
// it (cuStreamWaitEvent) before reading memory shared by an IPC memory handle; then the reverse
// through the opened event. Also the driver's answers to misuse. Kernels run through the runtime in
// the primary context, which the driver calls use too.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "driver_check.h"
#include "process_pipe.h"

namespace {

constexpr size_t kCount = 1 << 14;
constexpr size_t kBytes = kCount * sizeof(uint32_t);
constexpr int kSpin = 200000;  // keeps the kernel running long after its launch returned

__global__ void slowFill(uint32_t* p, size_t n, uint32_t base, int spin) {
  if (threadIdx.x == 0) {
    volatile int sink = 0;
    for (int i = 0; i < spin; ++i) sink = sink + i;
  }
  __syncthreads();
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) p[i] = base + static_cast<uint32_t>(i);
}

void launchSlowFill(CUdeviceptr p, CUstream stream, uint32_t base) {
  slowFill<<<1, 256, 0, reinterpret_cast<cudaStream_t>(stream)>>>(reinterpret_cast<uint32_t*>(p),
                                                                  kCount, base, kSpin);
  CHECK_CUDA(cudaGetLastError());
}

// Copies the memory out on `stream`, after what the stream waits for, and checks base + i.
void expectHolds(CUdeviceptr p, CUstream stream, uint32_t base, const char* who) {
  std::vector<uint32_t> host(kCount, 0);
  CHECK_CU(cuMemcpyDtoHAsync(host.data(), p, kBytes, stream));
  CHECK_CU(cuStreamSynchronize(stream));
  for (size_t i = 0; i < kCount; ++i) {
    uint32_t want = base + static_cast<uint32_t>(i);
    CHECK(host[i] == want, "%s: element %zu reads %u, expected %u", who, i, host[i], want);
  }
}

void startPrimaryContext() {
  CHECK_CUDA(cudaFree(nullptr));  // the runtime makes the primary context current
  CUcontext context = nullptr;
  CHECK_CU(cuCtxGetCurrent(&context));
  CHECK(context != nullptr, "no current context");
}

struct Handles {
  CUipcMemHandle memory;
  CUipcEventHandle event;
};

int child(int fromParent, int toParent) {
  Handles handles;
  readAll(fromParent, &handles, sizeof(handles));
  startPrimaryContext();
  CUdeviceptr data = 0;
  CHECK_CU(cuIpcOpenMemHandle(&data, handles.memory, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));

  CUevent event = nullptr;
  expectError(cuIpcOpenEventHandle(nullptr, handles.event), CUDA_ERROR_INVALID_VALUE,
              "cuIpcOpenEventHandle(null)");
  CUipcEventHandle forged = handles.event;
  forged.reserved[9] ^= 0x42;
  CHECK(cuIpcOpenEventHandle(&event, forged) != CUDA_SUCCESS, "a forged event handle opened");
  CUipcEventHandle memoryAsEvent;
  std::memcpy(&memoryAsEvent, &handles.memory, sizeof(memoryAsEvent));
  CHECK(cuIpcOpenEventHandle(&event, memoryAsEvent) != CUDA_SUCCESS,
        "a memory handle opened as an event");
  CHECK_CU(cuIpcOpenEventHandle(&event, handles.event));

  CUstream stream = nullptr;
  CHECK_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CHECK_CU(cuStreamWaitEvent(stream, event, 0));
  expectHolds(data, stream, 1000, "the child after waiting on the parent's record");
  CHECK_CU(cuEventSynchronize(event));
  CHECK_CU(cuEventQuery(event));
  float ms = 0;
  CHECK(cuEventElapsedTime(&ms, event, event) != CUDA_SUCCESS,
        "elapsed time of an event without timing");

  launchSlowFill(data, stream, 2000);
  CHECK_CU(cuEventRecord(event, stream));
  char recorded = 'r';
  writeAll(toParent, &recorded, 1);
  char done = 0;
  readAll(fromParent, &done, 1);
  CHECK_CU(cuStreamSynchronize(stream));
  CHECK_CU(cuEventDestroy(event));
  CHECK_CU(cuStreamDestroy(stream));
  CHECK_CU(cuIpcCloseMemHandle(data));
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

  startPrimaryContext();
  CUdevice device = 0;
  CHECK_CU(cuCtxGetDevice(&device));
  int supported = 0;
  CHECK_CU(cuDeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED, device));
  CHECK(supported == 1, "the device does not report IPC event support");

  CUdeviceptr data = 0;
  CHECK_CU(cuMemAlloc(&data, kBytes));
  CHECK_CU(cuMemsetD32(data, 0, kCount));
  Handles handles;
  CHECK_CU(cuIpcGetMemHandle(&handles.memory, data));

  CUevent timed = nullptr, event = nullptr;
  CHECK_CU(cuEventCreate(&timed, CU_EVENT_INTERPROCESS));
  CHECK(cuIpcGetEventHandle(&handles.event, timed) != CUDA_SUCCESS,
        "an interprocess event with timing got an IPC handle");
  CHECK_CU(cuEventCreate(&event, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING));
  expectError(cuIpcGetEventHandle(nullptr, event), CUDA_ERROR_INVALID_VALUE,
              "cuIpcGetEventHandle(null)");

  CUstream stream = nullptr;
  CHECK_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  launchSlowFill(data, stream, 1000);
  CHECK_CU(cuEventRecord(event, stream));
  CHECK_CU(cuIpcGetEventHandle(&handles.event, event));
  CUevent own = nullptr;
  CHECK(cuIpcOpenEventHandle(&own, handles.event) != CUDA_SUCCESS,
        "the exporting process opened its own event handle");
  writeAll(down[1], &handles, sizeof(handles));

  char recorded = 0;
  readAll(up[0], &recorded, 1);
  CUstream reader = nullptr;
  CHECK_CU(cuStreamCreate(&reader, CU_STREAM_NON_BLOCKING));
  CHECK_CU(cuStreamWaitEvent(reader, event, 0));
  expectHolds(data, reader, 2000, "the parent after waiting on the child's record");
  char done = 'd';
  writeAll(down[1], &done, 1);

  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid, "waitpid failed");
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child failed (status %d)", status);
  CHECK_CU(cuEventDestroy(event));
  CHECK_CU(cuEventDestroy(timed));
  CHECK_CU(cuStreamDestroy(stream));
  CHECK_CU(cuStreamDestroy(reader));
  CHECK_CU(cuMemFree(data));
  std::printf("two processes ordered their streams through one driver IPC event, both ways\n");
  return pass();
}
