#include "not_supported.h"

#include <cstdio>
#include <mutex>
#include <string_view>
#include <unordered_set>

namespace gpupool::client {

CUresult reportNotSupported(const char* name) {
  // Leaked on purpose: stubs may still be called from other libraries' static destructors.
  static auto* mutex = new std::mutex;
  static auto* reported = new std::unordered_set<std::string_view>;
  bool first;
  {
    std::lock_guard lock(*mutex);
    first = reported->insert(name).second;
  }
  if (first) {
    std::fprintf(stderr, "gpupool: %s is not supported (returning CUDA_ERROR_NOT_SUPPORTED)\n",
                 name);
  }
  return CUDA_ERROR_NOT_SUPPORTED;
}

}  // namespace gpupool::client
