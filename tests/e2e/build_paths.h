// Where the binaries under test live in the build tree. The paths come from compile definitions
// set in tests/e2e/CMakeLists.txt, so the tests run from any working directory.
#pragma once

#include <string>

namespace gpupool::e2e {

inline std::string gpupooldPath() { return GPUPOOLD_PATH; }
inline std::string gpupoolCliPath() { return GPUPOOL_CLI_PATH; }
// The directory holding our libcuda.so.1.
inline std::string libcudaDir() { return LIBCUDA_DIR; }
inline std::string libcudaPath() { return libcudaDir() + "/libcuda.so.1"; }
// The shared CUDA test programs (tests/programs): `name` or `name_shared`.
inline std::string programPath(const std::string& name) {
  return std::string(PROGRAMS_DIR) + "/" + name;
}
// Programs written for these tests (tests/e2e/*.cu).
inline std::string e2eProgramPath(const std::string& name) {
  return std::string(E2E_PROGRAMS_DIR) + "/" + name;
}

}  // namespace gpupool::e2e
