#include "tools/nvml_library.h"

#include <dlfcn.h>

#include "tools/library_location.h"

namespace gpupool::tools {

std::unique_ptr<NvmlLibrary> NvmlLibrary::open(std::string* error) {
  auto directory = libraryDirectory(error);
  if (!directory) return nullptr;
  std::string path = (*directory / "libnvidia-ml.so.1").string();
  std::unique_ptr<NvmlLibrary> library(new NvmlLibrary);
  library->handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library->handle_) {
    *error = "cannot load gpupool's NVML library: " + std::string(dlerror()) +
             " (set GPU_POOL_LIBRARY_DIR to the directory that holds libnvidia-ml.so.1)";
    return nullptr;
  }
#define GPUPOOL_NVML_RESOLVE(name)                                                         \
  library->name = reinterpret_cast<decltype(&::name)>(dlsym(library->handle_, #name));     \
  if (!library->name) {                                                                    \
    *error = path + " lacks " #name ": it is not gpupool's NVML library, or an older one"; \
    return nullptr;                                                                        \
  }
  GPUPOOL_NVML_ENTRY_POINTS(GPUPOOL_NVML_RESOLVE)
#undef GPUPOOL_NVML_RESOLVE
  nvmlReturn_t result = library->nvmlInit_v2();
  if (result != NVML_SUCCESS) {
    *error = std::string("NVML initialization failed: ") + library->errorString(result) +
             " (is GPU_POOL_ENDPOINT set to a reachable gpupoold? GPU_POOL_LOG=1 says more)";
    return nullptr;
  }
  library->initialized_ = true;
  return library;
}

// The library stays loaded: NVML keeps its per-process state in globals until the process exits
// (NVIDIA's as ours), and unloading it would leave that state unreachable (LeakSanitizer says so).
NvmlLibrary::~NvmlLibrary() {
  if (initialized_) nvmlShutdown();
}

const char* NvmlLibrary::errorString(nvmlReturn_t result) const {
  const char* text = nvmlErrorString ? nvmlErrorString(result) : nullptr;
  return text ? text : "unknown NVML error";
}

}  // namespace gpupool::tools
