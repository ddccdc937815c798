// Running programs under test as child processes: with a modified environment, their stdout and
// stderr captured, and a deadline after which they are killed, so a hung program fails a test
// instead of hanging the suite.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gpupool::emu_programs {

// Variables to set (value) or remove (nullopt) on top of this process's environment.
using EnvironmentChanges = std::vector<std::pair<std::string, std::optional<std::string>>>;

struct ProcessResult {
  bool exited = false;    // exited normally (else killed by a signal)
  int exitCode = -1;      // when exited
  int signal = 0;         // when killed by a signal
  bool timedOut = false;  // killed by us at the deadline
  std::string out;
  std::string err;
  std::chrono::milliseconds elapsed{0};

  // How it ended plus its complete stdout and stderr, for assertion messages.
  std::string describe() const;
};

// Runs `path args...` with stdin from /dev/null and waits for it (killing it with SIGKILL at the
// deadline). Throws std::runtime_error if it cannot be started.
ProcessResult runProcess(const std::string& path, const std::vector<std::string>& args,
                         const EnvironmentChanges& environment, std::chrono::milliseconds timeout);

// A long-running child (a server) whose stdout and stderr are appended to `logPath`, so that its
// output never blocks on a full pipe. It receives SIGKILL if this process dies first.
class BackgroundProcess {
 public:
  // Throws std::runtime_error if it cannot be started.
  BackgroundProcess(const std::string& path, const std::vector<std::string>& args,
                    const std::string& logPath);
  // Sends SIGTERM, waits up to 10 s, then SIGKILL; always reaps the child.
  ~BackgroundProcess();
  BackgroundProcess(const BackgroundProcess&) = delete;
  BackgroundProcess& operator=(const BackgroundProcess&) = delete;

  // Whether the child is still running (reaps it when it has ended).
  bool running();
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
};

}  // namespace gpupool::emu_programs
