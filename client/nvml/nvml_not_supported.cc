#include "client/nvml/nvml_not_supported.h"

#include <mutex>
#include <set>
#include <string>

#include "client/client_log.h"

namespace gpupool::nvml {

namespace {

nvmlReturn_t reportOnce(const char* name, const char* what, nvmlReturn_t code) {
  static std::mutex mutex;
  static std::set<std::string> reported;
  if (client::logLevel() >= 1) {
    std::lock_guard lock(mutex);
    if (reported.insert(name).second) client::logLine(std::string(name) + what);
  }
  return code;
}

}  // namespace

nvmlReturn_t reportNotSupported(const char* name) {
  return reportOnce(name, " is not supported (returning NVML_ERROR_NOT_SUPPORTED)",
                    NVML_ERROR_NOT_SUPPORTED);
}

nvmlReturn_t reportNoPermission(const char* name) {
  return reportOnce(name,
                    " is answered to privileged callers only (returning NVML_ERROR_NO_PERMISSION)",
                    NVML_ERROR_NO_PERMISSION);
}

}  // namespace gpupool::nvml
