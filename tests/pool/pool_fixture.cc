#include "pool_fixture.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "build_paths.h"

namespace gpupool::pooltest {

using std::chrono::milliseconds;
using std::chrono::seconds;

ScratchDirectory::ScratchDirectory() {
  const char* dir = std::getenv("TMPDIR");
  std::string pattern = std::string(dir && *dir ? dir : "/tmp") + "/gpupool-pool-XXXXXX";
  if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

ScratchDirectory::~ScratchDirectory() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void ScratchDirectory::write(const std::string& name, const std::string& text) const {
  // Written aside and renamed, so a server reloading it never reads half a file.
  std::string temporary = file(name + ".new");
  std::ofstream(temporary) << text;
  std::filesystem::rename(temporary, file(name));
}

PoolServer::PoolServer(std::vector<std::string> args, EnvironmentChanges environment) {
  char pattern[] = "/tmp/gpupoold-pool-log-XXXXXX";
  int fd = ::mkstemp(pattern);
  ::close(fd);
  logPath_ = pattern;
  if (std::find(args.begin(), args.end(), "--listen") == args.end()) {
    args.insert(args.begin(), {"--listen", "tcp://127.0.0.1:0"});
  }
  bool metrics = std::find(args.begin(), args.end(), "--metrics-listen") != args.end();
  // Deterministic, light interpreter use: the CI machine's cores are shared by every test.
  args.insert(args.end(), {"--emu-threads", "1", "-v"});
  process_ = std::make_unique<ChildProcess>(
      ChildProcess::Options{e2e::gpupooldPath(), args, std::move(environment), logPath_});
  static const std::regex listening(R"(listening on ((tcp|tls)://127\.0\.0\.1:\d+))");
  static const std::regex metricsOn(R"(metrics on (http://\S+/metrics))");
  auto deadline = std::chrono::steady_clock::now() + seconds(30);
  for (;;) {
    std::string text = log();
    std::smatch m;
    if (endpoint_.empty() && std::regex_search(text, m, listening)) endpoint_ = m[1];
    if (metrics && metricsUrl_.empty() && std::regex_search(text, m, metricsOn)) metricsUrl_ = m[1];
    if (!endpoint_.empty() && (!metrics || !metricsUrl_.empty())) return;
    if (process_->ended() || std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error("gpupoold did not start; its output:\n" + text);
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
}

PoolServer::~PoolServer() {
  stop();
  if (::testing::Test::HasFailure()) {
    std::cerr << "--- gpupoold log ---\n" << log() << "--- end of gpupoold log ---\n";
  }
  ::unlink(logPath_.c_str());
}

ProgramResult PoolServer::stop() {
  if (!stopped_) process_->signal(SIGTERM);
  stopped_ = true;
  return process_->finish(seconds(10));
}

void PoolServer::signal(int sig) { process_->signal(sig); }

std::string PoolServer::log() const {
  std::ifstream in(logPath_);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool PoolServer::waitForLog(const std::string& text, int secondsToWait) const {
  auto deadline = std::chrono::steady_clock::now() + seconds(secondsToWait);
  while (std::chrono::steady_clock::now() < deadline) {
    if (log().find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return false;
}

EnvironmentChanges tenantEnvironment(const std::string& endpoint, const std::string& token) {
  EnvironmentChanges env;
  env["GPU_POOL_ENDPOINT"] = endpoint;
  env["LD_LIBRARY_PATH"] = e2e::libcudaDir();
  env["GPU_POOL_TOKEN"] = token.empty() ? std::nullopt : std::optional<std::string>(token);
  return env;
}

std::string poolClientPath() { return e2e::e2eProgramPath("pool_client"); }

ProgramResult runClient(const std::string& endpoint, const std::string& token,
                        const std::vector<std::string>& args, int timeoutSeconds) {
  return e2e::runProgram(poolClientPath(), args, tenantEnvironment(endpoint, token),
                         seconds(timeoutSeconds));
}

std::vector<std::string> chainedCudaArgs(const std::string& config) {
  return {"--config", config, "--driver", e2e::libcudaPath()};
}

EnvironmentChanges chainedCudaEnvironment(const std::string& emuEndpoint) {
  // The cuda server's driver is a gpupool client of the emu server; it authenticates nowhere.
  return tenantEnvironment(emuEndpoint, "");
}

ChainedPool startChainedPool(const std::string& config, std::vector<std::string> emuArgs) {
  ChainedPool pool;
  pool.emu = std::make_unique<PoolServer>(std::move(emuArgs));
  pool.cuda = std::make_unique<PoolServer>(chainedCudaArgs(config),
                                           chainedCudaEnvironment(pool.emu->endpoint()));
  return pool;
}

nlohmann::json queryStatus(const std::string& endpoint) {
  ProgramResult r =
      e2e::runProgram(e2e::gpupoolCliPath(), {"status", "--json", "--endpoint", endpoint},
                      {{"GPU_POOL_ENDPOINT", std::nullopt}}, seconds(30));
  if (!r.passed()) {
    ADD_FAILURE() << "gpupool status failed: " << r.describe();
    return nlohmann::json::object();
  }
  return nlohmann::json::parse(r.out);
}

const nlohmann::json& tenantIn(const nlohmann::json& status, const std::string& name) {
  for (const auto& t : status.at("tenants")) {
    if (t.at("name") == name) return t;
  }
  throw std::runtime_error("no tenant " + name + " in " + status.dump(2));
}

long long valueAfter(const std::string& output, const std::string& key) {
  std::smatch m;
  if (std::regex_search(output, m, std::regex(key + " (-?\\d+)"))) return std::stoll(m[1]);
  return -1;
}

}  // namespace gpupool::pooltest
