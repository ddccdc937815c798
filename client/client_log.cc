#include "client_log.h"

#include <unistd.h>

#include <cstdlib>

namespace gpupool::client {

int logLevel() {
  static const int level = [] {
    const char* v = std::getenv("GPU_POOL_LOG");
    return v ? std::atoi(v) : 0;
  }();
  return level;
}

void logLine(const std::string& message) {
  std::string line = "gpupool: " + message + "\n";
  ssize_t ignored = ::write(2, line.data(), line.size());
  (void)ignored;
}

CUresult refuseCall(CUresult code, const std::string& why) {
  if (logLevel() >= 1) logLine(why);
  return code;
}

}  // namespace gpupool::client
