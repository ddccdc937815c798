// Where the binaries the test harness runs live in the build tree: the same for every test suite,
// so they are compiled once, into gpupool_test_harness (tests/harness/CMakeLists.txt sets the
// paths as that library's compile definitions). Paths that differ between suites stay in
// build_paths.h.
#pragma once

#include <string>

namespace gpupool::e2e {

std::string gpupooldPath();
std::string gpupoolCliPath();
// The directory holding our libcuda.so.1.
std::string libcudaDir();
std::string libcudaPath();
// The shared CUDA test programs (tests/programs): `name` or `name_shared`.
std::string programPath(const std::string& name);

}  // namespace gpupool::e2e
