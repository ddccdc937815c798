// The server's view of NVML: what MIG enumeration (server/mig_enumeration.h) and the device sensors
// in status (server/device_sensors.h) ask of it. openNvml() binds a real library through dlopen, so
// gpupoold needs no NVML at build time and runs where there is none; tests replay recorded answers
// through the same interface.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace gpupool::server {

// NVML return codes told apart (nvml.h's nvmlReturn_t values).
constexpr int kNvmlSuccess = 0;
constexpr int kNvmlNotSupported = 3;
constexpr int kNvmlNotFound = 6;
constexpr unsigned kNvmlMigEnabled = 1;

// nvml.h's nvmlClockType_t, nvmlMemoryErrorType_t and nvmlEccCounterType_t values.
enum class NvmlClock : unsigned { graphics = 0, sm = 1, memory = 2, video = 3 };
enum class NvmlEccError : unsigned { corrected = 0, uncorrected = 1 };
enum class NvmlEccCounter : unsigned { volatileCount = 0, aggregate = 1 };

// Opaque NVML device handles.
using NvmlHandle = void*;

class NvmlQueries {
 public:
  virtual ~NvmlQueries() = default;
  virtual int deviceCount(unsigned* count) = 0;
  virtual int deviceHandle(unsigned index, NvmlHandle* device) = 0;
  virtual int uuid(NvmlHandle device, std::string* uuid) = 0;
  virtual int name(NvmlHandle device, std::string* name) = 0;
  virtual int memoryTotal(NvmlHandle device, uint64_t* bytes) = 0;
  virtual int migMode(NvmlHandle device, unsigned* current, unsigned* pending) = 0;
  virtual int maxMigDeviceCount(NvmlHandle device, unsigned* count) = 0;
  virtual int migDeviceHandle(NvmlHandle device, unsigned index, NvmlHandle* mig) = 0;
  virtual std::string errorString(int code) = 0;

  // Sensors and counters; a library (or a recording) without one answers NOT_SUPPORTED.
  virtual int driverVersion(std::string*) { return kNvmlNotSupported; }
  virtual int serial(NvmlHandle, std::string*) { return kNvmlNotSupported; }
  virtual int temperature(NvmlHandle, unsigned* /*celsius*/) { return kNvmlNotSupported; }
  virtual int powerUsage(NvmlHandle, unsigned* /*milliwatts*/) { return kNvmlNotSupported; }
  virtual int enforcedPowerLimit(NvmlHandle, unsigned* /*milliwatts*/) { return kNvmlNotSupported; }
  virtual int powerManagementLimit(NvmlHandle, unsigned* /*milliwatts*/) {
    return kNvmlNotSupported;
  }
  virtual int clock(NvmlHandle, NvmlClock, unsigned* /*mhz*/) { return kNvmlNotSupported; }
  virtual int performanceState(NvmlHandle, unsigned*) { return kNvmlNotSupported; }
  virtual int fanSpeed(NvmlHandle, unsigned* /*percent*/) { return kNvmlNotSupported; }
  virtual int utilization(NvmlHandle, unsigned* /*gpu*/, unsigned* /*memory*/) {
    return kNvmlNotSupported;
  }
  virtual int eccErrors(NvmlHandle, NvmlEccError, NvmlEccCounter, uint64_t*) {
    return kNvmlNotSupported;
  }
  virtual int bar1Memory(NvmlHandle, uint64_t* /*total*/, uint64_t* /*used*/) {
    return kNvmlNotSupported;
  }
  // A MIG device's GPU and compute instance ids.
  virtual int gpuInstanceId(NvmlHandle, unsigned*) { return kNvmlNotSupported; }
  virtual int computeInstanceId(NvmlHandle, unsigned*) { return kNvmlNotSupported; }
};

// Binds the NVML library `library` (a name the dynamic loader finds, or a path) and initializes
// it; null with the reason when it is not there or lacks what MIG enumeration needs.
std::unique_ptr<NvmlQueries> openNvml(const std::string& library, std::string* error);

}  // namespace gpupool::server
