#include "client/nvml/nvml_not_supported.h"

#include <mutex>
#include <set>
#include <string>

#include "client/client_log.h"

namespace gpupool::nvml {

nvmlReturn_t reportNotSupported(const char* name) {
  static std::mutex mutex;
  static std::set<std::string> reported;
  if (client::logLevel() >= 1) {
    std::lock_guard lock(mutex);
    if (reported.insert(name).second) {
      client::logLine(std::string(name) + " is not supported (returning NVML_ERROR_NOT_SUPPORTED)");
    }
  }
  return NVML_ERROR_NOT_SUPPORTED;
}

}  // namespace gpupool::nvml
