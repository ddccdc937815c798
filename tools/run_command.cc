#include "tools/run_command.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "tools/library_location.h"
#include "transport/endpoint.h"

namespace gpupool::tools {

int runCommand(const RunOptions& options) {
  std::string endpoint;
  if (options.endpoint) {
    endpoint = *options.endpoint;
  } else if (const char* fromEnvironment = std::getenv("GPU_POOL_ENDPOINT");
             fromEnvironment && *fromEnvironment) {
    endpoint = fromEnvironment;
  } else {
    std::cerr << "gpupool: no endpoint: pass --endpoint or set GPU_POOL_ENDPOINT\n";
    return 2;
  }
  std::string error;
  if (!transport::parseEndpointList(endpoint, &error)) {
    std::cerr << "gpupool: " << error << "\n";
    return 2;
  }
  auto directory = libraryDirectory(&error);
  if (!directory) {
    std::cerr << "gpupool: " << error << "\n";
    return 2;
  }
  if (options.command.empty()) {
    std::cerr << "gpupool: run needs a command: gpupool run [--endpoint URL] -- CMD [ARGS...]\n";
    return 2;
  }

  std::string libraryPath = directory->string();
  if (const char* existing = std::getenv("LD_LIBRARY_PATH"); existing && *existing) {
    libraryPath += std::string(":") + existing;
  }
  setenv("LD_LIBRARY_PATH", libraryPath.c_str(), 1);
  setenv("GPU_POOL_ENDPOINT", endpoint.c_str(), 1);

  std::vector<char*> argv;
  for (const std::string& argument : options.command) {
    argv.push_back(const_cast<char*>(argument.c_str()));
  }
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  std::cerr << "gpupool: cannot run '" << options.command[0] << "': " << std::strerror(errno)
            << "\n";
  return 127;
}

}  // namespace gpupool::tools
