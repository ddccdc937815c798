// Test sizes an operator may change from the environment (GPUPOOL_LOAD_CLIENTS=1000 ...): the
// value of `name` as an unsigned number, or `fallback` when it is unset or empty.
#pragma once

#include <cstdlib>

namespace gpupool::test_knobs {

inline unsigned envUnsigned(const char* name, unsigned fallback) {
  const char* v = std::getenv(name);
  return v && *v ? static_cast<unsigned>(std::strtoul(v, nullptr, 10)) : fallback;
}

}  // namespace gpupool::test_knobs
