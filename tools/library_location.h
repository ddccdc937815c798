// Where gpupool's own libcuda.so.1 lives: GPU_POOL_LIBRARY_DIR, else ../lib beside this
// executable.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace gpupool::tools {

// The directory, or nothing with *error saying what to set.
std::optional<std::filesystem::path> libraryDirectory(std::string* error);

}  // namespace gpupool::tools
