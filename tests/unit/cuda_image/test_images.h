// Access to the images nvcc built from kernels.cu for these tests (see CMakeLists.txt).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "gpupool/image/fatbin.h"

namespace gpupool::image::testing {

// The whole file `name` from the build's image folder (e.g. "default.fatbin"); fails the
// calling test (via ADD_FAILURE) and returns empty when it cannot be read.
std::vector<uint8_t> readImage(const std::string& name);

// The same file as text (for .ptx).
std::string readImageText(const std::string& name);

// PTX with comments removed, whitespace runs collapsed to one space and blank lines dropped:
// the form in which fatbinary stores PTX, so two PTX texts can be compared for equality.
std::vector<std::string> normalizePtx(const std::string& ptx);

// Why `result` holds no value; fails the calling test (and returns "") when it holds one.
template <typename T>
std::string failureOf(const Result<T>& result) {
  EXPECT_FALSE(result.ok()) << "expected a failure";
  EXPECT_FALSE(result.status().message.empty()) << "a failure must say why";
  return result.status().message;
}

// The fatbin parsed from `bytes`; fails the calling test (and returns an empty Fatbin) when it
// does not parse. Entries point into the parsed bytes, so they must outlive the Fatbin.
Fatbin parseOrFail(const std::vector<uint8_t>& bytes);
Fatbin parseOrFail(std::vector<uint8_t>&&) = delete;

// Mangled names of the kernels in kernels.cu.
inline constexpr const char* kVecAdd = "_Z6vecAddPKfS0_Pfid";
inline constexpr const char* kStructParam = "_Z11structParam7Blob100Pc";
inline constexpr const char* kNoParams = "noParams";

}  // namespace gpupool::image::testing
