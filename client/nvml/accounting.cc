// Per-process accounting (nvmlDeviceGetAccounting*): the pool keeps it for every driver session,
// always on, and answers the asking tenant's sessions on the device, running and ended
// (server/session_accounting.h). A process is its session's pid, from the client name libcuda
// sends in its Hello. As NVIDIA's driver does, MIG-enabled GPUs and their instances keep none.
#include <algorithm>
#include <cmath>
#include <set>

#include "client/nvml/nvml_not_supported.h"
#include "client/nvml/nvml_session.h"
#include "common/wall_clock.h"

using namespace gpupool::nvml;

namespace {

bool onMig(nvmlDevice_t device) { return device->kind != nvmlDevice_st::Kind::gpu; }

// The accounting of `device` (a handle deviceOf accepted); NOT_SUPPORTED on MIG (accounting is
// disabled there).
nvmlReturn_t accountingOf(nvmlDevice_t device, const char* name,
                          std::shared_ptr<const AccountingView>* view) {
  if (onMig(device)) return reportNotSupported(name);
  return accountingView(device->device, view);
}

// NVIDIA reports one process per pid ("in case of pid collision stats of only the latest
// process"): the running session, else the one that ended last.
const AccountingView::Record* latestOf(const AccountingView& view, unsigned pid) {
  const AccountingView::Record* best = nullptr;
  for (const auto& r : view.records) {
    if (r.pid != pid) continue;
    auto rank = [](const AccountingView::Record& x) { return x.endUs == 0 ? UINT64_MAX : x.endUs; };
    if (!best || rank(r) >= rank(*best)) best = &r;
  }
  return best;
}

}  // namespace

extern "C" {

// Enabled on every device the pool serves whole: the pool accounts for each session, and no
// client can turn that off. Disabled on MIG, as NVIDIA documents.
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetAccountingMode(
    nvmlDevice_t device, nvmlEnableState_t* mode) {
  nvmlReturn_t r;
  if (!deviceOf(device, &r)) return r;
  if (!mode) return NVML_ERROR_INVALID_ARGUMENT;
  *mode = onMig(device) ? NVML_FEATURE_DISABLED : NVML_FEATURE_ENABLED;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetAccountingBufferSize(
    nvmlDevice_t device, unsigned int* bufferSize) {
  nvmlReturn_t r;
  if (!deviceOf(device, &r)) return r;
  if (!bufferSize) return NVML_ERROR_INVALID_ARGUMENT;
  std::shared_ptr<const AccountingView> view;
  if ((r = accountingOf(device, "nvmlDeviceGetAccountingBufferSize (on MIG)", &view)) !=
      NVML_SUCCESS) {
    return r;
  }
  *bufferSize = view->bufferSize;
  return NVML_SUCCESS;
}

// The pids of the tenant's sessions on the device, each once, running and ended alike.
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetAccountingPids(
    nvmlDevice_t device, unsigned int* count, unsigned int* pids) {
  nvmlReturn_t r;
  if (!deviceOf(device, &r)) return r;
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  std::shared_ptr<const AccountingView> view;
  if ((r = accountingOf(device, "nvmlDeviceGetAccountingPids (on MIG)", &view)) != NVML_SUCCESS) {
    return r;
  }
  std::vector<unsigned> found;
  std::set<unsigned> seen;
  for (const auto& record : view->records) {
    if (seen.insert(record.pid).second) found.push_back(record.pid);
  }
  unsigned room = *count;
  *count = static_cast<unsigned>(found.size());
  if (room < found.size()) return NVML_ERROR_INSUFFICIENT_SIZE;
  if (!found.empty() && !pids) return NVML_ERROR_INVALID_ARGUMENT;
  std::copy(found.begin(), found.end(), pids);
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetAccountingStats(
    nvmlDevice_t device, unsigned int pid, nvmlAccountingStats_t* stats) {
  nvmlReturn_t r;
  if (!deviceOf(device, &r)) return r;
  if (!stats) return NVML_ERROR_INVALID_ARGUMENT;
  std::shared_ptr<const AccountingView> view;
  if ((r = accountingOf(device, "nvmlDeviceGetAccountingStats (on MIG)", &view)) != NVML_SUCCESS) {
    return r;
  }
  const AccountingView::Record* record = latestOf(*view, pid);
  if (!record) return NVML_ERROR_NOT_FOUND;
  *stats = nvmlAccountingStats_t{};
  bool running = record->endUs == 0;
  // The server's clock gave both ends; this host's may lag it (a running session's end is now).
  uint64_t endUs = std::max(running ? gpupool::wallClockMicros() : record->endUs, record->startUs);
  uint64_t lifetimeUs = endUs - record->startUs;
  double lifetime = static_cast<double>(lifetimeUs) * 1e-6;
  // Kernel time over the session's life on the device, where the pool measures it (a launch gate
  // runs: --config); unmeasured is "not available", as the header allows, never a made-up 0.
  if (record->kernelSeconds >= 0 && lifetime > 0) {
    stats->gpuUtilization = static_cast<unsigned>(
        std::lround(std::clamp(record->kernelSeconds / lifetime, 0.0, 1.0) * 100));
  } else if (record->kernelSeconds >= 0) {
    stats->gpuUtilization = 0;
  } else {
    stats->gpuUtilization = NVML_VALUE_NOT_AVAILABLE;
  }
  // Memory-bus activity is not measured apart from the kernels that cause it.
  stats->memoryUtilization = NVML_VALUE_NOT_AVAILABLE;
  stats->maxMemoryUsage = record->peakBytes;
  stats->time = running ? 0 : lifetimeUs / 1000;  // 0 while running
  stats->startTime = record->startUs;
  stats->isRunning = running ? 1 : 0;
  return NVML_SUCCESS;
}

// The pool's accounting is the operator's: a client may neither turn it off nor clear it, as an
// unprivileged caller of NVIDIA's NVML may not.
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceSetAccountingMode(
    nvmlDevice_t device, nvmlEnableState_t mode) {
  nvmlReturn_t r;
  if (!deviceOf(device, &r)) return r;
  if (mode != NVML_FEATURE_ENABLED && mode != NVML_FEATURE_DISABLED) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (onMig(device)) return reportNotSupported("nvmlDeviceSetAccountingMode (on MIG)");
  return reportNoPermission("nvmlDeviceSetAccountingMode (the pool's accounting is always on)");
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceClearAccountingPids(
    nvmlDevice_t device) {
  nvmlReturn_t r;
  if (!deviceOf(device, &r)) return r;
  if (onMig(device)) return reportNotSupported("nvmlDeviceClearAccountingPids (on MIG)");
  return reportNoPermission(
      "nvmlDeviceClearAccountingPids (the pool's records are the operator's)");
}

}  // extern "C"
