// Helpers for the pool's process tests: a scratch directory with a pool configuration, a gpupoold
// started on it (tcp:// or tls://, optionally with /metrics), and the tests' CUDA client run as a
// given tenant.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "child_process.h"

namespace gpupool::pooltest {

using e2e::ChildProcess;
using e2e::EnvironmentChanges;
using e2e::ProgramResult;

// A fresh directory under $TMPDIR, removed with everything in it when destroyed.
class ScratchDirectory {
 public:
  ScratchDirectory();
  ~ScratchDirectory();
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  void write(const std::string& name, const std::string& text) const;

 private:
  std::string path_;
};

class PoolServer {
 public:
  // Starts gpupoold with `args` (plus --listen tcp://127.0.0.1:0 unless args has --listen) and
  // `environment`, and waits for its `listening on` line (and `metrics on` when --metrics-listen
  // is given).
  explicit PoolServer(std::vector<std::string> args, EnvironmentChanges environment = {});
  ~PoolServer();
  const std::string& endpoint() const { return endpoint_; }
  const std::string& metricsUrl() const { return metricsUrl_; }
  void signal(int sig);
  // Waits until the log contains `text` (true) or `seconds` pass (false).
  bool waitForLog(const std::string& text, int seconds = 10) const;
  // Sends SIGTERM and waits for the process to end.
  ProgramResult stop();
  std::string log() const;

 private:
  std::string logPath_;
  std::unique_ptr<ChildProcess> process_;
  std::string endpoint_, metricsUrl_;
  bool stopped_ = false;
};

// The environment of a CUDA program on our libcuda.so.1, talking to `endpoint` as `token`.
EnvironmentChanges tenantEnvironment(const std::string& endpoint, const std::string& token);
std::string poolClientPath();
// Runs pool_client with `args` as the tenant holding `token`.
ProgramResult runClient(const std::string& endpoint, const std::string& token,
                        const std::vector<std::string>& args, int timeoutSeconds = 60);
// A pool on the cuda backend without a GPU: an emu gpupoold, and a gpupoold whose CUDA driver is
// our libcuda.so.1 talking to it, configured by `config` (which must exist before).
struct ChainedPool {
  std::unique_ptr<PoolServer> emu;
  std::unique_ptr<PoolServer> cuda;
};
// The cuda server's arguments for `config`, and its environment (the emu server's endpoint).
std::vector<std::string> chainedCudaArgs(const std::string& config);
EnvironmentChanges chainedCudaEnvironment(const std::string& emuEndpoint);
ChainedPool startChainedPool(const std::string& config, std::vector<std::string> emuArgs = {});

// `gpupool status --json` against the server.
nlohmann::json queryStatus(const std::string& endpoint);
const nlohmann::json& tenantIn(const nlohmann::json& status, const std::string& name);
// The integer after `key ` in a program's output (e.g. "ALLOC 2"); -1 when absent.
long long valueAfter(const std::string& output, const std::string& key);

}  // namespace gpupool::pooltest
