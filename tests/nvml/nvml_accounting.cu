// NVML's per-process accounting of a CUDA program by the pool (client/nvml/accounting.cc).
//
// nvml_accounting [--measured]: holds 64 MiB, runs a kernel, frees the 64 MiB and holds 16, then
// asks NVML about itself on device 0: accounting is on, its pid is listed, its stats say it runs
// (time 0, as NVIDIA reports a live process), started within this run, and held at least 64 MiB at
// its peak; its kernel time is a utilization in 1..100 with --measured (a pool, which measures
// kernels), NVML_VALUE_NOT_AVAILABLE without. A pid with no session is NOT_FOUND; clients may
// neither switch accounting off nor clear it. Prints "pid N" and PASS.
//
// nvml_accounting --ended PID [--measured]: NVML only (no CUDA): the session of PID, which has
// ended, is still there, terminated, with its lifetime in ms and its peak. With --absent PID
// instead: PID is not listed (another tenant's). Exits 0 when every check held.
#define NVML_NO_UNVERSIONED_FUNC_DEFS 1
#include <cuda_runtime.h>
#include <nvml.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CHECK(cond)                                                             \
  do {                                                                          \
    if (!(cond)) {                                                              \
      std::fprintf(stderr, "nvml_accounting:%d: %s failed\n", __LINE__, #cond); \
      return 1;                                                                 \
    }                                                                           \
  } while (0)

namespace {

constexpr unsigned long long kPeak = 64ull << 20;
constexpr unsigned kNotAvailable = static_cast<unsigned>(NVML_VALUE_NOT_AVAILABLE);

__global__ void spin(float* out, int rounds) {
  float acc = threadIdx.x;
  for (int i = 0; i < rounds; ++i) acc = acc * 0.999f + 1.0f;
  out[threadIdx.x] = acc;
}

unsigned long long nowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool listed(nvmlDevice_t device, unsigned pid, bool* found) {
  unsigned count = 0;
  nvmlReturn_t r = nvmlDeviceGetAccountingPids(device, &count, nullptr);
  if (r != NVML_SUCCESS && r != NVML_ERROR_INSUFFICIENT_SIZE) return false;
  std::vector<unsigned> pids(count + 1);
  unsigned room = static_cast<unsigned>(pids.size());
  if (nvmlDeviceGetAccountingPids(device, &room, pids.data()) != NVML_SUCCESS) return false;
  *found = false;
  for (unsigned i = 0; i < room; ++i) *found = *found || pids[i] == pid;
  return true;
}

void print(const char* what, unsigned pid, const nvmlAccountingStats_t& s) {
  std::printf(
      "%s pid %u: gpuUtilization %u memoryUtilization %u maxMemoryUsage %llu time %llu ms "
      "startTime %llu isRunning %u\n",
      what, pid, s.gpuUtilization, s.memoryUtilization, s.maxMemoryUsage, s.time, s.startTime,
      s.isRunning);
}

}  // namespace

int main(int argc, char** argv) {
  bool measured = false;
  unsigned ended = 0, absent = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--measured") == 0) measured = true;
    if (std::strcmp(argv[i], "--ended") == 0 && i + 1 < argc) ended = std::atoi(argv[++i]);
    if (std::strcmp(argv[i], "--absent") == 0 && i + 1 < argc) absent = std::atoi(argv[++i]);
  }
  nvmlDevice_t device;
  if (ended || absent) {
    CHECK(nvmlInit_v2() == NVML_SUCCESS);
    CHECK(nvmlDeviceGetHandleByIndex_v2(0, &device) == NVML_SUCCESS);
    bool found = false;
    CHECK(listed(device, ended ? ended : absent, &found));
    nvmlAccountingStats_t stats{};
    if (absent) {
      CHECK(!found);
      CHECK(nvmlDeviceGetAccountingStats(device, absent, &stats) == NVML_ERROR_NOT_FOUND);
    } else {
      CHECK(found);
      CHECK(nvmlDeviceGetAccountingStats(device, ended, &stats) == NVML_SUCCESS);
      print("ended", ended, stats);
      CHECK(stats.isRunning == 0);
      CHECK(stats.time > 0);  // its lifetime on the device, in ms, now that it has ended
      CHECK(stats.startTime + stats.time * 1000 <= nowUs() + 5000000);
      CHECK(stats.maxMemoryUsage >= kPeak);
      CHECK(measured ? stats.gpuUtilization >= 1u && stats.gpuUtilization <= 100u
                     : stats.gpuUtilization == kNotAvailable);
    }
    CHECK(nvmlShutdown() == NVML_SUCCESS);
    std::printf("PASS\n");
    return 0;
  }

  unsigned long long began = nowUs();
  void* big = nullptr;
  CHECK(cudaMalloc(&big, kPeak) == cudaSuccess);
  float* out = static_cast<float*>(big);
  spin<<<1, 32>>>(out, 200000);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(cudaFree(big) == cudaSuccess);
  void* small = nullptr;
  CHECK(cudaMalloc(&small, 16ull << 20) == cudaSuccess);

  CHECK(nvmlInit_v2() == NVML_SUCCESS);
  CHECK(nvmlDeviceGetHandleByIndex_v2(0, &device) == NVML_SUCCESS);
  nvmlEnableState_t mode = NVML_FEATURE_DISABLED;
  CHECK(nvmlDeviceGetAccountingMode(device, &mode) == NVML_SUCCESS);
  CHECK(mode == NVML_FEATURE_ENABLED);
  unsigned bufferSize = 0;
  CHECK(nvmlDeviceGetAccountingBufferSize(device, &bufferSize) == NVML_SUCCESS);
  CHECK(bufferSize > 0);

  auto self = static_cast<unsigned>(getpid());
  unsigned count = 0;
  CHECK(nvmlDeviceGetAccountingPids(device, &count, nullptr) == NVML_ERROR_INSUFFICIENT_SIZE);
  CHECK(count >= 1);
  bool found = false;
  CHECK(listed(device, self, &found));
  CHECK(found);

  nvmlAccountingStats_t stats{};
  CHECK(nvmlDeviceGetAccountingStats(device, self, &stats) == NVML_SUCCESS);
  print("running", self, stats);
  CHECK(stats.isRunning == 1);
  CHECK(stats.time == 0);  // as NVIDIA reports a process that has not ended
  // The server's clock: here the same host's, so within this run (a second of slack each way).
  CHECK(stats.startTime + 1000000 >= began && stats.startTime <= nowUs() + 1000000);
  CHECK(stats.maxMemoryUsage >= kPeak);
  CHECK(stats.memoryUtilization == kNotAvailable);
  CHECK(measured ? stats.gpuUtilization >= 1u && stats.gpuUtilization <= 100u
                 : stats.gpuUtilization == kNotAvailable);
  nvmlAccountingStats_t none{};
  CHECK(nvmlDeviceGetAccountingStats(device, 0, &none) == NVML_ERROR_NOT_FOUND);
  CHECK(nvmlDeviceGetAccountingStats(device, self, nullptr) == NVML_ERROR_INVALID_ARGUMENT);
  CHECK(nvmlDeviceSetAccountingMode(device, NVML_FEATURE_DISABLED) == NVML_ERROR_NO_PERMISSION);
  CHECK(nvmlDeviceClearAccountingPids(device) == NVML_ERROR_NO_PERMISSION);

  CHECK(nvmlShutdown() == NVML_SUCCESS);
  CHECK(cudaFree(small) == cudaSuccess);
  std::printf("pid %u\nPASS\n", self);
  return 0;
}
