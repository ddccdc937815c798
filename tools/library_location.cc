#include "tools/library_location.h"

#include <cstdlib>

namespace gpupool::tools {

namespace fs = std::filesystem;

std::optional<fs::path> libraryDirectory(std::string* error) {
  fs::path directory;
  if (const char* overridden = std::getenv("GPU_POOL_LIBRARY_DIR"); overridden && *overridden) {
    directory = overridden;
  } else {
    std::error_code ec;
    fs::path self = fs::read_symlink("/proc/self/exe", ec);
    if (ec) {
      *error = "cannot locate the gpupool executable: " + ec.message();
      return std::nullopt;
    }
    directory = self.parent_path().parent_path() / "lib";
  }
  if (!fs::exists(directory / "libcuda.so.1")) {
    *error = "no libcuda.so.1 in " + directory.string() +
             " (set GPU_POOL_LIBRARY_DIR to the directory that holds gpupool's libcuda.so.1)";
    return std::nullopt;
  }
  return fs::absolute(directory).lexically_normal();
}

}  // namespace gpupool::tools
