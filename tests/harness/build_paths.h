// Where the binaries under test live in the build tree, so the tests run from any working
// directory. The paths shared by every suite come from gpupool_test_harness (harness_paths.h);
// E2E_PROGRAMS_DIR is a compile definition of each test executable, because each suite builds its
// own programs (tests/e2e, tests/pool and tests/hardening each have a programs directory). Only
// the tests' own sources include this header, never the harness library, so the inline function
// below has one definition per executable.
#pragma once

#include <string>

#include "harness_paths.h"

namespace gpupool::e2e {

// Programs written for this suite (e.g. tests/e2e/*.cu, built into its E2E_PROGRAMS_DIR).
inline std::string e2eProgramPath(const std::string& name) {
  return std::string(E2E_PROGRAMS_DIR) + "/" + name;
}

}  // namespace gpupool::e2e
