// A program written against nvml.h, linked against our libnvidia-ml.so.1: checks what must hold
// of any NVML (init counting, handle lookups that lead back to the same device, buffer sizes,
// temperature refused on the emu) and prints its answers as one JSON object on stdout, which
// tests/e2e/nvml_test.cc compares with `gpupool status --json`. Exit code 0 when every check held.
#include <nvml.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

// nvidia-smi's private table (client/nvml/internal_export_table.cc): not in nvml.h.
extern "C" nvmlReturn_t nvmlInternalGetExportTable(const void** table, const unsigned char* id);

namespace {

int failures = 0;

#define CHECK(cond)                                                               \
  do {                                                                            \
    if (!(cond)) {                                                                \
      std::fprintf(stderr, "nvml_check:%d: check failed: %s\n", __LINE__, #cond); \
      ++failures;                                                                 \
    }                                                                             \
  } while (0)

#define CHECK_OK(call)                                                                  \
  do {                                                                                  \
    nvmlReturn_t r_ = (call);                                                           \
    if (r_ != NVML_SUCCESS) {                                                           \
      std::fprintf(stderr, "nvml_check:%d: %s returned %d (%s)\n", __LINE__, #call, r_, \
                   nvmlErrorString(r_));                                                \
      ++failures;                                                                       \
    }                                                                                   \
  } while (0)

// Accounting: on for a whole device, where this program (no CUDA session of its own) is not
// listed, or refused as a whole when it asks a pool without a tenant's token (accounting is per
// tenant); off on MIG, as NVIDIA documents; never switched off by a client.
void checkAccounting(nvmlDevice_t device, bool enabled) {
  nvmlEnableState_t mode = enabled ? NVML_FEATURE_DISABLED : NVML_FEATURE_ENABLED;
  CHECK_OK(nvmlDeviceGetAccountingMode(device, &mode));
  CHECK(mode == (enabled ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED));
  nvmlAccountingStats_t stats{};
  nvmlReturn_t mine = nvmlDeviceGetAccountingStats(device, static_cast<unsigned>(getpid()), &stats);
  unsigned size = 0;
  nvmlReturn_t buffer = nvmlDeviceGetAccountingBufferSize(device, &size);
  if (!enabled) {
    CHECK(mine == NVML_ERROR_NOT_SUPPORTED && buffer == NVML_ERROR_NOT_SUPPORTED);
    return;
  }
  bool tenantless = mine == NVML_ERROR_NO_PERMISSION;
  CHECK(mine == NVML_ERROR_NOT_FOUND || tenantless);
  CHECK(buffer == (tenantless ? NVML_ERROR_NO_PERMISSION : NVML_SUCCESS));
  CHECK(tenantless || size > 0);
  CHECK(nvmlDeviceSetAccountingMode(device, NVML_FEATURE_DISABLED) == NVML_ERROR_NO_PERMISSION);
}

// The MIG devices under `gpu` as JSON objects, each checked: its handle leads back to the GPU and
// to itself by index and UUID, it answers its memory and its instance ids. None without MIG.
std::string migDevicesOf(nvmlDevice_t gpu, bool migEnabled) {
  unsigned slots = 99;
  CHECK_OK(nvmlDeviceGetMaxMigDeviceCount(gpu, &slots));
  if (!migEnabled) {
    CHECK(slots == 0);
    return "";
  }
  CHECK(slots > 0);
  std::string out;
  nvmlDevice_t mig = nullptr;
  CHECK(nvmlDeviceGetMigDeviceHandleByIndex(gpu, slots, &mig) == NVML_ERROR_INVALID_ARGUMENT);
  for (unsigned m = 0; m < slots; ++m) {
    nvmlReturn_t found = nvmlDeviceGetMigDeviceHandleByIndex(gpu, m, &mig);
    CHECK(found == NVML_SUCCESS || found == NVML_ERROR_NOT_FOUND);
    if (found != NVML_SUCCESS) continue;
    unsigned isMig = 0, index = 99, gpuInstance = 99, computeInstance = 99;
    CHECK_OK(nvmlDeviceIsMigDeviceHandle(mig, &isMig));
    CHECK(isMig == 1);
    CHECK_OK(nvmlDeviceGetIndex(mig, &index));
    CHECK(index == m);
    nvmlDevice_t parent = nullptr, again = nullptr;
    CHECK_OK(nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig, &parent));
    CHECK(parent == gpu);
    CHECK(nvmlDeviceGetDeviceHandleFromMigDeviceHandle(gpu, &parent) ==
          NVML_ERROR_INVALID_ARGUMENT);
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {}, uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    CHECK_OK(nvmlDeviceGetName(mig, name, sizeof name));
    CHECK_OK(nvmlDeviceGetUUID(mig, uuid, sizeof uuid));
    CHECK(std::strncmp(uuid, "MIG-", 4) == 0);
    CHECK_OK(nvmlDeviceGetHandleByUUID(uuid, &again));
    CHECK(again == mig);
    nvmlMemory_t memory{};
    CHECK_OK(nvmlDeviceGetMemoryInfo(mig, &memory));
    CHECK(memory.total > 0 && memory.used + memory.free == memory.total);
    CHECK_OK(nvmlDeviceGetGpuInstanceId(mig, &gpuInstance));
    CHECK_OK(nvmlDeviceGetComputeInstanceId(mig, &computeInstance));
    CHECK(nvmlDeviceGetGpuInstanceId(gpu, &gpuInstance) == NVML_ERROR_NOT_SUPPORTED);
    unsigned current = 0, pending = 0;
    CHECK(nvmlDeviceGetMigMode(mig, &current, &pending) == NVML_ERROR_NOT_SUPPORTED);
    checkAccounting(mig, /*enabled=*/false);
    char line[1024];
    std::snprintf(line, sizeof line,
                  "%s{\"index\": %u, \"name\": \"%s\", \"uuid\": \"%s\", \"memory_total\": %llu, "
                  "\"memory_free\": %llu, \"gpu_instance_id\": %u, \"compute_instance_id\": %u}",
                  out.empty() ? "" : ", ", m, name, uuid, memory.total, memory.free, gpuInstance,
                  computeInstance);
    out += line;
  }
  return out;
}

// Event sets are real objects; a type is recorded only where the device says it supports it, and
// a wait with nothing to deliver ends at its timeout. A freed set is not a set.
void checkEvents(nvmlDevice_t device) {
  nvmlEventSet_t set = nullptr;
  CHECK_OK(nvmlEventSetCreate(&set));
  CHECK(set != nullptr);
  unsigned long long supported = ~0ull;
  CHECK_OK(nvmlDeviceGetSupportedEventTypes(device, &supported));
  CHECK((supported & ~static_cast<unsigned long long>(nvmlEventTypeAll)) == 0);
  const unsigned long long unsupported = nvmlEventTypeAll & ~supported;
  if (unsupported)
    CHECK(nvmlDeviceRegisterEvents(device, unsupported, set) == NVML_ERROR_NOT_SUPPORTED);
  if (supported == 0) {
    nvmlEventData_t data;
    const auto started = std::chrono::steady_clock::now();
    CHECK(nvmlEventSetWait_v2(set, &data, 50) == NVML_ERROR_TIMEOUT);
    CHECK(std::chrono::steady_clock::now() - started >= std::chrono::milliseconds(45));
  }
  CHECK(nvmlEventSetWait_v2(set, nullptr, 1) == NVML_ERROR_INVALID_ARGUMENT);
  CHECK_OK(nvmlEventSetFree(set));
  CHECK(nvmlEventSetFree(set) != NVML_SUCCESS);
  CHECK(nvmlEventSetCreate(nullptr) == NVML_ERROR_INVALID_ARGUMENT);
}

// A batch of fields: the call succeeds and every value gets a status of its own.
void checkFieldValues(nvmlDevice_t device) {
  nvmlFieldValue_t values[2] = {};
  values[0].fieldId = NVML_FI_DEV_ECC_CURRENT;
  values[1].fieldId = NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION;
  for (nvmlFieldValue_t& value : values) value.nvmlReturn = static_cast<nvmlReturn_t>(-12345);
  CHECK_OK(nvmlDeviceGetFieldValues(device, 2, values));
  for (const nvmlFieldValue_t& value : values) {
    CHECK(value.nvmlReturn == NVML_SUCCESS || value.nvmlReturn == NVML_ERROR_NOT_SUPPORTED);
    CHECK(value.timestamp > 0);
  }
  CHECK(nvmlDeviceGetFieldValues(device, 1, nullptr) == NVML_ERROR_INVALID_ARGUMENT);
}

// The table nvidia-smi fetches: its size first, then entry points that refuse what they do not
// know (all of them: none is documented); any other table is refused.
void checkSmiExportTable() {
  const unsigned char smiId[16] = {0xc4, 0xfe, 0x3e, 0x6c, 0xc9, 0x8f, 0x6c, 0x4e,
                                   0xa3, 0x27, 0xee, 0x69, 0x6e, 0x12, 0xf7, 0xc4};
  const void* table = nullptr;
  CHECK_OK(nvmlInternalGetExportTable(&table, smiId));
  if (!table) return;
  const auto* words = static_cast<const uintptr_t*>(table);
  CHECK(words[0] >= 82 * sizeof(void*));
  using Slot = nvmlReturn_t (*)();
  for (size_t slot : {size_t{26}, size_t{72}, size_t{81}}) {
    CHECK(reinterpret_cast<Slot>(words[slot])() == NVML_ERROR_NOT_SUPPORTED);
  }
  unsigned char otherId[16] = {};
  CHECK(nvmlInternalGetExportTable(&table, otherId) == NVML_ERROR_NOT_SUPPORTED);
  CHECK(nvmlInternalGetExportTable(nullptr, smiId) == NVML_ERROR_INVALID_ARGUMENT);
}

}  // namespace

