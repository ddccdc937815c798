// NVML event sets. A set is a real object, as NVIDIA's is, but no event type can be recorded on a
// pool device: XID, ECC, clock and power events are raised to the GPU server's own host, and the
// pool forwards none of them. So nvmlDeviceGetSupportedEventTypes answers an empty mask,
// nvmlDeviceRegisterEvents refuses any type with NOT_SUPPORTED (the set stays usable, as NVML
// documents), and a wait on a set ends at its timeout with NVML_ERROR_TIMEOUT, what NVIDIA's
// library answers when nothing arrives. nvidia-smi creates a set before printing anything.
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>

#include "client/client_log.h"
#include "client/nvml/nvml_session.h"

struct nvmlEventSet_st {
  std::mutex mutex;
  std::condition_variable freed;
  bool isFreed = false;
};

using namespace gpupool::nvml;

namespace {

// The live sets: a handle is checked against them, so a freed or made-up one is refused instead
// of being dereferenced; a wait holds its set while a free from another thread wakes it.
struct EventSets {
  std::mutex mutex;
  std::map<nvmlEventSet_t, std::shared_ptr<nvmlEventSet_st>> live;
};

EventSets& eventSets() {
  static EventSets* sets = new EventSets;  // outlives every caller, exit handlers included
  return *sets;
}

std::shared_ptr<nvmlEventSet_st> findSet(nvmlEventSet_t set) {
  EventSets& sets = eventSets();
  std::lock_guard lock(sets.mutex);
  auto it = sets.live.find(set);
  return it == sets.live.end() ? nullptr : it->second;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  if (nvmlReturn_t r = checkInitialized(); r != NVML_SUCCESS) return r;
  if (!set) return NVML_ERROR_INVALID_ARGUMENT;
  auto created = std::make_shared<nvmlEventSet_st>();
  EventSets& sets = eventSets();
  std::lock_guard lock(sets.mutex);
  sets.live.emplace(created.get(), created);
  *set = created.get();
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  if (nvmlReturn_t r = checkInitialized(); r != NVML_SUCCESS) return r;
  std::shared_ptr<nvmlEventSet_st> freed;
  {
    EventSets& sets = eventSets();
    std::lock_guard lock(sets.mutex);
    auto it = sets.live.find(set);
    if (it == sets.live.end()) return NVML_ERROR_INVALID_ARGUMENT;
    freed = std::move(it->second);
    sets.live.erase(it);
  }
  std::lock_guard lock(freed->mutex);
  freed->isFreed = true;
  freed->freed.notify_all();
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetSupportedEventTypes(
    nvmlDevice_t device, unsigned long long* eventTypes) {
  if (nvmlReturn_t r = checkInitialized(); r != NVML_SUCCESS) return r;
  nvmlReturn_t r;
  if (!deviceOf(device, &r)) return r;
  if (!eventTypes) return NVML_ERROR_INVALID_ARGUMENT;
  *eventTypes = 0;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceRegisterEvents(
    nvmlDevice_t device, unsigned long long eventTypes, nvmlEventSet_t set) {
  if (nvmlReturn_t r = checkInitialized(); r != NVML_SUCCESS) return r;
  nvmlReturn_t r;
  if (!deviceOf(device, &r)) return r;
  if (!findSet(set) || (eventTypes & ~static_cast<unsigned long long>(nvmlEventTypeAll)) != 0) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (eventTypes == 0) return NVML_SUCCESS;  // nothing asked, nothing registered
  if (gpupool::client::logLevel() >= 1) {
    gpupool::client::logLine(
        "nvmlDeviceRegisterEvents: a pool device raises no events to its clients (its GPU's XID, "
        "ECC, clock and power events stay on the server); returning NVML_ERROR_NOT_SUPPORTED");
  }
  return NVML_ERROR_NOT_SUPPORTED;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set,
                                                                        nvmlEventData_t* data,
                                                                        unsigned int timeoutms) {
  if (nvmlReturn_t r = checkInitialized(); r != NVML_SUCCESS) return r;
  if (!data) return NVML_ERROR_INVALID_ARGUMENT;
  std::shared_ptr<nvmlEventSet_st> waited = findSet(set);
  if (!waited) return NVML_ERROR_INVALID_ARGUMENT;
  // Nothing can be registered, so nothing arrives: the wait ends at its timeout, or earlier when
  // another thread frees the set (NVML's "interrupt arrived").
  std::unique_lock lock(waited->mutex);
  waited->freed.wait_for(lock, std::chrono::milliseconds(timeoutms),
                         [&] { return waited->isFreed; });
  return NVML_ERROR_TIMEOUT;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set,
                                                                     nvmlEventData_t* data,
                                                                     unsigned int timeoutms) {
  return nvmlEventSetWait_v2(set, data, timeoutms);
}

}  // extern "C"
