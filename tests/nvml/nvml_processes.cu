// A CUDA program that asks NVML about itself: with 64 MiB allocated through cudart (our
// libcuda.so.1), libnvidia-ml.so.1 lists this process on device 0 with at least that much memory,
// and the device's used memory counts it. Prints PASS and exits 0 when every check held.
// With --nvml-first, NVML is initialized (and asked) before the first CUDA call, so it starts on a
// connection of its own and must move onto libcuda's session once that exists.
// Built as programs that need the older ABIs are: every version under its own name.
#define NVML_NO_UNVERSIONED_FUNC_DEFS 1
#include <cuda_runtime.h>
#include <nvml.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      std::fprintf(stderr, "nvml_processes:%d: %s failed\n", __LINE__, #cond); \
      return 1;                                                                \
    }                                                                          \
  } while (0)

int main(int argc, char** argv) {
  constexpr unsigned long long kHeld = 64ull << 20;
  bool nvmlFirst = argc > 1 && std::strcmp(argv[1], "--nvml-first") == 0;
  nvmlDevice_t device;
  if (nvmlFirst) {
    CHECK(nvmlInit_v2() == NVML_SUCCESS);
    CHECK(nvmlDeviceGetHandleByIndex_v2(0, &device) == NVML_SUCCESS);
    nvmlMemory_t before;
    CHECK(nvmlDeviceGetMemoryInfo(device, &before) == NVML_SUCCESS);
  }
  void* held = nullptr;
  CHECK(cudaMalloc(&held, kHeld) == cudaSuccess);
  if (!nvmlFirst) CHECK(nvmlInit_v2() == NVML_SUCCESS);
  CHECK(nvmlDeviceGetHandleByIndex_v2(0, &device) == NVML_SUCCESS);
  if (nvmlFirst) usleep(1100 * 1000);  // past the status cache's second: the next answer is fresh

  unsigned count = 0;
  CHECK(nvmlDeviceGetComputeRunningProcesses_v3(device, &count, nullptr) ==
        NVML_ERROR_INSUFFICIENT_SIZE);
  CHECK(count == 1);
  nvmlProcessInfo_t info[4];
  count = 4;
  CHECK(nvmlDeviceGetComputeRunningProcesses_v3(device, &count, info) == NVML_SUCCESS);
  CHECK(count == 1);
  CHECK(info[0].pid == static_cast<unsigned>(getpid()));
  CHECK(info[0].usedGpuMemory >= kHeld);
  nvmlProcessInfo_v2_t older[1];
  count = 1;
  CHECK(nvmlDeviceGetComputeRunningProcesses_v2(device, &count, older) == NVML_SUCCESS);
  CHECK(count == 1 && older[0].usedGpuMemory == info[0].usedGpuMemory);
  CHECK(older[0].gpuInstanceId == 0xFFFFFFFFu);
  nvmlProcessInfo_v1_t oldest[1];
  count = 1;
  CHECK(nvmlDeviceGetComputeRunningProcesses(device, &count, oldest) == NVML_SUCCESS);
  CHECK(count == 1 && oldest[0].pid == info[0].pid);

  nvmlMemory_t memory;
  CHECK(nvmlDeviceGetMemoryInfo(device, &memory) == NVML_SUCCESS);
  CHECK(memory.used >= kHeld);
  size_t freeBytes = 0, totalBytes = 0;
  CHECK(cudaMemGetInfo(&freeBytes, &totalBytes) == cudaSuccess);
  CHECK(memory.total == totalBytes);

  CHECK(nvmlShutdown() == NVML_SUCCESS);
  CHECK(cudaFree(held) == cudaSuccess);
  std::printf("PASS\n");
  return 0;
}
