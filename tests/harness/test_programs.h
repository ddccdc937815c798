// The CUDA test programs from tests/programs, each built twice: statically linked cudart (`name`)
// and shared cudart (`name_shared`).
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace gpupool::e2e {

inline const std::vector<std::string>& testProgramNames() {
  static const std::vector<std::string> names = {"device_query", "memory_roundtrip", "memset",
                                                 "copy2d",       "pinned_streams",   "events",
                                                 "error_cases",  "vector_add",       "driver_ptx"};
  return names;
}

struct ProgramFlavour {
  std::string name;
  bool sharedCudart = false;

  std::string binary() const { return sharedCudart ? name + "_shared" : name; }
  // The gtest name suffix: memory_roundtrip_static, memory_roundtrip_shared.
  std::string testName() const { return name + (sharedCudart ? "_shared" : "_static"); }
};

// How gtest shows a parameter in test listings and failures.
inline void PrintTo(const ProgramFlavour& flavour, std::ostream* out) {
  *out << flavour.testName();
}

inline std::vector<ProgramFlavour> allProgramFlavours() {
  std::vector<ProgramFlavour> flavours;
  for (const auto& name : testProgramNames()) {
    flavours.push_back({name, false});
    flavours.push_back({name, true});
  }
  return flavours;
}

}  // namespace gpupool::e2e
