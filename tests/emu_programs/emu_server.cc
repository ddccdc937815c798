#include "emu_server.h"

namespace gpupool::emu_programs {

e2e::ServerOptions emuServerOptions(int computeCapability) {
  e2e::ServerOptions options;
  if (computeCapability != 0) {
    options.extraArgs = {"--compute-capability", std::to_string(computeCapability)};
  }
  return options;
}

std::string programPath(const std::string& flavour, const std::string& program) {
  return std::string(EMU_PROGRAM_DIR) + "/" + flavour + "/" + program;
}

}  // namespace gpupool::emu_programs
