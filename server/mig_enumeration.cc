#include "server/mig_enumeration.h"

#include <dlfcn.h>

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

namespace {

// The real library, bound by name; the signatures are NVML's (nvml.h), written out so no NVML
// header is needed to build.
class DlopenNvml final : public NvmlQueries {
 public:
  struct Memory {
    unsigned long long total, free, used;
  };

  explicit DlopenNvml(void* library) : library_(library) {}
  ~DlopenNvml() override {
    if (shutdown_) shutdown_();
    dlclose(library_);
  }

  bool bind(std::string* error) {
    bool ok = true;
    auto get = [&](auto& fn, const char* symbol) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(library_, symbol));
      if (!fn) {
        *error = std::string("libnvidia-ml.so.1 lacks ") + symbol;
        ok = false;
      }
    };
    get(init_, "nvmlInit_v2");
    get(shutdown_, "nvmlShutdown");
    get(count_, "nvmlDeviceGetCount_v2");
    get(handle_, "nvmlDeviceGetHandleByIndex_v2");
    get(uuid_, "nvmlDeviceGetUUID");
    get(name_, "nvmlDeviceGetName");
    get(memory_, "nvmlDeviceGetMemoryInfo");
    get(migMode_, "nvmlDeviceGetMigMode");
    get(maxMig_, "nvmlDeviceGetMaxMigDeviceCount");
    get(migHandle_, "nvmlDeviceGetMigDeviceHandleByIndex");
    get(errorString_, "nvmlErrorString");
    if (!ok) return false;
    if (int rc = init_(); rc != kNvmlSuccess) {
      *error = std::string("nvmlInit: ") + errorString_(rc);
      shutdown_ = nullptr;
      return false;
    }
    return true;
  }

  int deviceCount(unsigned* count) override { return count_(count); }
  int deviceHandle(unsigned index, NvmlHandle* device) override { return handle_(index, device); }
  int uuid(NvmlHandle device, std::string* out) override { return text(uuid_, device, out); }
  int name(NvmlHandle device, std::string* out) override { return text(name_, device, out); }
  int memoryTotal(NvmlHandle device, uint64_t* bytes) override {
    Memory m{};
    int rc = memory_(device, &m);
    *bytes = m.total;
    return rc;
  }
  int migMode(NvmlHandle device, unsigned* current, unsigned* pending) override {
    return migMode_(device, current, pending);
  }
  int maxMigDeviceCount(NvmlHandle device, unsigned* count) override {
    return maxMig_(device, count);
  }
  int migDeviceHandle(NvmlHandle device, unsigned index, NvmlHandle* mig) override {
    return migHandle_(device, index, mig);
  }
  std::string errorString(int code) override { return errorString_(code); }

 private:
  using TextFn = int (*)(NvmlHandle, char*, unsigned);
  static int text(TextFn fn, NvmlHandle device, std::string* out) {
    char buffer[128] = {};
    int rc = fn(device, buffer, sizeof buffer);
    *out = buffer;
    return rc;
  }

  void* library_;
  int (*init_)() = nullptr;
  int (*shutdown_)() = nullptr;
  int (*count_)(unsigned*) = nullptr;
  int (*handle_)(unsigned, NvmlHandle*) = nullptr;
  TextFn uuid_ = nullptr, name_ = nullptr;
  int (*memory_)(NvmlHandle, Memory*) = nullptr;
  int (*migMode_)(NvmlHandle, unsigned*, unsigned*) = nullptr;
  int (*maxMig_)(NvmlHandle, unsigned*) = nullptr;
  int (*migHandle_)(NvmlHandle, unsigned, NvmlHandle*) = nullptr;
  const char* (*errorString_)(int) = nullptr;
};

}  // namespace

std::unique_ptr<NvmlQueries> openNvml(std::string* error) {
  void* library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    *error = std::string("cannot load libnvidia-ml.so.1: ") + dlerror();
    return nullptr;
  }
  auto nvml = std::make_unique<DlopenNvml>(library);
  if (!nvml->bind(error)) return nullptr;
  return nvml;
}

}  // namespace gpupool::server
