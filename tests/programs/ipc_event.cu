// CUDA IPC event handles through the runtime API, between two processes (forked before either
// touches CUDA, the handles passed over pipes). The parent's slow kernel fills memory shared by an
// IPC memory handle and an interprocess event is recorded after it; the child opens the event and
// makes its stream wait on it before copying the memory out, so it reads what the kernel wrote.
// Then the child's kernel refills the memory and the child records the opened event; the parent's
// stream waits on that record and reads the child's values. Both check the errors for misuse.
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "process_pipe.h"
#include "self_check.h"

namespace {

constexpr int kCount = 1 << 14;
constexpr int kSpin = 200000;  // keeps the kernel running long after its launch returned

// One block: thread 0 spins first, so a reader that did not wait for the kernel would see the
// memory before it was written.
__global__ void slowFill(int* data, int n, int base, int spin) {
  if (threadIdx.x == 0) {
    volatile int sink = 0;
    for (int i = 0; i < spin; ++i) sink = sink + i;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) data[i] = base + i;
}

// Copies the memory out on `stream` after what the stream waits for, and checks it holds base + i.
void expectHolds(const int* device, cudaStream_t stream, int base, const char* who) {
  std::vector<int> host(kCount, -1);
  CHECK_CUDA(
      cudaMemcpyAsync(host.data(), device, kCount * sizeof(int), cudaMemcpyDeviceToHost, stream));
  CHECK_CUDA(cudaStreamSynchronize(stream));
  for (int i = 0; i < kCount; ++i) {
    CHECK(host[i] == base + i, "%s: element %d reads %d, expected %d", who, i, host[i], base + i);
  }
}

struct Handles {
  cudaIpcMemHandle_t memory;
  cudaIpcEventHandle_t event;
};

int child(int fromParent, int toParent) {
  Handles handles;
  readAll(fromParent, &handles, sizeof(handles));
  int* data = nullptr;
  CHECK_CUDA(cudaIpcOpenMemHandle(reinterpret_cast<void**>(&data), handles.memory,
                                  cudaIpcMemLazyEnablePeerAccess));
  cudaEvent_t event = nullptr;
  cudaIpcEventHandle_t forged = handles.event;
  forged.reserved[12] ^= 0x5a;
  CHECK(cudaIpcOpenEventHandle(&event, forged) != cudaSuccess, "a forged event handle opened");
  cudaGetLastError();
  CHECK_CUDA(cudaIpcOpenEventHandle(&event, handles.event));

  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CHECK_CUDA(cudaStreamWaitEvent(stream, event, 0));
  expectHolds(data, stream, 1000, "the child after waiting on the parent's record");
  CHECK_CUDA(cudaEventSynchronize(event));
  CHECK_CUDA(cudaEventQuery(event));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, event, event) != cudaSuccess,
        "elapsed time of an event without timing");
  cudaGetLastError();

  // Now the child writes, and records the opened event after its kernel.
  slowFill<<<1, 256, 0, stream>>>(data, kCount, 2000, kSpin);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaEventRecord(event, stream));
  char recorded = 'r';
  writeAll(toParent, &recorded, 1);
  char done = 0;
  readAll(fromParent, &done, 1);  // the parent has read the child's values
  CHECK_CUDA(cudaStreamSynchronize(stream));
  CHECK_CUDA(cudaEventDestroy(event));
  CHECK_CUDA(cudaStreamDestroy(stream));
  CHECK_CUDA(cudaIpcCloseMemHandle(data));
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

  int supported = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&supported, cudaDevAttrIpcEventSupport, 0));
  CHECK(supported == 1, "the device does not report IPC event support");

  int* data = nullptr;
  CHECK_CUDA(cudaMalloc(&data, kCount * sizeof(int)));
  CHECK_CUDA(cudaMemset(data, 0, kCount * sizeof(int)));
  Handles handles;
  CHECK_CUDA(cudaIpcGetMemHandle(&handles.memory, data));

  cudaEvent_t timed = nullptr, plain = nullptr, event = nullptr;
  CHECK_CUDA(cudaEventCreate(&timed));
  CHECK(cudaIpcGetEventHandle(&handles.event, timed) != cudaSuccess,
        "an event with timing got an IPC handle");
  cudaGetLastError();
  CHECK_CUDA(cudaEventCreateWithFlags(&plain, cudaEventDisableTiming));
  CHECK(cudaIpcGetEventHandle(&handles.event, plain) != cudaSuccess,
        "an event without cudaEventInterprocess got an IPC handle");
  cudaGetLastError();
  CHECK_CUDA(cudaEventCreateWithFlags(&event, cudaEventInterprocess | cudaEventDisableTiming));

  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  slowFill<<<1, 256, 0, stream>>>(data, kCount, 1000, kSpin);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaEventRecord(event, stream));
  CHECK_CUDA(cudaIpcGetEventHandle(&handles.event, event));
  cudaIpcEventHandle_t again;
  CHECK_CUDA(cudaIpcGetEventHandle(&again, event));
  CHECK(std::memcmp(&again, &handles.event, sizeof(again)) == 0,
        "a second handle of one event differs");
  cudaEvent_t own = nullptr;
  CHECK(cudaIpcOpenEventHandle(&own, handles.event) != cudaSuccess,
        "the exporting process opened its own event handle");
  cudaGetLastError();
  writeAll(down[1], &handles, sizeof(handles));

  char recorded = 0;
  readAll(up[0], &recorded, 1);  // the child recorded the event after its own kernel
  cudaStream_t reader;
  CHECK_CUDA(cudaStreamCreateWithFlags(&reader, cudaStreamNonBlocking));
  CHECK_CUDA(cudaStreamWaitEvent(reader, event, 0));
  expectHolds(data, reader, 2000, "the parent after waiting on the child's record");
  char done = 'd';
  writeAll(down[1], &done, 1);

  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid, "waitpid failed");
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child failed (status %d)", status);
  CHECK_CUDA(cudaEventDestroy(event));
  CHECK_CUDA(cudaEventDestroy(plain));
  CHECK_CUDA(cudaEventDestroy(timed));
  CHECK_CUDA(cudaStreamDestroy(stream));
  CHECK_CUDA(cudaStreamDestroy(reader));
  CHECK_CUDA(cudaFree(data));
  std::printf("two processes ordered their streams through one IPC event, both ways\n");
  return pass();
}
