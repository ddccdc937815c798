#include "harness_paths.h"

namespace gpupool::e2e {

std::string gpupooldPath() { return GPUPOOLD_PATH; }
std::string gpupoolCliPath() { return GPUPOOL_CLI_PATH; }
std::string libcudaDir() { return LIBCUDA_DIR; }
std::string libcudaPath() { return libcudaDir() + "/libcuda.so.1"; }
std::string programPath(const std::string& name) { return std::string(PROGRAMS_DIR) + "/" + name; }

}  // namespace gpupool::e2e
