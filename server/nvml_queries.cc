#include "server/nvml_queries.h"

#include <dlfcn.h>

#include <type_traits>

namespace gpupool::server {
namespace {

// The real library, bound by name; the signatures are NVML's (nvml.h), written out so no NVML
// header is needed to build. What MIG enumeration needs must be there; a sensor entry point that
// is missing answers NOT_SUPPORTED.
class DlopenNvml final : public NvmlQueries {
 public:
  struct Memory {
    unsigned long long total, free, used;
  };
  struct Bar1Memory {
    unsigned long long total, free, used;
  };
  struct Utilization {
    unsigned gpu, memory;
  };

  DlopenNvml(void* library, std::string name) : library_(library), name_(std::move(name)) {}
  ~DlopenNvml() override {
    if (shutdown_) shutdown_();
    dlclose(library_);
  }

  bool bind(std::string* error) {
    bool ok = true;
    auto need = [&](auto& fn, const char* symbol) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(library_, symbol));
      if (!fn) {
        *error = name_ + " lacks " + symbol;
        ok = false;
      }
    };
    auto optional = [&](auto& fn, const char* symbol) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(library_, symbol));
    };
    need(init_, "nvmlInit_v2");
    need(shutdown_, "nvmlShutdown");
    need(count_, "nvmlDeviceGetCount_v2");
    need(handle_, "nvmlDeviceGetHandleByIndex_v2");
    need(uuid_, "nvmlDeviceGetUUID");
    need(name_fn_, "nvmlDeviceGetName");
    need(memory_, "nvmlDeviceGetMemoryInfo");
    need(migMode_, "nvmlDeviceGetMigMode");
    need(maxMig_, "nvmlDeviceGetMaxMigDeviceCount");
    need(migHandle_, "nvmlDeviceGetMigDeviceHandleByIndex");
    need(errorString_, "nvmlErrorString");
    optional(driverVersion_, "nvmlSystemGetDriverVersion");
    optional(serial_, "nvmlDeviceGetSerial");
    optional(temperature_, "nvmlDeviceGetTemperature");
    optional(powerUsage_, "nvmlDeviceGetPowerUsage");
    optional(powerLimit_, "nvmlDeviceGetEnforcedPowerLimit");
    optional(managementLimit_, "nvmlDeviceGetPowerManagementLimit");
    optional(clock_, "nvmlDeviceGetClockInfo");
    optional(pstate_, "nvmlDeviceGetPerformanceState");
    optional(fan_, "nvmlDeviceGetFanSpeed");
    optional(utilization_, "nvmlDeviceGetUtilizationRates");
    optional(ecc_, "nvmlDeviceGetTotalEccErrors");
    optional(bar1_, "nvmlDeviceGetBAR1MemoryInfo");
    optional(gpuInstanceId_, "nvmlDeviceGetGpuInstanceId");
    optional(computeInstanceId_, "nvmlDeviceGetComputeInstanceId");
    if (!ok) {
      shutdown_ = nullptr;
      return false;
    }
    if (int rc = init_(); rc != kNvmlSuccess) {
      *error = "nvmlInit: " + errorString(rc);
      shutdown_ = nullptr;
      return false;
    }
    return true;
  }

  int deviceCount(unsigned* count) override { return count_(count); }
  int deviceHandle(unsigned index, NvmlHandle* device) override { return handle_(index, device); }
  int uuid(NvmlHandle device, std::string* out) override { return text(uuid_, device, out); }
  int name(NvmlHandle device, std::string* out) override { return text(name_fn_, device, out); }
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
  std::string errorString(int code) override {
    const char* text = errorString_ ? errorString_(code) : nullptr;
    return text ? text : "NVML error " + std::to_string(code);
  }

  int driverVersion(std::string* out) override {
    if (!driverVersion_) return kNvmlNotSupported;
    char buffer[96] = {};
    int rc = driverVersion_(buffer, sizeof buffer);
    *out = buffer;
    return rc;
  }
  int gpuInstanceId(NvmlHandle device, unsigned* id) override {
    return gpuInstanceId_ ? gpuInstanceId_(device, id) : kNvmlNotSupported;
  }
  int computeInstanceId(NvmlHandle device, unsigned* id) override {
    return computeInstanceId_ ? computeInstanceId_(device, id) : kNvmlNotSupported;
  }
  int serial(NvmlHandle device, std::string* out) override {
    return serial_ ? text(serial_, device, out) : kNvmlNotSupported;
  }
  int temperature(NvmlHandle device, unsigned* celsius) override {
    return temperature_ ? temperature_(device, 0 /* NVML_TEMPERATURE_GPU */, celsius)
                        : kNvmlNotSupported;
  }
  int powerUsage(NvmlHandle device, unsigned* milliwatts) override {
    return powerUsage_ ? powerUsage_(device, milliwatts) : kNvmlNotSupported;
  }
  int enforcedPowerLimit(NvmlHandle device, unsigned* milliwatts) override {
    return powerLimit_ ? powerLimit_(device, milliwatts) : kNvmlNotSupported;
  }
  int powerManagementLimit(NvmlHandle device, unsigned* milliwatts) override {
    return managementLimit_ ? managementLimit_(device, milliwatts) : kNvmlNotSupported;
  }
  int clock(NvmlHandle device, NvmlClock type, unsigned* mhz) override {
    return clock_ ? clock_(device, static_cast<unsigned>(type), mhz) : kNvmlNotSupported;
  }
  int performanceState(NvmlHandle device, unsigned* state) override {
    if (!pstate_) return kNvmlNotSupported;
    int value = -1;
    int rc = pstate_(device, &value);
    *state = static_cast<unsigned>(value);
    return rc;
  }
  int fanSpeed(NvmlHandle device, unsigned* percent) override {
    return fan_ ? fan_(device, percent) : kNvmlNotSupported;
  }
  int utilization(NvmlHandle device, unsigned* gpu, unsigned* memory) override {
    if (!utilization_) return kNvmlNotSupported;
    Utilization u{};
    int rc = utilization_(device, &u);
    *gpu = u.gpu;
    *memory = u.memory;
    return rc;
  }
  int eccErrors(NvmlHandle device, NvmlEccError error, NvmlEccCounter counter,
                uint64_t* count) override {
    if (!ecc_) return kNvmlNotSupported;
    unsigned long long value = 0;
    int rc = ecc_(device, static_cast<unsigned>(error), static_cast<unsigned>(counter), &value);
    *count = value;
    return rc;
  }
  int bar1Memory(NvmlHandle device, uint64_t* total, uint64_t* used) override {
    if (!bar1_) return kNvmlNotSupported;
    Bar1Memory m{};
    int rc = bar1_(device, &m);
    *total = m.total;
    *used = m.used;
    return rc;
  }

 private:
  using TextFn = int (*)(NvmlHandle, char*, unsigned);
  static int text(TextFn fn, NvmlHandle device, std::string* out) {
    char buffer[128] = {};
    int rc = fn(device, buffer, sizeof buffer);
    *out = buffer;
    return rc;
  }

  void* library_;
  std::string name_;
  int (*init_)() = nullptr;
  int (*shutdown_)() = nullptr;
  int (*count_)(unsigned*) = nullptr;
  int (*handle_)(unsigned, NvmlHandle*) = nullptr;
  TextFn uuid_ = nullptr, name_fn_ = nullptr, serial_ = nullptr;
  int (*memory_)(NvmlHandle, Memory*) = nullptr;
  int (*migMode_)(NvmlHandle, unsigned*, unsigned*) = nullptr;
  int (*maxMig_)(NvmlHandle, unsigned*) = nullptr;
  int (*migHandle_)(NvmlHandle, unsigned, NvmlHandle*) = nullptr;
  const char* (*errorString_)(int) = nullptr;
  int (*driverVersion_)(char*, unsigned) = nullptr;
  int (*temperature_)(NvmlHandle, unsigned, unsigned*) = nullptr;
  int (*powerUsage_)(NvmlHandle, unsigned*) = nullptr;
  int (*powerLimit_)(NvmlHandle, unsigned*) = nullptr;
  int (*managementLimit_)(NvmlHandle, unsigned*) = nullptr;
  int (*clock_)(NvmlHandle, unsigned, unsigned*) = nullptr;
  int (*pstate_)(NvmlHandle, int*) = nullptr;
  int (*fan_)(NvmlHandle, unsigned*) = nullptr;
  int (*utilization_)(NvmlHandle, Utilization*) = nullptr;
  int (*ecc_)(NvmlHandle, unsigned, unsigned, unsigned long long*) = nullptr;
  int (*bar1_)(NvmlHandle, Bar1Memory*) = nullptr;
  int (*gpuInstanceId_)(NvmlHandle, unsigned*) = nullptr;
  int (*computeInstanceId_)(NvmlHandle, unsigned*) = nullptr;
};

}  // namespace

std::unique_ptr<NvmlQueries> openNvml(const std::string& library, std::string* error) {
  // RTLD_NODELETE: an NVML library may keep state past nvmlShutdown (ours keeps its endpoint and
  // device list), which unloading would turn into leaked memory.
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!handle) {
    *error = "cannot load " + library + ": " + dlerror();
    return nullptr;
  }
  auto nvml = std::make_unique<DlopenNvml>(handle, library);
  if (!nvml->bind(error)) return nullptr;
  return nvml;
}

}  // namespace gpupool::server
