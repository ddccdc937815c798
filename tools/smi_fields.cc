#include "tools/smi_fields.h"

#include <cstdio>

#include "tools/printf_text.h"

namespace gpupool::tools {
namespace {

SmiValue failed(nvmlReturn_t result) { return SmiValue{result, {}, {}}; }
SmiValue plain(std::string text) { return SmiValue{NVML_SUCCESS, text, text}; }
SmiValue measured(std::string number, const char* unit) {
  return SmiValue{NVML_SUCCESS, number, number + " " + unit};
}
SmiValue enabled(nvmlReturn_t result, bool on) {
  return result == NVML_SUCCESS ? plain(on ? "Enabled" : "Disabled") : failed(result);
}

template <typename Text>
SmiValue text(const NvmlLibrary&, nvmlDevice_t device, Text get) {
  char value[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
  nvmlReturn_t result = get(device, value, sizeof value);
  return result == NVML_SUCCESS ? plain(value) : failed(result);
}

SmiValue memory(const NvmlLibrary& nvml, nvmlDevice_t device,
                unsigned long long nvmlMemory_t::*part) {
  nvmlMemory_t info{};
  nvmlReturn_t result = nvml.nvmlDeviceGetMemoryInfo(device, &info);
  if (result != NVML_SUCCESS) return failed(result);
  return measured(printfText("%llu", info.*part / (1024 * 1024)), "MiB");
}

SmiValue utilization(const NvmlLibrary& nvml, nvmlDevice_t device,
                     unsigned int nvmlUtilization_t::*part) {
  nvmlUtilization_t rates{};
  nvmlReturn_t result = nvml.nvmlDeviceGetUtilizationRates(device, &rates);
  if (result != NVML_SUCCESS) return failed(result);
  return measured(printfText("%u", rates.*part), "%");
}

SmiValue clock(const NvmlLibrary& nvml, nvmlDevice_t device, nvmlClockType_t type, bool maximum) {
  unsigned int mhz = 0;
  nvmlReturn_t result = maximum ? nvml.nvmlDeviceGetMaxClockInfo(device, type, &mhz)
                                : nvml.nvmlDeviceGetClockInfo(device, type, &mhz);
  return result == NVML_SUCCESS ? measured(printfText("%u", mhz), "MHz") : failed(result);
}

SmiValue watts(nvmlReturn_t result, unsigned int milliwatts) {
  return result == NVML_SUCCESS ? measured(printfText("%.2f", milliwatts / 1000.0), "W")
                                : failed(result);
}

SmiValue pciBusId(const NvmlLibrary& nvml, nvmlDevice_t device) {
  nvmlPciInfo_t pci{};
  nvmlReturn_t result = nvml.nvmlDeviceGetPciInfo_v3(device, &pci);
  return result == NVML_SUCCESS ? plain(pci.busId) : failed(result);
}

const char* computeModeName(nvmlComputeMode_t mode) {
  switch (mode) {
    case NVML_COMPUTEMODE_DEFAULT:
      return "Default";
    case NVML_COMPUTEMODE_EXCLUSIVE_THREAD:
      return "Exclusive_Thread";
    case NVML_COMPUTEMODE_PROHIBITED:
      return "Prohibited";
    case NVML_COMPUTEMODE_EXCLUSIVE_PROCESS:
      return "Exclusive_Process";
    default:
      return "Unknown";
  }
}

const std::vector<SmiField> kFields = {
    {"index", nullptr, "", "the device's index among those this client sees",
     [](const NvmlLibrary& nvml, nvmlDevice_t device) {
       unsigned int index = 0;
       nvmlReturn_t result = nvml.nvmlDeviceGetIndex(device, &index);
       return result == NVML_SUCCESS ? plain(printfText("%u", index)) : failed(result);
     }},
    {"count", nullptr, "", "how many devices this client sees",
     [](const NvmlLibrary& nvml, nvmlDevice_t) {
       unsigned int count = 0;
       nvmlReturn_t result = nvml.nvmlDeviceGetCount_v2(&count);
       return result == NVML_SUCCESS ? plain(printfText("%u", count)) : failed(result);
     }},
    {"name", "gpu_name", "", "the device's product name",
     [](const NvmlLibrary& nvml, nvmlDevice_t device) {
       return text(nvml, device, [&](nvmlDevice_t d, char* value, unsigned int length) {
         return nvml.nvmlDeviceGetName(d, value, length);
       });
     }},
    {"uuid", "gpu_uuid", "", "the device's UUID (GPU-... or MIG-...)",
     [](const NvmlLibrary& nvml, nvmlDevice_t device) {
       return text(nvml, device, [&](nvmlDevice_t d, char* value, unsigned int length) {
         return nvml.nvmlDeviceGetUUID(d, value, length);
       });
     }},
    {"serial", "gpu_serial", "", "the board's serial number",
     [](const NvmlLibrary& nvml, nvmlDevice_t device) {
       return text(nvml, device, [&](nvmlDevice_t d, char* value, unsigned int length) {
         return nvml.nvmlDeviceGetSerial(d, value, length);
       });
     }},
    {"pci.bus_id", "gpu_bus_id", "", "PCI bus id, domain:bus:device.function, on the server",
     pciBusId},
    {"driver_version", nullptr, "", "the server's driver version",
     [](const NvmlLibrary& nvml, nvmlDevice_t) {
       char version[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
       nvmlReturn_t result = nvml.nvmlSystemGetDriverVersion(version, sizeof version);
       return result == NVML_SUCCESS ? plain(version) : failed(result);
     }},
    {"compute_cap", nullptr, "", "CUDA compute capability, major.minor",
     [](const NvmlLibrary& nvml, nvmlDevice_t device) {
       int major = 0, minor = 0;
       nvmlReturn_t result = nvml.nvmlDeviceGetCudaComputeCapability(device, &major, &minor);
       return result == NVML_SUCCESS ? plain(printfText("%d.%d", major, minor)) : failed(result);
     }},
    {"memory.total", nullptr, "MiB", "memory this client may use on the device (its quota)",
     [](const NvmlLibrary& nvml, nvmlDevice_t device) {
       return memory(nvml, device, &nvmlMemory_t::total);
     }},
    {"memory.used", nullptr, "MiB", "memory in use on the device",
     [](const NvmlLibrary& nvml, nvmlDevice_t device) {
       return memory(nvml, device, &nvmlMemory_t::used);
     }},
    {"memory.free", nullptr, "MiB", "memory.total - memory.used",
     [](const NvmlLibrary& nvml, nvmlDevice_t device) {
       return memory(nvml, device, &nvmlMemory_t::free);
     }},
    {"utilization.gpu", nullptr, "%", "percent of time a kernel ran, over the last sample period",
     [](const NvmlLibrary& nvml, nvmlDevice_t device) {
       return utilization(nvml, device, &nvmlUtilization_t::gpu);
     }},
    {"utilization.memory", nullptr, "%", "percent of time memory was read or written",
     [](const NvmlLibrary& nvml, nvmlDevice_t device) {
       return utilization(nvml, device, &nvmlUtilization_t::memory);
     }},
    {"temperature.gpu", nullptr, "", "core temperature, degrees C",
     [](const NvmlLibrary& nvml, nvmlDevice_t device) {
       unsigned int celsius = 0;
       nvmlReturn_t result = nvml.nvmlDeviceGetTemperature(device, NVML_TEMPERATURE_GPU, &celsius);
       return result == NVML_SUCCESS ? plain(printfText("%u", celsius)) : failed(result);
     }},
    {"power.draw", nullptr, "W", "power drawn by the board",
     [](const NvmlLibrary& nvml, nvmlDevice_t device) {
       unsigned int milliwatts = 0;
       nvmlReturn_t result =
           nvml.nvmlDeviceGetPowerUsage(device, &milliwatts);  // before reading it
       return watts(result, milliwatts);
     }},
    {"power.limit", nullptr, "W", "the board's power management limit",
     [](const NvmlLibrary& nvml, nvmlDevice_t device) {
       unsigned int milliwatts = 0;
       nvmlReturn_t result =
           nvml.nvmlDeviceGetPowerManagementLimit(device, &milliwatts);  // before reading it
       return watts(result, milliwatts);
     }},
    {"fan.speed", nullptr, "%", "intended fan speed",
     [](const NvmlLibrary& nvml, nvmlDevice_t device) {
       unsigned int percent = 0;
       nvmlReturn_t result = nvml.nvmlDeviceGetFanSpeed(device, &percent);
       return result == NVML_SUCCESS ? measured(printfText("%u", percent), "%") : failed(result);
     }},
    {"clocks.current.sm", "clocks.sm", "MHz", "current SM clock",
     [](const NvmlLibrary& nvml, nvmlDevice_t device) {
       return clock(nvml, device, NVML_CLOCK_SM, false);
     }},
    {"clocks.current.memory", "clocks.mem", "MHz", "current memory clock",
     [](const NvmlLibrary& nvml, nvmlDevice_t device) {
       return clock(nvml, device, NVML_CLOCK_MEM, false);
     }},
    {"clocks.max.sm", "clocks.max.sm", "MHz", "maximum SM clock",
     [](const NvmlLibrary& nvml, nvmlDevice_t device) {
       return clock(nvml, device, NVML_CLOCK_SM, true);
     }},
    {"clocks.max.memory", "clocks.max.mem", "MHz", "maximum memory clock",
     [](const NvmlLibrary& nvml, nvmlDevice_t device) {
       return clock(nvml, device, NVML_CLOCK_MEM, true);
     }},
    {"pstate", nullptr, "", "performance state, P0 (maximum) to P12 (minimum)",
     [](const NvmlLibrary& nvml, nvmlDevice_t device) {
       nvmlPstates_t state{};
       nvmlReturn_t result = nvml.nvmlDeviceGetPerformanceState(device, &state);
       return result == NVML_SUCCESS ? plain(printfText("P%d", static_cast<int>(state)))
                                     : failed(result);
     }},
    {"compute_mode", nullptr, "", "Default, Exclusive_Process or Prohibited",
     [](const NvmlLibrary& nvml, nvmlDevice_t device) {
       nvmlComputeMode_t mode{};
       nvmlReturn_t result = nvml.nvmlDeviceGetComputeMode(device, &mode);
       return result == NVML_SUCCESS ? plain(computeModeName(mode)) : failed(result);
     }},
    {"persistence_mode", nullptr, "", "Enabled or Disabled",
     [](const NvmlLibrary& nvml, nvmlDevice_t device) {
       nvmlEnableState_t mode{};
       nvmlReturn_t result = nvml.nvmlDeviceGetPersistenceMode(device, &mode);
       return enabled(result, mode == NVML_FEATURE_ENABLED);
     }},
    {"ecc.mode.current", nullptr, "", "ECC mode now: Enabled or Disabled",
     [](const NvmlLibrary& nvml, nvmlDevice_t device) {
       nvmlEnableState_t current{}, pending{};
       nvmlReturn_t result = nvml.nvmlDeviceGetEccMode(device, &current, &pending);
       return enabled(result, current == NVML_FEATURE_ENABLED);
     }},
    {"mig.mode.current", nullptr, "", "MIG mode now: Enabled or Disabled",
     [](const NvmlLibrary& nvml, nvmlDevice_t device) {
       unsigned int current = 0, pending = 0;
       nvmlReturn_t result = nvml.nvmlDeviceGetMigMode(device, &current, &pending);
       return enabled(result, current == NVML_DEVICE_MIG_ENABLE);
     }},
};

}  // namespace

const std::vector<SmiField>& smiFields() { return kFields; }

const SmiField* findSmiField(const std::string& name) {
  for (const SmiField& field : kFields) {
    if (name == field.name || (field.alias && name == field.alias)) return &field;
  }
  return nullptr;
}

std::string smiCell(const NvmlLibrary& nvml, const SmiValue& value, bool units) {
  if (value.result == NVML_ERROR_NOT_SUPPORTED) return "[N/A]";
  if (value.result != NVML_SUCCESS) return std::string("[") + nvml.errorString(value.result) + "]";
  return units ? value.withUnit : value.bare;
}

}  // namespace gpupool::tools
