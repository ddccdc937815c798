// A `gpupoold --backend emu` for one test: started on a free loopback port, stopped (SIGTERM) when
// destroyed. Its stdout and stderr go to a temporary log file that the test can read (to find the
// messages the server logs about kernels) and that is removed afterwards.
#pragma once

#include <memory>
#include <string>

#include "child_process.h"

namespace gpupool::emu_programs {

class EmuServer {
 public:
  // computeCapability: major*10+minor to advertise, or 0 for the server's default. Waits up to
  // 30 s for the `listening on tcp://...` line; throws std::runtime_error with the log otherwise.
  explicit EmuServer(int computeCapability = 0);
  ~EmuServer();
  EmuServer(const EmuServer&) = delete;
  EmuServer& operator=(const EmuServer&) = delete;

  const std::string& endpoint() const { return endpoint_; }
  bool running() { return process_->running(); }
  // Everything the server has written so far.
  std::string log() const;

 private:
  std::string logPath_;
  std::unique_ptr<BackgroundProcess> process_;
  std::string endpoint_;
};

// The environment that sends a CUDA program to `endpoint` through our libcuda.so.1.
EnvironmentChanges clientEnvironment(const std::string& endpoint);

// Paths of the build outputs, from compile definitions.
std::string programPath(const std::string& flavour, const std::string& program);

}  // namespace gpupool::emu_programs
