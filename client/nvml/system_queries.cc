// Library lifetime, error strings and the system-wide versions.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

#include "client/nvml/nvml_session.h"

using namespace gpupool::nvml;

extern "C" {

__attribute__((visibility("default"))) nvmlReturn_t nvmlInit_v2(void) { return initLibrary(); }
__attribute__((visibility("default"))) nvmlReturn_t nvmlInit(void) { return initLibrary(); }

// No flag changes what this library does: NVML_INIT_FLAG_NO_GPUS and NO_ATTACH only relax what
// NVIDIA's library needs of local GPUs, which we never touch.
__attribute__((visibility("default"))) nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
  constexpr unsigned kKnownFlags = NVML_INIT_FLAG_NO_GPUS | NVML_INIT_FLAG_NO_ATTACH;
  if (flags & ~kKnownFlags) return NVML_ERROR_INVALID_ARGUMENT;
  return initLibrary();
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlShutdown(void) { return shutdownLibrary(); }

__attribute__((visibility("default"))) const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case NVML_SUCCESS:
      return "Success";
    case NVML_ERROR_UNINITIALIZED:
      return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
      return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
      return "Not Supported";
    case NVML_ERROR_NO_PERMISSION:
      return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED:
      return "Already Initialized";
    case NVML_ERROR_NOT_FOUND:
      return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE:
      return "Insufficient Size";
    case NVML_ERROR_INSUFFICIENT_POWER:
      return "Insufficient External Power";
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT:
      return "Timeout";
    case NVML_ERROR_IRQ_ISSUE:
      return "Interrupt Request Issue";
    case NVML_ERROR_LIBRARY_NOT_FOUND:
      return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND:
      return "Function Not Found";
    case NVML_ERROR_CORRUPTED_INFOROM:
      return "Corrupted infoROM";
    case NVML_ERROR_GPU_IS_LOST:
      return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED:
      return "GPU requires restart";
    case NVML_ERROR_OPERATING_SYSTEM:
      return "GPU access blocked by the operating system";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
      return "Driver/library version mismatch";
    case NVML_ERROR_IN_USE:
      return "In use by another client";
    case NVML_ERROR_MEMORY:
      return "Insufficient Memory";
    case NVML_ERROR_NO_DATA:
      return "No data";
    case NVML_ERROR_VGPU_ECC_NOT_SUPPORTED:
      return "vGPU ECC is not supported";
    case NVML_ERROR_INSUFFICIENT_RESOURCES:
      return "Insufficient resources";
    case NVML_ERROR_FREQ_NOT_SUPPORTED:
      return "Frequency not supported";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
      return "Argument version mismatch";
    case NVML_ERROR_UNKNOWN:
      return "Unknown Error";
  }
  return "Unknown Error";
}

// The NVIDIA driver the server's GPUs run under, as its NVML reports it; on a server without one
// (the emu) the pool's driver is gpupoold, and its version names it.
static const std::string& poolDriverVersion() {
  return nvidiaDriverVersion().empty() ? serverVersion() : nvidiaDriverVersion();
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlSystemGetDriverVersion(
    char* version, unsigned int length) {
  if (nvmlReturn_t r = checkInitialized(); r != NVML_SUCCESS) return r;
  return copyText(poolDriverVersion(), version, length);
}

// "<NVML API version>.<driver version>", as NVIDIA's.
__attribute__((visibility("default"))) nvmlReturn_t nvmlSystemGetNVMLVersion(char* version,
                                                                             unsigned int length) {
  if (nvmlReturn_t r = checkInitialized(); r != NVML_SUCCESS) return r;
  return copyText(std::string(NVML_API_VERSION_STR) + "." + poolDriverVersion(), version, length);
}

// What cuDriverGetVersion answers on the same server (the Welcome's driverVersion).
__attribute__((visibility("default"))) nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* version) {
  if (!version) return NVML_ERROR_INVALID_ARGUMENT;
  if (nvmlReturn_t r = checkInitialized(); r != NVML_SUCCESS) return r;
  *version = cudaDriverVersion();
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(
    int* version) {
  return nvmlSystemGetCudaDriverVersion(version);
}

// The processes NVML names (GetComputeRunningProcesses) run on this host: their name is local.
__attribute__((visibility("default"))) nvmlReturn_t nvmlSystemGetProcessName(unsigned int pid,
                                                                             char* name,
                                                                             unsigned int length) {
  if (nvmlReturn_t r = checkInitialized(); r != NVML_SUCCESS) return r;
  if (!name || length == 0) return NVML_ERROR_INVALID_ARGUMENT;
  std::ifstream cmdline("/proc/" + std::to_string(pid) + "/cmdline");
  std::string program;
  if (!cmdline || !std::getline(cmdline, program, '\0') || program.empty()) {
    return NVML_ERROR_NOT_FOUND;
  }
  // Truncated to fit, as NVIDIA's library does.
  program.resize(std::min<size_t>(program.size(), length - 1));
  return copyText(program, name, length);
}

// S-class units (the Quadro Plex and Tesla S enclosures): a pool has none.
__attribute__((visibility("default"))) nvmlReturn_t nvmlUnitGetCount(unsigned int* unitCount) {
  if (!unitCount) return NVML_ERROR_INVALID_ARGUMENT;
  if (nvmlReturn_t r = checkInitialized(); r != NVML_SUCCESS) return r;
  *unitCount = 0;
  return NVML_SUCCESS;
}

}  // extern "C"