// --poll N: after the checks, asks device 0's utilization and memory N times, 10 ms apart (a
// 100 Hz monitoring loop), for the tests that count what reaches the server; --interval-ms M
// spaces them M ms apart instead.
int main(int argc, char** argv) {
  bool expectEmu = false;
  int polls = 0, intervalMs = 10;
  for (int a = 1; a < argc; ++a) {
    if (std::strcmp(argv[a], "--emu") == 0) expectEmu = true;
    if (std::strcmp(argv[a], "--poll") == 0 && a + 1 < argc) polls = std::atoi(argv[++a]);
    if (std::strcmp(argv[a], "--interval-ms") == 0 && a + 1 < argc)
      intervalMs = std::atoi(argv[++a]);
  }
  unsigned count = 0;
  CHECK(nvmlDeviceGetCount_v2(&count) == NVML_ERROR_UNINITIALIZED);
  CHECK_OK(nvmlInit_v2());
  CHECK_OK(nvmlInitWithFlags(0));  // counted: one shutdown leaves the library initialized
  CHECK_OK(nvmlShutdown());
  CHECK_OK(nvmlDeviceGetCount_v2(&count));
  CHECK(count > 0);

  char text[256];
  CHECK_OK(nvmlSystemGetDriverVersion(text, sizeof text));
  CHECK(nvmlSystemGetDriverVersion(text, 1) == NVML_ERROR_INSUFFICIENT_SIZE);
  int cudaVersion = 0;
  CHECK_OK(nvmlSystemGetCudaDriverVersion_v2(&cudaVersion));
  CHECK(cudaVersion >= 11000);
  CHECK(std::strcmp(nvmlErrorString(NVML_ERROR_NOT_SUPPORTED), "Not Supported") == 0);

  std::printf("{\"cuda_driver_version\": %d, \"driver_version\": \"%s\", \"devices\": [",
              cudaVersion, text);
  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice_t device = nullptr;
    CHECK_OK(nvmlDeviceGetHandleByIndex_v2(i, &device));
    unsigned migCurrent = 9, migPending = 9;
    nvmlReturn_t migModeResult = nvmlDeviceGetMigMode(device, &migCurrent, &migPending);
    CHECK(migModeResult == NVML_SUCCESS || migModeResult == NVML_ERROR_NOT_SUPPORTED);
    bool migEnabled = migModeResult == NVML_SUCCESS && migCurrent == NVML_DEVICE_MIG_ENABLE;
    if (expectEmu) CHECK(!migEnabled);
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {}, uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    char serial[NVML_DEVICE_SERIAL_BUFFER_SIZE] = {};
    CHECK_OK(nvmlDeviceGetName(device, name, sizeof name));
    CHECK_OK(nvmlDeviceGetUUID(device, uuid, sizeof uuid));
    // The board serial only where the server's NVML reports one: refused, never made up.
    nvmlReturn_t serialResult = nvmlDeviceGetSerial(device, serial, sizeof serial);
    CHECK(serialResult == NVML_SUCCESS || serialResult == NVML_ERROR_NOT_SUPPORTED);
    if (expectEmu) CHECK(serialResult == NVML_ERROR_NOT_SUPPORTED);
    unsigned index = 99;
    CHECK_OK(nvmlDeviceGetIndex(device, &index));
    CHECK(index == i);

    // Every lookup leads back to the same handle.
    nvmlDevice_t again = nullptr;
    CHECK_OK(nvmlDeviceGetHandleByUUID(uuid, &again));
    CHECK(again == device);
    CHECK(nvmlDeviceGetHandleBySerial("no such serial", &again) == NVML_ERROR_NOT_FOUND);
    if (serialResult == NVML_SUCCESS) {
      again = nullptr;
      CHECK_OK(nvmlDeviceGetHandleBySerial(serial, &again));
      CHECK(again == device);
    }
    nvmlPciInfo_t pci;
    CHECK_OK(nvmlDeviceGetPciInfo_v3(device, &pci));
    again = nullptr;
    CHECK_OK(nvmlDeviceGetHandleByPciBusId_v2(pci.busId, &again));
    CHECK(again == device);
    CHECK((pci.pciDeviceId & 0xffff) == 0x10de);

    int major = 0, minor = 0;
    CHECK_OK(nvmlDeviceGetCudaComputeCapability(device, &major, &minor));
    CHECK(major >= 3);
    nvmlDeviceArchitecture_t arch = 0;
    CHECK_OK(nvmlDeviceGetArchitecture(device, &arch));

    // A MIG-enabled GPU's aggregate memory is for privileged callers and its utilization is not
    // answered, as NVIDIA documents: its MIG devices answer instead.
    nvmlMemory_t memory{};
    nvmlUtilization_t utilization{};
    std::string figures;
    checkAccounting(device, !migEnabled);
    if (migEnabled) {
      CHECK(nvmlDeviceGetMemoryInfo(device, &memory) == NVML_ERROR_NO_PERMISSION);
      CHECK(nvmlDeviceGetUtilizationRates(device, &utilization) == NVML_ERROR_NOT_SUPPORTED);
    } else {
      CHECK_OK(nvmlDeviceGetMemoryInfo(device, &memory));
      CHECK(memory.total > 0 && memory.free <= memory.total);
      CHECK(memory.used + memory.free == memory.total);
      nvmlMemory_v2_t memory2;
      memory2.version = nvmlMemory_v2;
      CHECK_OK(nvmlDeviceGetMemoryInfo_v2(device, &memory2));
      CHECK(memory2.total == memory.total);
      // Answered where it is measured (the server's NVML, a pool's meter), refused elsewhere.
      nvmlReturn_t rates = nvmlDeviceGetUtilizationRates(device, &utilization);
      CHECK(rates == NVML_SUCCESS || rates == NVML_ERROR_NOT_SUPPORTED);
      CHECK(rates != NVML_SUCCESS || (utilization.gpu <= 100 && utilization.memory <= 100));
      figures = ", \"memory_total\": " + std::to_string(memory.total) +
                ", \"memory_free\": " + std::to_string(memory.free) + ", \"utilization_gpu\": " +
                (rates == NVML_SUCCESS ? std::to_string(utilization.gpu) : "null") +
                ", \"utilization_memory\": " +
                (rates == NVML_SUCCESS ? std::to_string(utilization.memory) : "null");
    }

    // What the server's NVML reads (a real GPU's sensors): each figure is answered or
    // NOT_SUPPORTED, and what is answered is printed under "sensors" for the test to compare with
    // `gpupool status --json`.
    std::string sensors;
    auto figure = [&](const char* key, nvmlReturn_t result, unsigned long long value) {
      CHECK(result == NVML_SUCCESS || result == NVML_ERROR_NOT_SUPPORTED);
      if (result != NVML_SUCCESS) return;
      sensors +=
          std::string(sensors.empty() ? "" : ", ") + "\"" + key + "\": " + std::to_string(value);
    };
    unsigned sm = 0, maxSm = 0;
    CHECK_OK(nvmlDeviceGetMaxClockInfo(device, NVML_CLOCK_SM, &maxSm));
    nvmlPstates_t pstate = NVML_PSTATE_UNKNOWN;
    if (expectEmu) {  // the emu's clock is its profile's, and it has no other state than P0
      CHECK_OK(nvmlDeviceGetClockInfo(device, NVML_CLOCK_SM, &sm));
      CHECK(sm > 0 && sm <= maxSm);
      CHECK_OK(nvmlDeviceGetPerformanceState(device, &pstate));
      CHECK(pstate == NVML_PSTATE_0);
    } else {
      const char* clockKeys[] = {"graphics_clock_mhz", "sm_clock_mhz", "memory_clock_mhz",
                                 "video_clock_mhz"};
      for (int c = NVML_CLOCK_GRAPHICS; c <= NVML_CLOCK_VIDEO; ++c) {
        unsigned mhz = 0;
        nvmlReturn_t result = nvmlDeviceGetClockInfo(device, static_cast<nvmlClockType_t>(c), &mhz);
        figure(clockKeys[c], result, mhz);
      }
      nvmlReturn_t result = nvmlDeviceGetPerformanceState(device, &pstate);
      figure("performance_state", result, static_cast<unsigned long long>(pstate));
    }
    // (Each reading is taken before figure() reads it: argument order is unspecified.)
    unsigned reading = 0;
    nvmlReturn_t result = nvmlDeviceGetTemperature(device, NVML_TEMPERATURE_GPU, &reading);
    figure("temperature_c", result, reading);
    result = nvmlDeviceGetPowerUsage(device, &reading);
    figure("power_usage_mw", result, reading);
    result = nvmlDeviceGetEnforcedPowerLimit(device, &reading);
    figure("power_limit_mw", result, reading);
    result = nvmlDeviceGetPowerManagementLimit(device, &reading);
    figure("power_management_limit_mw", result, reading);
    result = nvmlDeviceGetFanSpeed(device, &reading);
    figure("fan_speed_percent", result, reading);
    const char* eccKeys[2][2] = {{"ecc_corrected_volatile", "ecc_corrected_aggregate"},
                                 {"ecc_uncorrected_volatile", "ecc_uncorrected_aggregate"}};
    for (int e = 0; e < 2; ++e) {
      for (int c = 0; c < 2; ++c) {
        unsigned long long errors = 0;
        result = nvmlDeviceGetTotalEccErrors(device, static_cast<nvmlMemoryErrorType_t>(e),
                                             static_cast<nvmlEccCounterType_t>(c), &errors);
        figure(eccKeys[e][c], result, errors);
      }
    }
    nvmlBAR1Memory_t bar1{};
    nvmlReturn_t bar1Result = nvmlDeviceGetBAR1MemoryInfo(device, &bar1);
    figure("bar1_total", bar1Result, bar1.bar1Total);
    figure("bar1_used", bar1Result, bar1.bar1Used);
    if (bar1Result == NVML_SUCCESS) CHECK(bar1.bar1Used + bar1.bar1Free == bar1.bar1Total);
    if (serialResult == NVML_SUCCESS) {
      sensors += std::string(sensors.empty() ? "" : ", ") + "\"serial\": \"" + serial + "\"";
    }
    nvmlComputeMode_t computeMode;
    CHECK_OK(nvmlDeviceGetComputeMode(device, &computeMode));
    nvmlEnableState_t persistence, eccNow, eccPending;
    CHECK_OK(nvmlDeviceGetPersistenceMode(device, &persistence));
    CHECK_OK(nvmlDeviceGetEccMode(device, &eccNow, &eccPending));
    unsigned busWidth = 0, multiGpu = 2;
    CHECK_OK(nvmlDeviceGetMemoryBusWidth(device, &busWidth));
    CHECK(busWidth > 0);
    CHECK_OK(nvmlDeviceGetMultiGpuBoard(device, &multiGpu));
    CHECK(multiGpu <= 1);
    unsigned isMig = 2;
    CHECK_OK(nvmlDeviceIsMigDeviceHandle(device, &isMig));
    CHECK(isMig <= 1);
    if (migEnabled) CHECK(isMig == 0);
    std::string migDevices = migDevicesOf(device, migEnabled);

    // This program holds no CUDA session: no process of its own is listed.
    unsigned processes = 0;
    CHECK_OK(nvmlDeviceGetComputeRunningProcesses_v3(device, &processes, nullptr));
    CHECK(processes == 0);

    if (expectEmu) CHECK(sensors.empty());  // the emu has no sensors: nothing is made up

    std::printf(
        "%s{\"index\": %u, \"name\": \"%s\", \"uuid\": \"%s\"%s, \"compute_capability\": "
        "\"%d.%d\", \"busid\": \"%s\", \"mig_enabled\": %s, \"mig_devices\": [%s], "
        "\"sensors\": {%s}}",
        i ? ", " : "", i, name, uuid, figures.c_str(), major, minor, pci.busId,
        migEnabled ? "true" : "false", migDevices.c_str(), sensors.c_str());
  }
  std::printf("]}\n");

  for (int p = 0; p < polls && count > 0; ++p) {
    nvmlDevice_t device = nullptr;
    CHECK_OK(nvmlDeviceGetHandleByIndex_v2(0, &device));
    nvmlUtilization_t utilization;
    nvmlReturn_t rates = nvmlDeviceGetUtilizationRates(device, &utilization);
    CHECK(rates == NVML_SUCCESS || rates == NVML_ERROR_NOT_SUPPORTED);
    nvmlMemory_t memory;
    CHECK_OK(nvmlDeviceGetMemoryInfo(device, &memory));
    std::this_thread::sleep_for(std::chrono::milliseconds(intervalMs));
  }

  // Pool devices never map each other's memory (cuDeviceCanAccessPeer says 0): every capability
  // between any two is NOT_SUPPORTED, answered; a capability index past the enum is refused.
  for (unsigned a = 0; a < count; ++a) {
    for (unsigned b = 0; b < count; ++b) {
      nvmlDevice_t first = nullptr, second = nullptr;
      CHECK_OK(nvmlDeviceGetHandleByIndex_v2(a, &first));
      CHECK_OK(nvmlDeviceGetHandleByIndex_v2(b, &second));
      for (int caps = NVML_P2P_CAPS_INDEX_READ; caps < NVML_P2P_CAPS_INDEX_UNKNOWN; ++caps) {
        nvmlGpuP2PStatus_t p2p = NVML_P2P_STATUS_OK;
        CHECK_OK(
            nvmlDeviceGetP2PStatus(first, second, static_cast<nvmlGpuP2PCapsIndex_t>(caps), &p2p));
        CHECK(p2p == NVML_P2P_STATUS_NOT_SUPPORTED);
      }
      nvmlGpuP2PStatus_t p2p;
      CHECK(nvmlDeviceGetP2PStatus(first, second, NVML_P2P_CAPS_INDEX_UNKNOWN, &p2p) ==
            NVML_ERROR_INVALID_ARGUMENT);
    }
  }

  unsigned units = 9;
  CHECK_OK(nvmlUnitGetCount(&units));
  CHECK(units == 0);
  char self[64] = {};
  CHECK_OK(nvmlSystemGetProcessName(static_cast<unsigned>(getpid()), self, sizeof self));
  CHECK(std::strstr(self, "nvml_check") != nullptr);

  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice_t device = nullptr;
    CHECK_OK(nvmlDeviceGetHandleByIndex_v2(i, &device));
    checkEvents(device);
    checkFieldValues(device);
  }
  checkSmiExportTable();

  nvmlDevice_t none = nullptr;
  CHECK(nvmlDeviceGetHandleByIndex_v2(count, &none) == NVML_ERROR_INVALID_ARGUMENT);
  CHECK(nvmlDeviceGetHandleByUUID("GPU-00000000-0000-0000-0000-000000000000", &none) ==
        NVML_ERROR_NOT_FOUND);
  CHECK_OK(nvmlShutdown());
  CHECK(nvmlShutdown() == NVML_ERROR_UNINITIALIZED);
  if (failures) std::fprintf(stderr, "nvml_check: %d checks failed\n", failures);
  return failures ? 1 : 0;
}
