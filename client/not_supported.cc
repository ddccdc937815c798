#include "not_supported.h"

#include <cstdio>
#include <mutex>
#include <string_view>
#include <unordered_set>

namespace gpupool::client {

namespace {

// True the first time `name` is seen, so each entry point is reported once.
bool firstReport(const char* name) {
  // Leaked on purpose: stubs may still be called from other libraries' static destructors.
  static auto* mutex = new std::mutex;
  static auto* reported = new std::unordered_set<std::string_view>;
  std::lock_guard lock(*mutex);
  return reported->insert(name).second;
}

}  // namespace

CUresult reportNotSupported(const char* name) {
  if (firstReport(name)) {
    std::fprintf(stderr, "gpupool: %s is not supported (returning CUDA_ERROR_NOT_SUPPORTED)\n",
                 name);
  }
  return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult reportRefused(const char* name, CUresult code, const char* codeName, const char* reason) {
  if (firstReport(name)) {
    std::fprintf(stderr, "gpupool: %s is refused: %s (returning %s)\n", name, reason, codeName);
  }
  return code;
}

}  // namespace gpupool::client
