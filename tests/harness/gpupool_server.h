// A gpupoold process for one test: started on a free loopback port, stopped when the fixture is
// destroyed (SIGTERM, then SIGKILL). Its stdout and stderr go to a log file that is printed when
// the test failed.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "child_process.h"

namespace gpupool::e2e {

struct ServerOptions {
  // --backend; empty passes none, so gpupoold's default or a --config file in extraArgs decides.
  std::string backend = "emu";
  std::string listen = "tcp://127.0.0.1:0";  // tls:// needs --tls-cert and --tls-key in extraArgs
  std::string memory = "1GiB";               // --memory, passed with backend "emu" only
  // --emu-threads, passed unless the backend is cuda: the CI machine's two cores are shared by
  // every test.
  int emuThreads = 2;
  std::vector<std::string> extraArgs;
  EnvironmentChanges environment;

  // gpupoold's command line (argv[1..]) for these options, verbose.
  std::vector<std::string> arguments() const;
};

class GpupoolServer {
 public:
  // Starts gpupoold and waits (up to 60 s) for its `listening on tcp://...` line, and for its
  // `metrics on` line when extraArgs has --metrics-listen. Throws std::runtime_error, with the
  // server's log, when it does not come up.
  explicit GpupoolServer(ServerOptions options = {});
  ~GpupoolServer();
  GpupoolServer(const GpupoolServer&) = delete;
  GpupoolServer& operator=(const GpupoolServer&) = delete;

  // tcp://127.0.0.1:PORT (or tls://), as the server printed it.
  const std::string& endpoint() const { return endpoint_; }
  uint16_t port() const { return port_; }
  // http://HOST:PORT/metrics, when started with --metrics-listen.
  const std::string& metricsUrl() const { return metricsUrl_; }

  // The server's process id (for reading /proc/<pid>).
  pid_t pid() const;
  // Sends a signal (e.g. SIGKILL to simulate a crash).
  void signal(int sig);
  // Whether the process is still alive.
  bool running();
  // Sends SIGTERM and waits (up to 10 s, then SIGKILL) for the process to end. Idempotent: the
  // destructor calls it too.
  ProgramResult stop();
  // Everything the server wrote so far.
  std::string log() const;
  // Waits until the log contains `text` (true) or `timeout` passes (false).
  bool waitForLog(const std::string& text,
                  std::chrono::milliseconds timeout = std::chrono::seconds(10)) const;

 private:
  std::string logPath_;
  std::unique_ptr<ChildProcess> process_;
  std::string endpoint_;
  uint16_t port_ = 0;
  std::string metricsUrl_;
};

// The environment that points a CUDA program at `endpoint` through our libcuda.so.1, with the
// client settings of the caller's shell that would change what the tests observe removed.
EnvironmentChanges clientEnvironment(const std::string& endpoint);

// A chained pair: an emu server, and a cuda-backend server whose "driver" is our own libcuda.so.1
// talking to the emu server. This runs the cuda backend without a GPU.
struct ChainedServers {
  std::unique_ptr<GpupoolServer> emu;
  std::unique_ptr<GpupoolServer> cuda;
};
// `cuda` with the cuda backend, our libcuda.so.1 as its driver, and that driver's environment
// pointing at the emu server `emuEndpoint` (what `cuda.environment` already sets stays).
ServerOptions chainedCudaOptions(const std::string& emuEndpoint, ServerOptions cuda = {});
// Starts the emu server with `emuOptions`, then the cuda server with
// chainedCudaOptions(cudaOptions).
ChainedServers startChainedServers(ServerOptions cudaOptions = {}, ServerOptions emuOptions = {});

}  // namespace gpupool::e2e
