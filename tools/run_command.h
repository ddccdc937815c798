// `gpupool run`: runs a program against the pool by putting our libcuda.so.1 first on its library
// path and telling it where the server is.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace gpupool::tools {

struct RunOptions {
  std::optional<std::string> endpoint;  // --endpoint; else GPU_POOL_ENDPOINT must be set
  std::vector<std::string> command;     // program and its arguments
};

// Finds the directory holding our libcuda.so.1 (GPU_POOL_LIBRARY_DIR, else <dir of this
// executable>/../lib), prepends it to LD_LIBRARY_PATH, sets GPU_POOL_ENDPOINT and replaces this
// process with the command. Returns only on failure: 2 for a usage problem (no endpoint, a
// malformed one, no library), 127 when the command cannot be executed; the reason is on stderr.
int runCommand(const RunOptions& options);

}  // namespace gpupool::tools
