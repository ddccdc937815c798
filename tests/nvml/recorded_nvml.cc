// A stand-in for a GPU server's NVML, loaded by gpupoold --nvml-library in the chained cuda-backend
// tests: one GPU (its UUID from GPU_POOL_RECORDED_NVML_UUID, the chained device's), MIG not
// supported, and fixed sensor answers in the ranges an H100 SXM reports (its fan speed refused, as
// a passively cooled board's is). Every call is counted in the file GPU_POOL_RECORDED_NVML_LOG
// names, one line per sensor reading, so tests see how often the server reads.
//
// With GPU_POOL_RECORDED_NVML_MIG_INDEX=N the GPU has MIG enabled instead: 7 MIG slots, of which
// slot N holds one instance, the chained device (UUID "MIG-" and the recorded digits), a 1g.10gb
// profile in GPU instance 13, compute instance 0; the GPU itself gets a UUID of its own.
#include <cstdio>
#include <cstdlib>
#include <cstring>

extern "C" {

namespace {

constexpr int kSuccess = 0, kInvalidArgument = 2, kNotSupported = 3, kNotFound = 6,
              kInsufficientSize = 7;
int gpuToken;  // the one device handle points here
int migToken;  // and the MIG instance's, in MIG mode

constexpr const char* kParentUuid = "GPU-5a1c7e2b-0d4f-4c3e-9a8b-1f2e3d4c5b6a";

bool isGpu(void* device) { return device == &gpuToken; }

// The MIG slot of the one instance, or -1 without MIG.
int migIndex() {
  const char* text = std::getenv("GPU_POOL_RECORDED_NVML_MIG_INDEX");
  return text && *text ? std::atoi(text) : -1;
}

int copy(const char* text, char* buffer, unsigned length) {
  if (!buffer) return kInvalidArgument;
  if (std::strlen(text) + 1 > length) return kInsufficientSize;
  std::strcpy(buffer, text);
  return kSuccess;
}

void logReading(const char* what) {
  if (const char* path = std::getenv("GPU_POOL_RECORDED_NVML_LOG")) {
    if (FILE* f = std::fopen(path, "a")) {
      std::fprintf(f, "%s\n", what);
      std::fclose(f);
    }
  }
}

}  // namespace

__attribute__((visibility("default"))) int nvmlInit_v2() { return kSuccess; }
__attribute__((visibility("default"))) int nvmlShutdown() { return kSuccess; }
__attribute__((visibility("default"))) const char* nvmlErrorString(int code) {
  return code == kNotSupported ? "Not Supported" : "Unknown Error";
}
__attribute__((visibility("default"))) int nvmlSystemGetDriverVersion(char* version,
                                                                      unsigned length) {
  return copy("535.183.01", version, length);
}
__attribute__((visibility("default"))) int nvmlDeviceGetCount_v2(unsigned* count) {
  *count = 1;
  return kSuccess;
}
__attribute__((visibility("default"))) int nvmlDeviceGetHandleByIndex_v2(unsigned index,
                                                                         void** device) {
  if (index != 0) return kInvalidArgument;
  *device = &gpuToken;
  return kSuccess;
}
__attribute__((visibility("default"))) int nvmlDeviceGetUUID(void* device, char* uuid,
                                                             unsigned length) {
  const char* recorded = std::getenv("GPU_POOL_RECORDED_NVML_UUID");
  if (!recorded) return kInvalidArgument;
  if (migIndex() >= 0 && isGpu(device)) return copy(kParentUuid, uuid, length);
  if (migIndex() >= 0 && device == &migToken) {
    char mig[96];
    std::snprintf(mig, sizeof mig, "MIG-%s", recorded + 4);  // the recorded "GPU-" digits
    return copy(mig, uuid, length);
  }
  return isGpu(device) ? copy(recorded, uuid, length) : kInvalidArgument;
}
__attribute__((visibility("default"))) int nvmlDeviceGetName(void* device, char* name,
                                                             unsigned length) {
  if (device == &migToken) return copy("NVIDIA H100 80GB HBM3 MIG 1g.10gb", name, length);
  return isGpu(device) ? copy("NVIDIA H100 80GB HBM3", name, length) : kInvalidArgument;
}
__attribute__((visibility("default"))) int nvmlDeviceGetMemoryInfo(void* device,
                                                                   unsigned long long* m) {
  if (device == &migToken) {
    m[0] = 10200547328ull;  // total, free, used
    m[1] = 10166992896ull;
    m[2] = 33554432ull;
    return kSuccess;
  }
  if (!isGpu(device)) return kInvalidArgument;
  m[0] = 85520809984ull;  // total, free, used
  m[1] = 85010612224ull;
  m[2] = 510197760ull;
  return kSuccess;
}
__attribute__((visibility("default"))) int nvmlDeviceGetMigMode(void* device, unsigned* current,
                                                                unsigned* pending) {
  if (migIndex() < 0 || !isGpu(device)) return kNotSupported;
  *current = *pending = 1;  // enabled
  return kSuccess;
}
__attribute__((visibility("default"))) int nvmlDeviceGetMaxMigDeviceCount(void* device,
                                                                          unsigned* count) {
  if (migIndex() < 0 || !isGpu(device)) return kNotSupported;
  *count = 7;
  return kSuccess;
}
__attribute__((visibility("default"))) int nvmlDeviceGetMigDeviceHandleByIndex(void* device,
                                                                               unsigned index,
                                                                               void** mig) {
  if (migIndex() < 0 || !isGpu(device)) return kNotSupported;
  if (index >= 7) return kInvalidArgument;
  if (static_cast<int>(index) != migIndex()) return kNotFound;
  *mig = &migToken;
  return kSuccess;
}
__attribute__((visibility("default"))) int nvmlDeviceGetGpuInstanceId(void* device, unsigned* id) {
  if (device != &migToken) return kNotSupported;
  *id = 13;
  return kSuccess;
}
__attribute__((visibility("default"))) int nvmlDeviceGetComputeInstanceId(void* device,
                                                                          unsigned* id) {
  if (device != &migToken) return kNotSupported;
  *id = 0;
  return kSuccess;
}
__attribute__((visibility("default"))) int nvmlDeviceGetSerial(void* device, char* serial,
                                                               unsigned length) {
  return isGpu(device) ? copy("1654922006536", serial, length) : kInvalidArgument;
}
__attribute__((visibility("default"))) int nvmlDeviceGetTemperature(void* device, unsigned sensor,
                                                                    unsigned* celsius) {
  if (!isGpu(device) || sensor != 0) return kInvalidArgument;
  logReading("temperature");
  *celsius = 34;
  return kSuccess;
}
__attribute__((visibility("default"))) int nvmlDeviceGetPowerUsage(void* device, unsigned* mw) {
  if (!isGpu(device)) return kInvalidArgument;
  *mw = 71502;
  return kSuccess;
}
__attribute__((visibility("default"))) int nvmlDeviceGetEnforcedPowerLimit(void* device,
                                                                           unsigned* mw) {
  if (!isGpu(device)) return kInvalidArgument;
  *mw = 700000;
  return kSuccess;
}
__attribute__((visibility("default"))) int nvmlDeviceGetPowerManagementLimit(void* device,
                                                                             unsigned* mw) {
  if (!isGpu(device)) return kInvalidArgument;
  *mw = 700000;
  return kSuccess;
}
__attribute__((visibility("default"))) int nvmlDeviceGetClockInfo(void* device, unsigned type,
                                                                  unsigned* mhz) {
  static const unsigned clocks[] = {345, 345, 2619, 765};  // graphics, SM, memory, video
  if (!isGpu(device) || type > 3) return kInvalidArgument;
  *mhz = clocks[type];
  return kSuccess;
}
__attribute__((visibility("default"))) int nvmlDeviceGetPerformanceState(void* device, int* state) {
  if (!isGpu(device)) return kInvalidArgument;
  *state = 0;
  return kSuccess;
}
__attribute__((visibility("default"))) int nvmlDeviceGetFanSpeed(void*, unsigned*) {
  return kNotSupported;
}
__attribute__((visibility("default"))) int nvmlDeviceGetUtilizationRates(void* device,
                                                                         unsigned* rates) {
  if (!isGpu(device)) return kInvalidArgument;
  if (migIndex() >= 0) return kNotSupported;  // as on any MIG-enabled GPU
  rates[0] = 17;                              // gpu, memory
  rates[1] = 6;
  return kSuccess;
}
__attribute__((visibility("default"))) int nvmlDeviceGetTotalEccErrors(void* device,
                                                                       unsigned errorType,
                                                                       unsigned counterType,
                                                                       unsigned long long* count) {
  if (!isGpu(device) || errorType > 1 || counterType > 1) return kInvalidArgument;
  *count = errorType == 0 && counterType == 1 ? 2 : 0;  // two corrected errors over its life
  return kSuccess;
}
__attribute__((visibility("default"))) int nvmlDeviceGetBAR1MemoryInfo(void* device,
                                                                       unsigned long long* m) {
  if (!isGpu(device)) return kInvalidArgument;
  m[0] = 137438953472ull;  // total, free, used
  m[1] = 137436856320ull;
  m[2] = 2097152ull;
  return kSuccess;
}

}  // extern "C"
