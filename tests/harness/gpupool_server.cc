#include "gpupool_server.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
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

std::vector<std::string> ServerOptions::arguments() const {
  std::vector<std::string> args;
  if (!listen.empty()) args.insert(args.end(), {"--listen", listen});
  if (!backend.empty()) args.insert(args.end(), {"--backend", backend});
  if (backend == "emu") args.insert(args.end(), {"--memory", memory});
  if (backend != "cuda") args.insert(args.end(), {"--emu-threads", std::to_string(emuThreads)});
  args.push_back("-v");
  args.insert(args.end(), extraArgs.begin(), extraArgs.end());
  return args;
}

GpupoolServer::GpupoolServer(ServerOptions options) : logPath_(makeLogPath()) {
  process_ = std::make_unique<ChildProcess>(
      ChildProcess::Options{gpupooldPath(), options.arguments(), options.environment, logPath_});
  bool metrics = std::find(options.extraArgs.begin(), options.extraArgs.end(),
                           "--metrics-listen") != options.extraArgs.end();

  // The server prints exactly one `listening on URL` line once it accepts connections, and a
  // `metrics on URL` line once its /metrics endpoint is up.
  static const std::regex listening(R"(listening on ((?:tcp|tls)://127\.0\.0\.1:(\d+)))");
  static const std::regex metricsOn(R"(metrics on (http://\S+/metrics))");
  auto deadline = steady_clock::now() + seconds(60);
  while (true) {
    std::smatch match;
    std::string text = log();
    if (endpoint_.empty() && std::regex_search(text, match, listening)) {
      endpoint_ = match[1];
      port_ = static_cast<uint16_t>(std::stoi(match[2]));
    }
    if (metrics && metricsUrl_.empty() && std::regex_search(text, match, metricsOn)) {
      metricsUrl_ = match[1];
    }
    if (!endpoint_.empty() && (!metrics || !metricsUrl_.empty())) return;
    if (process_->ended() || steady_clock::now() > deadline) {
      std::string why = process_->ended() ? "exited" : "did not come up in 60 s";
      std::string command = "gpupoold";
      for (const auto& arg : options.arguments()) command += " " + arg;
      std::string output = log();
      process_.reset();
      ::unlink(logPath_.c_str());
      throw std::runtime_error(command + ": " + why + "; its output:\n" + output);
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
}

GpupoolServer::~GpupoolServer() {
  ProgramResult result = stop();
  if (::testing::Test::HasFailure() || result.timedOut) {
    std::cerr << "--- gpupoold " << endpoint_ << " log"
              << (result.timedOut ? " (ignored SIGTERM for 10 s; killed)" : "") << " ---\n"
              << log() << "--- end of gpupoold log ---\n";
  }
  ::unlink(logPath_.c_str());
}

pid_t GpupoolServer::pid() const { return process_->pid(); }

void GpupoolServer::signal(int sig) { process_->signal(sig); }

bool GpupoolServer::running() { return !process_->ended(); }

ProgramResult GpupoolServer::stop() {
  process_->signal(SIGTERM);
  return process_->finish(seconds(10));
}

std::string GpupoolServer::log() const {
  std::ifstream file(logPath_);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

bool GpupoolServer::waitForLog(const std::string& text, milliseconds timeout) const {
  auto deadline = steady_clock::now() + timeout;
  while (steady_clock::now() < deadline) {
    if (log().find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return false;
}

EnvironmentChanges clientEnvironment(const std::string& endpoint) {
  return {
      {"GPU_POOL_ENDPOINT", endpoint},
      {"LD_LIBRARY_PATH", libcudaDir()},
      // Client tuning from the caller's shell must not change what the tests observe.
      {"GPU_POOL_CONNECT_TIMEOUT_MS", std::nullopt},
      {"GPU_POOL_CALL_TIMEOUT_MS", std::nullopt},
      {"GPU_POOL_TOKEN", std::nullopt},
      {"GPU_POOL_LOG", std::nullopt},
      {"CUDA_VISIBLE_DEVICES", std::nullopt},
  };
}

ServerOptions chainedCudaOptions(const std::string& emuEndpoint, ServerOptions cuda) {
  cuda.backend = "cuda";
  cuda.extraArgs.insert(cuda.extraArgs.end(), {"--driver", libcudaPath()});
  // What the caller set for the driver (say GPU_POOL_LOG) stays.
  for (auto& [name, value] : clientEnvironment(emuEndpoint))
    cuda.environment.try_emplace(name, value);
  return cuda;
}

ChainedServers startChainedServers(ServerOptions cudaOptions, ServerOptions emuOptions) {
  ChainedServers servers;
  servers.emu = std::make_unique<GpupoolServer>(std::move(emuOptions));
  servers.cuda = std::make_unique<GpupoolServer>(
      chainedCudaOptions(servers.emu->endpoint(), std::move(cudaOptions)));
  return servers;
}

}  // namespace gpupool::e2e
