#include "gpupool_server.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "harness_paths.h"

namespace gpupool::e2e {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;

std::string makeLogPath() {
  const char* dir = std::getenv("TMPDIR");
  std::string pattern = std::string(dir && *dir ? dir : "/tmp") + "/gpupoold-e2e-XXXXXX";
  int fd = ::mkstemp(pattern.data());
  if (fd < 0) throw std::runtime_error("mkstemp failed for " + pattern);
  ::close(fd);
  return pattern;
}

}  // namespace

GpupoolServer::GpupoolServer(ServerOptions options) : logPath_(makeLogPath()) {
  std::vector<std::string> args = {"--listen", options.listen, "--backend", options.backend};
  if (options.backend == "emu") {
    // Two interpreter threads: the CI machine has two cores shared by every test.
    args.insert(args.end(), {"--memory", options.memory, "--emu-threads", "2"});
  }
  args.push_back("-v");
  args.insert(args.end(), options.extraArgs.begin(), options.extraArgs.end());
  process_ = std::make_unique<ChildProcess>(
      ChildProcess::Options{gpupooldPath(), args, options.environment, logPath_});

  // The server prints exactly one `listening on URL` line once it accepts connections.
  static const std::regex listening(R"(listening on ((?:tcp|tls)://127\.0\.0\.1:(\d+)))");
  auto deadline = steady_clock::now() + seconds(60);
  while (true) {
    std::smatch match;
    std::string text = log();
    if (std::regex_search(text, match, listening)) {
      endpoint_ = match[1];
      port_ = static_cast<uint16_t>(std::stoi(match[2]));
      return;
    }
    if (process_->ended() || steady_clock::now() > deadline) {
      std::string why = process_->ended() ? "exited" : "did not print `listening on` in 60 s";
      std::string output = log();
      process_.reset();
      ::unlink(logPath_.c_str());
      throw std::runtime_error("gpupoold --backend " + options.backend + " " + why +
                               "; its output:\n" + output);
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
}

GpupoolServer::~GpupoolServer() {
  process_->signal(SIGTERM);
  ProgramResult result = process_->finish(seconds(10));
  if (::testing::Test::HasFailure() || result.timedOut) {
    std::cerr << "--- gpupoold " << endpoint_ << " log"
              << (result.timedOut ? " (ignored SIGTERM for 10 s; killed)" : "") << " ---\n"
              << log() << "--- end of gpupoold log ---\n";
  }
  ::unlink(logPath_.c_str());
}

void GpupoolServer::signal(int sig) { process_->signal(sig); }

bool GpupoolServer::running() { return !process_->ended(); }

std::string GpupoolServer::log() const {
  std::ifstream file(logPath_);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

EnvironmentChanges clientEnvironment(const std::string& endpoint) {
  return {
      {"GPU_POOL_ENDPOINT", endpoint},
      {"LD_LIBRARY_PATH", libcudaDir()},
      // Client tuning from the caller's shell must not change what the tests observe.
      {"GPU_POOL_CONNECT_TIMEOUT_MS", std::nullopt},
      {"GPU_POOL_CALL_TIMEOUT_MS", std::nullopt},
      {"GPU_POOL_TOKEN", std::nullopt},
  };
}

ChainedServers startChainedServers(ServerOptions cuda) {
  ChainedServers servers;
  servers.emu = std::make_unique<GpupoolServer>();
  cuda.backend = "cuda";
  cuda.extraArgs.insert(cuda.extraArgs.end(), {"--driver", libcudaPath()});
  for (auto& [name, value] : clientEnvironment(servers.emu->endpoint())) {
    cuda.environment[name] = value;
  }
  servers.cuda = std::make_unique<GpupoolServer>(cuda);
  return servers;
}

}  // namespace gpupool::e2e
