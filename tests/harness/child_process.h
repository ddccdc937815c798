// Child processes for end-to-end tests: start a program with a modified environment, talk to it
// through its stdin/stdout, and collect its exit status and output with a deadline, so a hung
// program fails a test instead of hanging the suite.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gpupool::e2e {

// Environment changes applied on top of this process's environment: a value sets the variable,
// nullopt removes it.
using EnvironmentChanges = std::map<std::string, std::optional<std::string>>;

struct ProgramResult {
  bool exited = false;    // exited normally (else killed by a signal)
  int exitCode = -1;      // when exited
  int signal = 0;         // when killed
  bool timedOut = false;  // we killed it because the deadline passed
  std::string out;
  std::string err;
  std::chrono::milliseconds elapsed{0};

  bool passed() const { return exited && exitCode == 0 && !timedOut; }
  // One line for assertion messages: how it ended, then its stdout and stderr.
  std::string describe() const;
};

// The `key=value` lines of a program's output, in order: what a self-checking program reports
// about the device, compared between two runs of it.
std::vector<std::string> keyValueLines(const std::string& text);

class ChildProcess {
 public:
  struct Options {
    std::string path;
    std::vector<std::string> args;  // argv[1..]
    EnvironmentChanges environment;
    // When set, stdout and stderr are appended to this file instead of being captured (for
    // long-running servers, whose output must never block on a full pipe).
    std::optional<std::string> logFile;
  };

  // Starts the child. Throws std::runtime_error when it cannot be started. The child is killed
  // if this test process dies first.
  explicit ChildProcess(const Options& options);
  // Kills the child (SIGKILL) if it still runs, and reaps it.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }

  // Reads captured output until stdout contains `text` or the deadline passes. Returns whether
  // it appeared. Stops early (false) if the child closed its stdout.
  bool waitForStdout(const std::string& text, std::chrono::milliseconds timeout);
  // Writes to the child's stdin.
  void writeStdin(const std::string& text);
  void closeStdin();

  // Sends a signal if the child still runs.
  void signal(int sig);
  // Waits for the child to end, reading its output meanwhile; kills it with SIGKILL at the
  // deadline (result.timedOut). Idempotent: later calls return the same result.
  ProgramResult finish(std::chrono::milliseconds timeout);
  // Whether the child has ended (reaps it if so).
  bool ended();

  const std::string& capturedStdout() const { return result_.out; }

 private:
  void readAvailable(int timeoutMs);
  bool reap(bool block);

  pid_t pid_ = -1;
  int stdinFd_ = -1;
  int stdoutFd_ = -1;
  int stderrFd_ = -1;
  bool reaped_ = false;
  std::chrono::steady_clock::time_point started_;
  ProgramResult result_;
};

// Runs `path args...` with the environment changes, stdin closed, and returns how it ended.
ProgramResult runProgram(const std::string& path, const std::vector<std::string>& args,
                         const EnvironmentChanges& environment,
                         std::chrono::milliseconds timeout = std::chrono::seconds(120));

}  // namespace gpupool::e2e
