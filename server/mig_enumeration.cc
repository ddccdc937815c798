#include "server/mig_enumeration.h"

#include "server/device_uuid.h"

namespace gpupool::server {

std::string migProfileFromName(const std::string& name) {
  auto at = name.rfind(" MIG ");
  return at == std::string::npos ? std::string() : name.substr(at + 5);
}

std::vector<PoolDeviceCandidate> enumeratePoolDevices(NvmlQueries& nvml, std::string* error) {
  std::vector<PoolDeviceCandidate> out;
  auto failed = [&](int code, const std::string& what) {
    *error = what + ": " + nvml.errorString(code);
    return std::vector<PoolDeviceCandidate>{};
  };
  unsigned count = 0;
  if (int rc = nvml.deviceCount(&count); rc != kNvmlSuccess)
    return failed(rc, "nvmlDeviceGetCount");
  for (unsigned i = 0; i < count; ++i) {
    std::string where = "GPU " + std::to_string(i);
    NvmlHandle gpu = nullptr;
    if (int rc = nvml.deviceHandle(i, &gpu); rc != kNvmlSuccess)
      return failed(rc, where + ": handle");
    PoolDeviceCandidate whole;
    whole.gpuIndex = i;
    if (int rc = nvml.uuid(gpu, &whole.uuid); rc != kNvmlSuccess)
      return failed(rc, where + ": uuid");
    if (int rc = nvml.name(gpu, &whole.name); rc != kNvmlSuccess)
      return failed(rc, where + ": name");
    if (int rc = nvml.memoryTotal(gpu, &whole.memoryBytes); rc != kNvmlSuccess) {
      return failed(rc, where + ": memory");
    }
    unsigned current = 0, pending = 0;
    int rc = nvml.migMode(gpu, &current, &pending);
    if (rc == kNvmlNotSupported) {
      out.push_back(whole);  // a GPU without MIG at all
      continue;
    }
    if (rc != kNvmlSuccess) return failed(rc, where + ": MIG mode");
    whole.migPending = current != pending;
    if (current != kNvmlMigEnabled) {
      out.push_back(whole);
      continue;
    }
    unsigned slots = 0;
    if (rc = nvml.maxMigDeviceCount(gpu, &slots); rc != kNvmlSuccess) {
      return failed(rc, where + ": MIG device count");
    }
    for (unsigned s = 0; s < slots; ++s) {
      NvmlHandle mig = nullptr;
      rc = nvml.migDeviceHandle(gpu, s, &mig);
      if (rc == kNvmlNotFound) continue;  // an empty slot: no instance created there
      std::string slot = where + " MIG slot " + std::to_string(s);
      if (rc != kNvmlSuccess) return failed(rc, slot + ": handle");
      PoolDeviceCandidate instance;
      instance.gpuIndex = i;
      instance.parentUuid = whole.uuid;
      instance.migPending = whole.migPending;
      if (rc = nvml.uuid(mig, &instance.uuid); rc != kNvmlSuccess)
        return failed(rc, slot + ": uuid");
      if (rc = nvml.name(mig, &instance.name); rc != kNvmlSuccess)
        return failed(rc, slot + ": name");
      if (rc = nvml.memoryTotal(mig, &instance.memoryBytes); rc != kNvmlSuccess) {
        return failed(rc, slot + ": memory");
      }
      instance.profile = migProfileFromName(instance.name);
      instance.mig.parentName = whole.name;
      instance.mig.parentMemoryBytes = whole.memoryBytes;
      instance.mig.index = s;
      instance.mig.maxDevices = slots;
      instance.mig.modeChangePending = whole.migPending;
      unsigned id = 0;
      if (nvml.gpuInstanceId(mig, &id) == kNvmlSuccess) instance.mig.gpuInstanceId = id;
      if (nvml.computeInstanceId(mig, &id) == kNvmlSuccess) instance.mig.computeInstanceId = id;
      out.push_back(instance);
    }
  }
  return out;
}

const PoolDeviceCandidate* findPoolDevice(const std::vector<PoolDeviceCandidate>& candidates,
                                          const std::array<uint8_t, 16>& uuid) {
  for (const auto& c : candidates) {
    if (deviceUuidMatches(c.uuid, uuid)) return &c;
  }
  return nullptr;
}

}  // namespace gpupool::server
