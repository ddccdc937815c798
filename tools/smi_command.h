// gpupool smi: nvidia-smi's table, -L, --query-gpu and the dmon/pmon live views, for the devices
// this client sees through gpupool's NVML library.
#pragma once

#include <optional>
#include <string>

namespace gpupool::tools {

struct SmiOptions {
  enum class View { kTable, kList, kQuery, kDeviceMonitor, kProcessMonitor };
  View view = View::kTable;
  std::optional<std::string> endpoint;  // else $GPU_POOL_ENDPOINT
  std::string queryGpu;                 // --query-gpu=name,memory.total,...
  std::string format;                   // --format=csv[,noheader][,nounits]
  std::string ids;                      // -i 0,2 or UUIDs: only these devices
  unsigned count = 0;                   // dmon/pmon -c: frames, 0 = until interrupted
  double delaySeconds = 1;              // dmon/pmon -d
};

int smiCommand(const SmiOptions& options);
// --help-query-gpu: every field --query-gpu knows.
void printSmiQueryFields();

}  // namespace gpupool::tools
