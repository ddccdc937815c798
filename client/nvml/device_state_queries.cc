// A device's state: memory (as the tenant sees it), utilization, running processes (this
// process's own sessions), clocks, modes and performance state (MIG: mig_devices.cc). Live figures
// come from the session's cached status and memory answers (nvml_session.h).
#include <cuda.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "client/nvml/nvml_not_supported.h"
#include "client/nvml/nvml_session.h"

using namespace gpupool::nvml;

namespace {

// The caller's own sessions on `device` (NVML lists processes; the pool knows sessions, and this
// process's are the ones it can name). `memoryUsed` is the whole session's device memory.
template <typename Info>
nvmlReturn_t ownProcesses(nvmlDevice_t device, unsigned int* infoCount, Info* infos) {
  nvmlReturn_t r;
  const VisibleDevice* d = deviceOf(device, &r);
  if (!d) return r;
  if (!infoCount) return NVML_ERROR_INVALID_ARGUMENT;
  LiveStatus::Device unused;
  std::shared_ptr<const LiveStatus> live;
  if ((r = liveDeviceStatus(device, &unused, &live)) != NVML_SUCCESS) return r;
  // A MIG-enabled GPU lists the processes of all its instances, each with its instance's ids.
  std::vector<const VisibleDevice*> servedBy;
  if (device->kind == nvmlDevice_st::Kind::migParent) {
    for (unsigned i : d->instances) servedBy.push_back(&visibleDevices()[i]);
  } else {
    servedBy.push_back(d);
  }
  std::vector<std::pair<const OwnSession*, const VisibleDevice*>> found;
  for (const auto& s : live->ownSessions) {
    for (const VisibleDevice* on : servedBy) {
      if (std::find(s.serverDevices.begin(), s.serverDevices.end(), on->serverIndex) !=
          s.serverDevices.end()) {
        found.emplace_back(&s, on);
      }
    }
  }
  unsigned room = *infoCount;
  *infoCount = static_cast<unsigned>(found.size());
  if (room < found.size()) return NVML_ERROR_INSUFFICIENT_SIZE;
  if (!found.empty() && !infos) return NVML_ERROR_INVALID_ARGUMENT;
  for (size_t i = 0; i < found.size(); ++i) {
    std::memset(&infos[i], 0, sizeof infos[i]);
    const auto [session, on] = found[i];
    infos[i].pid = session->pid;
    infos[i].usedGpuMemory = session->memoryUsed;
    if constexpr (sizeof(Info) > sizeof(nvmlProcessInfo_v1_t)) {
      bool placed = on->placed() && on->gpuInstanceId >= 0 && on->computeInstanceId >= 0;
      infos[i].gpuInstanceId = placed ? static_cast<unsigned>(on->gpuInstanceId) : 0xFFFFFFFF;
      infos[i].computeInstanceId =
          placed ? static_cast<unsigned>(on->computeInstanceId) : 0xFFFFFFFF;
    }
  }
  return NVML_SUCCESS;
}

}  // namespace

