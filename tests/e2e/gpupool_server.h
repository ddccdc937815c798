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
  std::string backend = "emu";
  std::string listen = "tcp://127.0.0.1:0";  // tls:// needs --tls-cert and --tls-key in extraArgs
  std::string memory = "1GiB";               // emu only
  std::vector<std::string> extraArgs;
  EnvironmentChanges environment;
};

class GpupoolServer {
 public:
  // Starts gpupoold and waits (up to 60 s) for its `listening on tcp://...` line. Throws
  // std::runtime_error, with the server's log, when it does not come up.
  explicit GpupoolServer(ServerOptions options = {});
  ~GpupoolServer();
  GpupoolServer(const GpupoolServer&) = delete;
  GpupoolServer& operator=(const GpupoolServer&) = delete;

  // tcp://127.0.0.1:PORT (or tls://), as the server printed it.
  const std::string& endpoint() const { return endpoint_; }
  uint16_t port() const { return port_; }

  // Sends a signal (e.g. SIGKILL to simulate a crash).
  void signal(int sig);
  // Whether the process is still alive.
  bool running();
  // Everything the server wrote so far.
  std::string log() const;

 private:
  std::string logPath_;
  std::unique_ptr<ChildProcess> process_;
  std::string endpoint_;
  uint16_t port_ = 0;
};

// The environment that points a CUDA program at `endpoint` through our libcuda.so.1.
EnvironmentChanges clientEnvironment(const std::string& endpoint);

// Starts a chained pair: an emu server, and a cuda-backend server whose "driver" is our own
// libcuda.so.1 talking to the emu server.
struct ChainedServers {
  std::unique_ptr<GpupoolServer> emu;
  std::unique_ptr<GpupoolServer> cuda;
};
// `cuda` (the cuda-backend server) gets `cudaOptions` on top of its backend, driver and endpoint.
ChainedServers startChainedServers(ServerOptions cudaOptions = {});

}  // namespace gpupool::e2e
