// libnvidia-ml.so.1's view of the pool: one status connection to the first server of
// GPU_POOL_ENDPOINT (token and TLS as libcuda's), the devices its Welcome describes as
// CUDA_VISIBLE_DEVICES selects them, and the live figures (status reply, memory as the tenant
// sees it), each cached for kLiveTtl so a monitoring loop asking many times a second costs the
// server at most one status and one memory request per device per second.
#pragma once

#include <nvml.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "protocol/device_sensor_figures.h"

// What an nvmlDevice_t points to: a slot of the library's device table, built once (so handles
// stay valid across nvmlShutdown/nvmlInit as NVIDIA's do). As NVIDIA's NVML lists them: whole
// GPUs and MIG-enabled GPUs at the top (slots 0..count-1, the NVML index), each MIG instance the
// pool serves under its GPU (reached by nvmlDeviceGetMigDeviceHandleByIndex), after them.
struct nvmlDevice_st {
  enum class Kind : unsigned char { gpu, migParent, migDevice };
  Kind kind;
  unsigned device;  // gpu, migDevice: the visible device; migParent: its entry in migParents()
  unsigned live;    // the visible device whose live status answers (a parent's first instance)
  unsigned parent;  // migDevice: its parent's slot
};

namespace gpupool::nvml {

constexpr std::chrono::milliseconds kLiveTtl{1000};

// One device this process sees, as the Welcome (and the first status reply) describe it.
struct VisibleDevice {
  unsigned serverIndex = 0;  // the server's device ordinal
  std::string name;
  unsigned char uuid[16] = {};
  std::string uuidText;    // "GPU-…" or "MIG-…", as `gpupool status` shows it
  std::string parentUuid;  // MIG: the parent GPU's UUID; empty otherwise
  std::string profile;     // MIG: the instance profile ("1g.10gb")
  // MIG, when the server's NVML described the parent: where the instance sits.
  std::string parentName;
  uint64_t parentMemoryTotal = 0;
  unsigned migIndex = 0, migMaxDevices = 0;
  int64_t gpuInstanceId = -1, computeInstanceId = -1;
  bool migModeChangePending = false;
  bool placed() const { return !parentUuid.empty() && !parentName.empty(); }
  // A MIG-enabled GPU made from its instances' placement: its instances' visible indices.
  std::vector<unsigned> instances;
  int pciDomain = 0, pciBus = 0, pciDevice = 0;
  uint64_t totalMemory = 0;
  std::vector<int32_t> attributes;  // by CUdevice_attribute value
  int attribute(int a) const {
    return a >= 0 && static_cast<size_t>(a) < attributes.size() ? attributes[a] : 0;
  }
};

// A session of this process on the server (what GetComputeRunningProcesses lists).
struct OwnSession {
  unsigned pid = 0;
  uint64_t memoryUsed = 0;              // all the session's device memory
  std::vector<unsigned> serverDevices;  // the server's ordinals it has contexts on
};

// What the server's NVML read of a device (the status reply's DeviceSensors): -1, or empty text,
// where it read nothing (always, on the emu). Clocks by nvmlClockType_t, ECC counts by
// [nvmlMemoryErrorType_t][nvmlEccCounterType_t].
using ServerSensors = protocol::SensorFigures;

// The live part of a status reply, per visible device.
struct LiveStatus {
  struct Device {
    uint64_t memoryUsed = 0;
    uint64_t memoryTotal = 0;
    double utilization = 0;            // busy fraction, 0..1
    bool utilizationMeasured = false;  // a pool measures it (--config); else it is unknown
    unsigned sessions = 0;
    ServerSensors sensors;
  };
  std::vector<Device> devices;
  std::vector<OwnSession> ownSessions;
};

struct MemoryView {
  uint64_t free = 0, total = 0;
};

// A device's accounting as the server keeps it (the nvmlAccounting reply): the asking tenant's
// driver sessions that had a context on it, running and ended.
struct AccountingView {
  struct Record {
    unsigned pid = 0;           // from the session's client name, "<program> (pid N)"
    uint64_t startUs = 0;       // server's clock, µs since the epoch
    uint64_t endUs = 0;         // 0: running
    double kernelSeconds = -1;  // negative: not measured
    uint64_t peakBytes = 0;
  };
  unsigned bufferSize = 0;
  std::vector<Record> records;  // sessions whose name carries no pid are left out
};

// nvmlInit*: the first call connects, later ones count (each nvmlShutdown undoes one).
nvmlReturn_t initLibrary();
nvmlReturn_t shutdownLibrary();

// NVML_ERROR_UNINITIALIZED before nvmlInit; otherwise NVML_SUCCESS.
nvmlReturn_t checkInitialized();
const std::vector<VisibleDevice>& visibleDevices();
// The device `handle` names (for a MIG-enabled GPU, the GPU its instances' placement describes),
// or null (and *result the error) when it names none.
const VisibleDevice* deviceOf(nvmlDevice_t handle, nvmlReturn_t* result);
// Top-level devices (NVML indices 0..count-1), and every handle (top level, then MIG devices).
unsigned topLevelCount();
nvmlDevice_t topLevelHandle(unsigned index);
std::vector<nvmlDevice_t> allHandles();
// The handle of visible device `visibleIndex` (its MIG device handle, for an instance).
nvmlDevice_t handleOfVisible(unsigned visibleIndex);
int cudaDriverVersion();
const std::string& serverVersion();
const std::string& backendKind();
// The server's NVIDIA driver version, from its NVML; empty when it has none (the emu).
const std::string& nvidiaDriverVersion();

// Cached for kLiveTtl; the error when the server cannot be asked.
nvmlReturn_t liveStatus(std::shared_ptr<const LiveStatus>* out);
nvmlReturn_t memoryView(unsigned visibleIndex, MemoryView* out);
// Cached for kLiveTtl, per device.
nvmlReturn_t accountingView(unsigned visibleIndex, std::shared_ptr<const AccountingView>* out);
// `device`'s part of the cached status (checks the handle first); `keep`, when given, gets the
// whole status it came from.
nvmlReturn_t liveDeviceStatus(nvmlDevice_t device, LiveStatus::Device* out,
                              std::shared_ptr<const LiveStatus>* keep = nullptr);

// Copies `text` into the caller's buffer of `length` bytes: NVML_ERROR_INSUFFICIENT_SIZE when it
// does not fit with its terminator, as NVIDIA's library answers.
nvmlReturn_t copyText(const std::string& text, char* buffer, unsigned length);

}  // namespace gpupool::nvml
