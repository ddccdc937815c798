#include "tools/smi_command.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <sstream>
#include <thread>
#include <vector>

#include "tools/nvml_library.h"
#include "tools/printf_text.h"
#include "tools/smi_fields.h"

namespace gpupool::tools {
namespace {

constexpr int kServerError = 1;
constexpr int kUsageError = 2;

std::vector<std::string> splitCommas(const std::string& list) {
  std::vector<std::string> parts;
  std::stringstream in(list);
  for (std::string part; std::getline(in, part, ',');) {
    size_t first = part.find_first_not_of(' ');
    size_t last = part.find_last_not_of(' ');
    if (first != std::string::npos) parts.push_back(part.substr(first, last - first + 1));
  }
  return parts;
}

struct Device {
  unsigned index;
  nvmlDevice_t handle;
};

// The devices to show: all, or those -i names by index or UUID. False with a message when -i
// names one that does not exist.
bool selectDevices(const NvmlLibrary& nvml, const std::string& ids, std::vector<Device>* devices) {
  unsigned count = 0;
  if (nvmlReturn_t result = nvml.nvmlDeviceGetCount_v2(&count); result != NVML_SUCCESS) {
    std::cerr << "gpupool smi: cannot count devices: " << nvml.errorString(result) << "\n";
    return false;
  }
  std::vector<Device> all;
  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice_t handle = nullptr;
    if (nvmlReturn_t result = nvml.nvmlDeviceGetHandleByIndex_v2(i, &handle);
        result != NVML_SUCCESS) {
      std::cerr << "gpupool smi: device " << i << ": " << nvml.errorString(result) << "\n";
      return false;
    }
    all.push_back({i, handle});
  }
  if (ids.empty()) {
    *devices = all;
    return true;
  }
  for (const std::string& id : splitCommas(ids)) {
    const Device* found = nullptr;
    for (const Device& device : all) {
      char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
      nvml.nvmlDeviceGetUUID(device.handle, uuid, sizeof uuid);
      if (id == std::to_string(device.index) || id == uuid) found = &device;
    }
    if (!found) {
      std::cerr << "gpupool smi: no device " << id << " (there are " << count
                << "; see gpupool smi -L)\n";
      return false;
    }
    devices->push_back(*found);
  }
  return true;
}

std::string cell(const NvmlLibrary& nvml, const char* field, nvmlDevice_t device,
                 bool units = true) {
  return smiCell(nvml, findSmiField(field)->read(nvml, device), units);
}

struct Process {
  unsigned pid;
  unsigned long long usedBytes;
  std::string name;
};

// The compute processes on `device` (for the pool: this client's own), or an NVML error.
nvmlReturn_t processes(const NvmlLibrary& nvml, nvmlDevice_t device, std::vector<Process>* out) {
  std::vector<nvmlProcessInfo_t> infos(8);
  unsigned count = static_cast<unsigned>(infos.size());
  nvmlReturn_t result = nvml.nvmlDeviceGetComputeRunningProcesses_v3(device, &count, infos.data());
  if (result == NVML_ERROR_INSUFFICIENT_SIZE) {
    infos.resize(count);
    result = nvml.nvmlDeviceGetComputeRunningProcesses_v3(device, &count, infos.data());
  }
  if (result != NVML_SUCCESS) return result;
  for (unsigned i = 0; i < count && i < infos.size(); ++i) {
    char name[256] = {};
    if (nvml.nvmlSystemGetProcessName(infos[i].pid, name, sizeof name) != NVML_SUCCESS) {
      std::snprintf(name, sizeof name, "-");
    }
    out->push_back({infos[i].pid, infos[i].usedGpuMemory, name});
  }
  return NVML_SUCCESS;
}

// NVML_VALUE_NOT_AVAILABLE is an int -1; the byte counts it marks are unsigned.
constexpr unsigned long long kBytesNotAvailable =
    static_cast<unsigned long long>(NVML_VALUE_NOT_AVAILABLE);

std::string mebibytes(unsigned long long bytes) {
  return bytes == kBytesNotAvailable ? "N/A" : printfText("%lluMiB", bytes / (1024 * 1024));
}

int listDevices(const NvmlLibrary& nvml, const std::vector<Device>& devices) {
  for (const Device& device : devices) {
    std::cout << "GPU " << device.index << ": " << cell(nvml, "name", device.handle)
              << " (UUID: " << cell(nvml, "uuid", device.handle) << ")\n";
    unsigned maxMig = 0;
    if (nvml.nvmlDeviceGetMaxMigDeviceCount(device.handle, &maxMig) != NVML_SUCCESS) continue;
    for (unsigned m = 0; m < maxMig; ++m) {
      nvmlDevice_t mig = nullptr;
      if (nvml.nvmlDeviceGetMigDeviceHandleByIndex(device.handle, m, &mig) != NVML_SUCCESS) {
        continue;
      }
      std::cout << "  MIG " << cell(nvml, "name", mig) << " Device " << m
                << ": (UUID: " << cell(nvml, "uuid", mig) << ")\n";
    }
  }
  return 0;
}

int queryDevices(const NvmlLibrary& nvml, const std::vector<Device>& devices,
                 const SmiOptions& options) {
  std::vector<std::string> formatWords = splitCommas(options.format);
  bool csv = false, header = true, units = true;
  for (const std::string& word : formatWords) {
    if (word == "csv") {
      csv = true;
    } else if (word == "noheader") {
      header = false;
    } else if (word == "nounits") {
      units = false;
    } else {
      std::cerr << "gpupool smi: unknown --format word \"" << word
                << "\" (use csv, optionally with noheader and nounits)\n";
      return kUsageError;
    }
  }
  if (!csv) {
    std::cerr << "gpupool smi: --query-gpu needs --format=csv[,noheader][,nounits]\n";
    return kUsageError;
  }
  std::vector<const SmiField*> fields;
  for (const std::string& name : splitCommas(options.queryGpu)) {
    const SmiField* field = findSmiField(name);
    if (!field) {
      std::cerr << "gpupool smi: field \"" << name
                << "\" is not a valid field to query (see gpupool smi --help-query-gpu)\n";
      return kUsageError;
    }
    fields.push_back(field);
  }
  if (fields.empty()) {
    std::cerr << "gpupool smi: --query-gpu names no field (see gpupool smi --help-query-gpu)\n";
    return kUsageError;
  }
  auto printRow = [&](auto column) {
    for (size_t i = 0; i < fields.size(); ++i) std::cout << (i ? ", " : "") << column(*fields[i]);
    std::cout << "\n";
  };
  if (header) {
    printRow([](const SmiField& field) {
      return *field.unit ? std::string(field.name) + " [" + field.unit + "]" : field.name;
    });
  }
  for (const Device& device : devices) {
    printRow([&](const SmiField& field) {
      return smiCell(nvml, field.read(nvml, device.handle), units);
    });
  }
  return 0;
}

std::string now() {
  std::time_t seconds = std::time(nullptr);
  std::tm local{};
  localtime_r(&seconds, &local);
  char text[64];
  std::strftime(text, sizeof text, "%a %b %e %H:%M:%S %Y", &local);
  return text;
}

// nvidia-smi's MIG devices table, for the GPUs with MIG enabled (nothing when none has): each
// instance this client sees, with its GPU and compute instance ids, its slot and its memory.
void printMigDevices(const NvmlLibrary& nvml, const std::vector<Device>& devices) {
  bool any = false;
  for (const Device& device : devices) {
    unsigned slots = 0;
    if (nvml.nvmlDeviceGetMaxMigDeviceCount(device.handle, &slots) != NVML_SUCCESS) continue;
    for (unsigned m = 0; m < slots; ++m) {
      nvmlDevice_t mig = nullptr;
      if (nvml.nvmlDeviceGetMigDeviceHandleByIndex(device.handle, m, &mig) != NVML_SUCCESS) {
        continue;
      }
      if (!any) {
        std::cout << "\n+" << std::string(89, '-') << "+\n";
        std::cout << printfText("| %-87s |\n", "MIG devices:");
        std::cout << printfText("| %-87s |\n",
                                " GPU  GI  CI  MIG  Name / UUID                               "
                                "              Memory-Usage");
        std::cout << "|" << std::string(89, '=') << "|\n";
        any = true;
      }
      unsigned gi = 0, ci = 0;
      std::string giText =
          nvml.nvmlDeviceGetGpuInstanceId(mig, &gi) == NVML_SUCCESS ? std::to_string(gi) : "N/A";
      std::string ciText = nvml.nvmlDeviceGetComputeInstanceId(mig, &ci) == NVML_SUCCESS
                               ? std::to_string(ci)
                               : "N/A";
      nvmlMemory_t memory{};
      std::string usage = nvml.nvmlDeviceGetMemoryInfo(mig, &memory) == NVML_SUCCESS
                              ? mebibytes(memory.used) + " / " + mebibytes(memory.total)
                              : "N/A";
      std::cout << printfText("| %4u %3s %3s %4u  %-45.45s %22s |\n", device.index, giText.c_str(),
                              ciText.c_str(), m, cell(nvml, "name", mig).c_str(), usage.c_str());
      std::cout << printfText("| %17s  %-68.68s |\n", "", cell(nvml, "uuid", mig).c_str());
    }
  }
  if (any) std::cout << "+" << std::string(89, '-') << "+\n";
}

// nvidia-smi's layout, 89 columns wide, with the columns the pool can fill.
int printTable(const NvmlLibrary& nvml, const std::vector<Device>& devices) {
  const std::string rule(89, '-');
  char driver[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = "N/A";
  nvml.nvmlSystemGetDriverVersion(driver, sizeof driver);
  int cuda = 0;
  std::string cudaText = nvml.nvmlSystemGetCudaDriverVersion_v2(&cuda) == NVML_SUCCESS
                             ? printfText("%d.%d", cuda / 1000, cuda % 1000 / 10)
                             : "N/A";
  std::cout << now() << "\n";
  std::cout << "+" << rule << "+\n";
  std::cout << printfText(
      "| %-87s |\n",
      printfText("gpupool smi   Driver Version: %s   CUDA Version: %s", driver, cudaText.c_str())
          .c_str());
  std::cout << "|-----------------------------------------+------------------------+"
               "----------------------|\n";
  std::cout << "| GPU  Name                 Persistence-M | Bus-Id            Disp |"
               " Volatile Uncorr. ECC |\n";
  std::cout << "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage |"
               " GPU-Util  Compute M. |\n";
  std::cout << "|                                         |                        |"
               "               MIG M. |\n";
  std::cout << "|=========================================+========================+"
               "======================|\n";
  for (const Device& device : devices) {
    nvmlDevice_t d = device.handle;
    std::string persistence = cell(nvml, "persistence_mode", d);
    std::string ecc = cell(nvml, "ecc.mode.current", d) == "Enabled" ? "0" : "Off";
    nvmlMemory_t memory{};
    std::string usage = nvml.nvmlDeviceGetMemoryInfo(d, &memory) == NVML_SUCCESS
                            ? mebibytes(memory.used) + " / " + mebibytes(memory.total)
                            : "N/A";
    auto orNa = [](std::string value) { return value == "[N/A]" ? std::string("N/A") : value; };
    std::string power = orNa(cell(nvml, "power.draw", d, false));
    std::string limit = orNa(cell(nvml, "power.limit", d, false));
    std::string powerText =
        (power == "N/A" ? power : power + "W") + " / " + (limit == "N/A" ? limit : limit + "W");
    std::string fan = orNa(cell(nvml, "fan.speed", d, false));
    std::string temperature = orNa(cell(nvml, "temperature.gpu", d, false));
    if (temperature != "N/A") temperature += "C";
    std::cout << printfText("| %3u  %-23.23s %10s | %-16.16s %5s | %20s |\n", device.index,
                            cell(nvml, "name", d).c_str(),
                            orNa(persistence) == "Enabled" ? "On" : "Off",
                            orNa(cell(nvml, "pci.bus_id", d)).c_str(), "Off", ecc.c_str());
    std::cout << printfText("| %4s  %4s  %4s  %21s | %22s | %7s %12s |\n",
                            fan == "N/A" ? "N/A" : (fan + "%").c_str(), temperature.c_str(),
                            orNa(cell(nvml, "pstate", d)).c_str(), powerText.c_str(), usage.c_str(),
                            orNa(cell(nvml, "utilization.gpu", d, false)) == "N/A"
                                ? "N/A"
                                : (cell(nvml, "utilization.gpu", d, false) + "%").c_str(),
                            orNa(cell(nvml, "compute_mode", d)).c_str());
    std::cout << printfText("| %39s | %22s | %20s |\n", "", "",
                            orNa(cell(nvml, "mig.mode.current", d)).c_str());
    std::cout << "+-----------------------------------------+------------------------+"
                 "----------------------+\n";
  }
  printMigDevices(nvml, devices);
  std::cout << "\n+" << rule << "+\n";
  std::cout << printfText("| %-87s |\n", "Processes:");
  std::cout << printfText("| %-87s |\n",
                          " GPU   PID   Type   Process name                          "
                          "                  GPU Memory");
  std::cout << "|" << std::string(89, '=') << "|\n";
  bool any = false;
  for (const Device& device : devices) {
    std::vector<Process> running;
    nvmlReturn_t result = processes(nvml, device.handle, &running);
    if (result != NVML_SUCCESS) {
      std::cout << printfText("| %4u  %-81s |\n", device.index,
                              (std::string("processes: ") + nvml.errorString(result)).c_str());
      any = true;
      continue;
    }
    for (const Process& process : running) {
      std::cout << printfText("| %4u %7u %6s   %-51.51s %13s |\n", device.index, process.pid, "C",
                              process.name.c_str(), mebibytes(process.usedBytes).c_str());
      any = true;
    }
  }
  if (!any) std::cout << printfText("| %-87s |\n", " No running processes found");
  std::cout << "+" << rule << "+\n";
  return 0;
}

// Runs `frame` every options.delaySeconds, options.count times (0: until killed).
void everyInterval(const SmiOptions& options, auto frame) {
  for (unsigned i = 0; options.count == 0 || i < options.count; ++i) {
    if (i) std::this_thread::sleep_for(std::chrono::duration<double>(options.delaySeconds));
    frame(i);
    std::cout.flush();
  }
}

std::string dash(const std::string& value) {
  return value.empty() || value[0] == '[' ? "-" : value;
}

int deviceMonitor(const NvmlLibrary& nvml, const std::vector<Device>& devices,
                  const SmiOptions& options) {
  everyInterval(options, [&](unsigned frame) {
    if (frame % 20 == 0) {  // nvidia-smi repeats its header as the lines scroll
      std::cout << "# gpu    pwr  gtemp     sm    mem     fb   mclk   pclk\n"
                   "# Idx      W      C      %      %     MB    MHz    MHz\n";
    }
    for (const Device& device : devices) {
      nvmlDevice_t d = device.handle;
      std::string power = dash(cell(nvml, "power.draw", d, false));
      if (power != "-") power = power.substr(0, power.find('.'));
      std::cout << printfText("%5u %6s %6s %6s %6s %6s %6s %6s\n", device.index, power.c_str(),
                              dash(cell(nvml, "temperature.gpu", d, false)).c_str(),
                              dash(cell(nvml, "utilization.gpu", d, false)).c_str(),
                              dash(cell(nvml, "utilization.memory", d, false)).c_str(),
                              dash(cell(nvml, "memory.used", d, false)).c_str(),
                              dash(cell(nvml, "clocks.current.memory", d, false)).c_str(),
                              dash(cell(nvml, "clocks.current.sm", d, false)).c_str());
    }
  });
  return 0;
}

int processMonitor(const NvmlLibrary& nvml, const std::vector<Device>& devices,
                   const SmiOptions& options) {
  int status = 0;
  everyInterval(options, [&](unsigned frame) {
    if (frame % 20 == 0) {
      std::cout << "# gpu         pid   type     fb   command\n"
                   "# Idx           #    C/G     MB   name\n";
    }
    for (const Device& device : devices) {
      std::vector<Process> running;
      nvmlReturn_t result = processes(nvml, device.handle, &running);
      if (result != NVML_SUCCESS) {
        std::cerr << "gpupool smi pmon: device " << device.index << ": " << nvml.errorString(result)
                  << "\n";
        status = kServerError;
        continue;
      }
      if (running.empty()) {
        std::cout << printfText("%5u %11s %6s %6s   %s\n", device.index, "-", "-", "-", "-");
      }
      for (const Process& process : running) {
        std::string megabytes = process.usedBytes == kBytesNotAvailable
                                    ? "-"
                                    : printfText("%llu", process.usedBytes / (1024 * 1024));
        std::cout << printfText("%5u %11u %6s %6s   %s\n", device.index, process.pid, "C",
                                megabytes.c_str(), process.name.c_str());
      }
    }
  });
  return status;
}

}  // namespace

void printSmiQueryFields() {
  std::cout << "Fields for gpupool smi --query-gpu=FIELD[,FIELD...] --format=csv[,noheader]"
               "[,nounits]\n"
               "A value the device does not report prints as [N/A].\n\n";
  for (const SmiField& field : smiFields()) {
    std::string names = field.name;
    if (field.alias && std::string(field.alias) != field.name)
      names += " or " + std::string(field.alias);
    std::cout << printfText("  %-40s %s%s%s\n", names.c_str(), field.description,
                            *field.unit ? ", in " : "", field.unit);
  }
}

int smiCommand(const SmiOptions& options) {
  if (options.endpoint) setenv("GPU_POOL_ENDPOINT", options.endpoint->c_str(), 1);
  if (const char* endpoint = std::getenv("GPU_POOL_ENDPOINT"); !endpoint || !*endpoint) {
    std::cerr << "gpupool smi: no endpoint: pass --endpoint or set GPU_POOL_ENDPOINT\n";
    return kUsageError;
  }
  std::string error;
  std::unique_ptr<NvmlLibrary> nvml = NvmlLibrary::open(&error);
  if (!nvml) {
    std::cerr << "gpupool smi: " << error << "\n";
    return kUsageError;
  }
  std::vector<Device> devices;
  if (!selectDevices(*nvml, options.ids, &devices)) return kServerError;
  switch (options.view) {
    case SmiOptions::View::kList:
      return listDevices(*nvml, devices);
    case SmiOptions::View::kQuery:
      return queryDevices(*nvml, devices, options);
    case SmiOptions::View::kDeviceMonitor:
      return deviceMonitor(*nvml, devices, options);
    case SmiOptions::View::kProcessMonitor:
      return processMonitor(*nvml, devices, options);
    case SmiOptions::View::kTable:
      break;
  }
  return printTable(*nvml, devices);
}

}  // namespace gpupool::tools
