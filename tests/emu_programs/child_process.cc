#include "child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace gpupool::emu_programs {
namespace {

using Clock = std::chrono::steady_clock;

// The child's environment as NAME=VALUE strings, built before fork() because allocating between
// fork() and exec() in a multi-threaded process is unsafe.
std::vector<std::string> buildEnvironment(const EnvironmentChanges& changes) {
  std::map<std::string, std::string> variables;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text = *entry;
    const size_t equals = text.find('=');
    if (equals != std::string::npos) variables[text.substr(0, equals)] = text.substr(equals + 1);
  }
  for (const auto& [name, value] : changes) {
    if (value) {
      variables[name] = *value;
    } else {
      variables.erase(name);
    }
  }
  std::vector<std::string> result;
  for (const auto& [name, value] : variables) result.push_back(name + "=" + value);
  return result;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> result;
  for (auto& s : strings) result.push_back(s.data());
  result.push_back(nullptr);
  return result;
}

int waitStatus(pid_t pid, bool block, int* status) {
  while (true) {
    const pid_t r = ::waitpid(pid, status, block ? 0 : WNOHANG);
    if (r >= 0 || errno != EINTR) return r;
  }
}

}  // namespace

std::string ProcessResult::describe() const {
  std::string how;
  if (timedOut) {
    how = "timed out after " + std::to_string(elapsed.count()) + " ms (killed)";
  } else if (exited) {
    how = "exited with code " + std::to_string(exitCode);
  } else {
    how = "killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
  }
  return how + "\n--- stdout ---\n" + out + "--- stderr ---\n" + err + "--- end ---";
}

ProcessResult runProcess(const std::string& path, const std::vector<std::string>& args,
                         const EnvironmentChanges& environment, std::chrono::milliseconds timeout) {
  std::vector<std::string> argvStrings = {path};
  argvStrings.insert(argvStrings.end(), args.begin(), args.end());
  std::vector<std::string> envStrings = buildEnvironment(environment);
  std::vector<char*> argv = pointers(argvStrings);
  std::vector<char*> envp = pointers(envStrings);

  int outPipe[2], errPipe[2];
  if (::pipe2(outPipe, O_CLOEXEC) != 0 || ::pipe2(errPipe, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  }
  const auto started = Clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    const int devNull = ::open("/dev/null", O_RDONLY);
    ::dup2(devNull, STDIN_FILENO);
    ::dup2(outPipe[1], STDOUT_FILENO);
    ::dup2(errPipe[1], STDERR_FILENO);
    ::execve(path.c_str(), argv.data(), envp.data());
    const char message[] = "execve failed\n";
    (void)!::write(STDERR_FILENO, message, sizeof(message) - 1);
    ::_exit(127);
  }
  ::close(outPipe[1]);
  ::close(errPipe[1]);

  ProcessResult result;
  std::string* sinks[2] = {&result.out, &result.err};
  pollfd fds[2] = {{outPipe[0], POLLIN, 0}, {errPipe[0], POLLIN, 0}};
  int open = 2;
  const auto deadline = started + timeout;
  while (open > 0) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      result.timedOut = true;
      ::kill(pid, SIGKILL);
      break;
    }
    const int ready = ::poll(fds, 2, static_cast<int>(left));
    if (ready < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buffer[65536];
      const ssize_t n = ::read(fds[i].fd, buffer, sizeof(buffer));
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open;
      }
    }
  }
  for (auto& fd : fds) {
    if (fd.fd >= 0) ::close(fd.fd);
  }
  int status = 0;
  waitStatus(pid, true, &status);
  result.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started);
  if (WIFEXITED(status)) {
    result.exited = true;
    result.exitCode = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  return result;
}

BackgroundProcess::BackgroundProcess(const std::string& path, const std::vector<std::string>& args,
                                     const std::string& logPath) {
  std::vector<std::string> argvStrings = {path};
  argvStrings.insert(argvStrings.end(), args.begin(), args.end());
  std::vector<char*> argv = pointers(argvStrings);
  const int log = ::open(logPath.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log < 0) throw std::runtime_error("cannot open " + logPath + ": " + std::strerror(errno));
  pid_ = ::fork();
  if (pid_ < 0) {
    ::close(log);
    throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  }
  if (pid_ == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    const int devNull = ::open("/dev/null", O_RDONLY);
    ::dup2(devNull, STDIN_FILENO);
    ::dup2(log, STDOUT_FILENO);
    ::dup2(log, STDERR_FILENO);
    ::execv(path.c_str(), argv.data());
    ::_exit(127);
  }
  ::close(log);
}

BackgroundProcess::~BackgroundProcess() {
  if (reaped_) return;
  ::kill(pid_, SIGTERM);
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  int status = 0;
  while (Clock::now() < deadline) {
    if (waitStatus(pid_, false, &status) == pid_) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid_, SIGKILL);
  waitStatus(pid_, true, &status);
}

bool BackgroundProcess::running() {
  if (reaped_) return false;
  int status = 0;
  if (waitStatus(pid_, false, &status) == pid_) reaped_ = true;
  return !reaped_;
}

}  // namespace gpupool::emu_programs
