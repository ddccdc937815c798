#include "emu_server.h"

#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace gpupool::emu_programs {
namespace {

std::string makeLogPath() {
  const char* dir = std::getenv("TMPDIR");
  std::string pattern = std::string(dir && *dir ? dir : "/tmp") + "/gpupoold-emu-XXXXXX";
  const int fd = ::mkstemp(pattern.data());
  if (fd < 0) throw std::runtime_error("mkstemp failed for " + pattern);
  ::close(fd);
  return pattern;
}

}  // namespace

EmuServer::EmuServer(int computeCapability) : logPath_(makeLogPath()) {
  // Two interpreter threads: the CI machine has two cores shared by every test.
  std::vector<std::string> args = {
      "--listen", "tcp://127.0.0.1:0", "--backend", "emu",      "--memory",
      "1GiB",     "--emu-threads",     "2",         "--verbose"};
  if (computeCapability != 0) {
    args.insert(args.end(), {"--compute-capability", std::to_string(computeCapability)});
  }
  process_ = std::make_unique<BackgroundProcess>(EMU_GPUPOOLD_PATH, args, logPath_);
  static const std::regex listening(R"(listening on (tcp://127\.0\.0\.1:\d+))");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (true) {
    std::smatch match;
    const std::string text = log();
    if (std::regex_search(text, match, listening)) {
      endpoint_ = match[1];
      return;
    }
    if (!process_->running() || std::chrono::steady_clock::now() > deadline) {
      process_.reset();
      ::unlink(logPath_.c_str());
      throw std::runtime_error("gpupoold did not start listening; its output:\n" + text);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

EmuServer::~EmuServer() {
  process_.reset();
  ::unlink(logPath_.c_str());
}

std::string EmuServer::log() const {
  std::ifstream file(logPath_);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

EnvironmentChanges clientEnvironment(const std::string& endpoint) {
  return {
      {"GPU_POOL_ENDPOINT", endpoint},
      {"LD_LIBRARY_PATH", std::string(EMU_LIBCUDA_DIR)},
      // Client settings from the caller's shell must not change what the tests observe.
      {"GPU_POOL_LOG", std::nullopt},
      {"GPU_POOL_TOKEN", std::nullopt},
      {"GPU_POOL_CONNECT_TIMEOUT_MS", std::nullopt},
      {"GPU_POOL_CALL_TIMEOUT_MS", std::nullopt},
      {"CUDA_VISIBLE_DEVICES", std::nullopt},
  };
}

std::string programPath(const std::string& flavour, const std::string& program) {
  return std::string(EMU_PROGRAM_DIR) + "/" + flavour + "/" + program;
}

}  // namespace gpupool::emu_programs
