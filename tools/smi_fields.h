// The fields `gpupool smi --query-gpu` knows, by nvidia-smi's names: one table drives the CSV
// header, the values and the list in --help-query-gpu.
#pragma once

#include <string>
#include <vector>

#include "tools/nvml_library.h"

namespace gpupool::tools {

// One answer: NVML's result and, on success, the value without and with its unit.
struct SmiValue {
  nvmlReturn_t result = NVML_SUCCESS;
  std::string bare;
  std::string withUnit;
};

struct SmiField {
  const char* name;         // canonical, as in the CSV header
  const char* alias;        // another name nvidia-smi accepts for it, or nullptr
  const char* unit;         // "MiB", "%", "W", "MHz" or "" (printed as " [unit]" in the header)
  const char* description;  // for --help-query-gpu
  SmiValue (*read)(const NvmlLibrary& nvml, nvmlDevice_t device);
};

const std::vector<SmiField>& smiFields();
// The field called `name` (canonical or alias), or nullptr.
const SmiField* findSmiField(const std::string& name);

// What a query column shows for `value`: nvidia-smi's "[N/A]" for what the device does not
// report, "[<NVML's error>]" for a failure.
std::string smiCell(const NvmlLibrary& nvml, const SmiValue& value, bool units);

}  // namespace gpupool::tools
