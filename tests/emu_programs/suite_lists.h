// The suite's programs and build flavours, as tests/emu_programs/CMakeLists.txt passes them in
// (comma-separated compile definitions), so the list lives in one place.
#pragma once

#include <algorithm>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace gpupool::emu_programs {

inline std::vector<std::string> splitList(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    if (!item.empty()) items.push_back(item);
  }
  return items;
}

inline std::vector<std::string> suitePrograms() { return splitList(EMU_PROGRAMS); }
inline std::vector<std::string> unsupportedPrograms() {
  return splitList(EMU_UNSUPPORTED_PROGRAMS);
}
inline std::vector<std::string> flavours() { return splitList(EMU_FLAVOURS); }

// Every (program, flavour) pair of `programs` that is built: the parameters of a suite run in
// every flavour. The fastmath flavour leaves out programs whose PTX it would not change
// (EMU_FASTMATH_SAME_AS_DEFAULT in tests/emu_programs/CMakeLists.txt).
inline std::vector<std::tuple<std::string, std::string>> inEveryFlavour(
    const std::vector<std::string>& programs) {
  const std::vector<std::string> sameAsDefault = splitList(EMU_FASTMATH_SAME_AS_DEFAULT);
  std::vector<std::tuple<std::string, std::string>> runs;
  for (const auto& program : programs) {
    for (const auto& flavour : flavours()) {
      if (flavour == "fastmath" &&
          std::find(sameAsDefault.begin(), sameAsDefault.end(), program) != sameAsDefault.end()) {
        continue;
      }
      runs.emplace_back(program, flavour);
    }
  }
  return runs;
}

// The compute capability the server must advertise for a flavour's PTX (compute_90 for sm90);
// 0 keeps the server's default.
inline int computeCapabilityFor(const std::string& flavour) { return flavour == "sm90" ? 90 : 0; }

}  // namespace gpupool::emu_programs