extern "C" {

// Total and free as cuMemGetInfo shows them to this tenant (a quota caps both). A MIG-enabled
// GPU's aggregate is for privileged callers only, NVIDIA documents; a pool client is not one (its
// memory is what its instances show).
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device,
                                                                            nvmlMemory_t* memory) {
  nvmlReturn_t r;
  if (!deviceOf(device, &r)) return r;
  if (!memory) return NVML_ERROR_INVALID_ARGUMENT;
  if (device->kind == nvmlDevice_st::Kind::migParent) {
    return reportNoPermission(
        "nvmlDeviceGetMemoryInfo (of a MIG-enabled GPU: ask its MIG device handles)");
  }
  MemoryView view;
  if ((r = memoryView(device->device, &view)) != NVML_SUCCESS) return r;
  memory->total = view.total;
  memory->free = view.free;
  memory->used = view.total - std::min(view.free, view.total);
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(
    nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  if (!memory) return NVML_ERROR_INVALID_ARGUMENT;
  if (memory->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  nvmlMemory_t v1;
  nvmlReturn_t r = nvmlDeviceGetMemoryInfo(device, &v1);
  if (r != NVML_SUCCESS) return r;
  memory->total = v1.total;
  memory->free = v1.free;
  memory->used = v1.used;
  memory->reserved = 0;  // the pool reserves none of the memory it offers
  return NVML_SUCCESS;
}

// The server's NVML sampling where it has one (a real GPU: every process on it counts, as in
// nvidia-smi). Otherwise the pool's busy fraction of the device over its last metering interval,
// for both figures: the pool does not measure memory-bus activity apart from the work causing it.
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetUtilizationRates(
    nvmlDevice_t device, nvmlUtilization_t* utilization) {
  nvmlReturn_t r;
  if (!deviceOf(device, &r)) return r;
  if (!utilization) return NVML_ERROR_INVALID_ARGUMENT;
  if (device->kind == nvmlDevice_st::Kind::migParent) {  // as NVIDIA documents
    return reportNotSupported("nvmlDeviceGetUtilizationRates (of a MIG-enabled GPU)");
  }
  LiveStatus::Device live;
  if ((r = liveDeviceStatus(device, &live)) != NVML_SUCCESS) return r;
  if (live.sensors.gpuUtilization >= 0 && live.sensors.memoryUtilization >= 0) {
    utilization->gpu = static_cast<unsigned>(live.sensors.gpuUtilization);
    utilization->memory = static_cast<unsigned>(live.sensors.memoryUtilization);
    return NVML_SUCCESS;
  }
  if (!live.utilizationMeasured) {
    return reportNotSupported(
        "nvmlDeviceGetUtilizationRates (this server measures no kernel time: it runs without "
        "--config and without NVML)");
  }
  auto percent = static_cast<unsigned>(std::lround(std::clamp(live.utilization, 0.0, 1.0) * 100));
  utilization->gpu = percent;
  utilization->memory = percent;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(
    nvmlDevice_t device, unsigned int* infoCount, nvmlProcessInfo_t* infos) {
  return ownProcesses(device, infoCount, infos);
}
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(
    nvmlDevice_t device, unsigned int* infoCount, nvmlProcessInfo_v2_t* infos) {
  return ownProcesses(device, infoCount, infos);
}
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(
    nvmlDevice_t device, unsigned int* infoCount, nvmlProcessInfo_v1_t* infos) {
  return ownProcesses(device, infoCount, infos);
}

// The compute mode CU_DEVICE_ATTRIBUTE_COMPUTE_MODE reports (CUcomputemode and
// nvmlComputeMode_t share their values).
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetComputeMode(
    nvmlDevice_t device, nvmlComputeMode_t* mode) {
  nvmlReturn_t r;
  const VisibleDevice* d = deviceOf(device, &r);
  if (!d) return r;
  if (!mode) return NVML_ERROR_INVALID_ARGUMENT;
  *mode = static_cast<nvmlComputeMode_t>(d->attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_MODE));
  return NVML_SUCCESS;
}

// gpupoold keeps its devices initialized while it runs, which is what persistence mode does.
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetPersistenceMode(
    nvmlDevice_t device, nvmlEnableState_t* mode) {
  nvmlReturn_t r;
  if (!deviceOf(device, &r)) return r;
  if (!mode) return NVML_ERROR_INVALID_ARGUMENT;
  *mode = NVML_FEATURE_ENABLED;
  return NVML_SUCCESS;
}

// CU_DEVICE_ATTRIBUTE_ECC_ENABLED; a mode change is never pending (none can be requested).
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetEccMode(
    nvmlDevice_t device, nvmlEnableState_t* current, nvmlEnableState_t* pending) {
  nvmlReturn_t r;
  const VisibleDevice* d = deviceOf(device, &r);
  if (!d) return r;
  if (!current || !pending) return NVML_ERROR_INVALID_ARGUMENT;
  *current =
      d->attribute(CU_DEVICE_ATTRIBUTE_ECC_ENABLED) ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  *pending = *current;
  return NVML_SUCCESS;
}

// From the clock-rate attributes (kHz): the SM and graphics clocks share CLOCK_RATE, the memory
// clock is MEMORY_CLOCK_RATE; the video clock is not known.
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device,
                                                                              nvmlClockType_t type,
                                                                              unsigned int* clock) {
  nvmlReturn_t r;
  const VisibleDevice* d = deviceOf(device, &r);
  if (!d) return r;
  if (!clock) return NVML_ERROR_INVALID_ARGUMENT;
  int kHz = 0;
  switch (type) {
    case NVML_CLOCK_GRAPHICS:
    case NVML_CLOCK_SM:
      kHz = d->attribute(CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
      break;
    case NVML_CLOCK_MEM:
      kHz = d->attribute(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
      break;
    case NVML_CLOCK_VIDEO:
      return reportNotSupported("nvmlDeviceGetMaxClockInfo(NVML_CLOCK_VIDEO)");
    default:
      return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (kHz <= 0) return reportNotSupported("nvmlDeviceGetMaxClockInfo");
  *clock = static_cast<unsigned>(kHz / 1000);
  return NVML_SUCCESS;
}

// The emu device runs at its profile's clock, never throttled or boosted. A real GPU's current
// clock and performance state move with load and heat: they come from the server's NVML, and are
// refused rather than guessed where it read none.
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device,
                                                                           nvmlClockType_t type,
                                                                           unsigned int* clock) {
  if (backendKind() == "emu") return nvmlDeviceGetMaxClockInfo(device, type, clock);
  nvmlReturn_t r;
  if (!deviceOf(device, &r)) return r;
  if (!clock || type < NVML_CLOCK_GRAPHICS || type > NVML_CLOCK_VIDEO) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  LiveStatus::Device live;
  if ((r = liveDeviceStatus(device, &live)) != NVML_SUCCESS) return r;
  if (live.sensors.clockMhz[type] < 0) {
    return reportNotSupported("nvmlDeviceGetClockInfo (the server's NVML read no current clock)");
  }
  *clock = static_cast<unsigned>(live.sensors.clockMhz[type]);
  return NVML_SUCCESS;
}

// P0 (maximum performance) on the emu, which has no other state; a real GPU's from the server's
// NVML, as above.
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetPerformanceState(
    nvmlDevice_t device, nvmlPstates_t* pState) {
  nvmlReturn_t r;
  if (!deviceOf(device, &r)) return r;
  if (!pState) return NVML_ERROR_INVALID_ARGUMENT;
  if (backendKind() == "emu") {
    *pState = NVML_PSTATE_0;
    return NVML_SUCCESS;
  }
  LiveStatus::Device live;
  if ((r = liveDeviceStatus(device, &live)) != NVML_SUCCESS) return r;
  if (live.sensors.performanceState < 0) {
    return reportNotSupported("nvmlDeviceGetPerformanceState (the server's NVML read none)");
  }
  *pState = static_cast<nvmlPstates_t>(live.sensors.performanceState);
  return NVML_SUCCESS;
}

}  // extern "C"
