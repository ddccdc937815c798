#include "child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace gpupool::e2e {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

std::vector<std::string> mergedEnvironment(const EnvironmentChanges& changes) {
  std::vector<std::string> merged;
  for (char** entry = environ; *entry; ++entry) {
    std::string text = *entry;
    std::string name = text.substr(0, text.find('='));
    if (!changes.contains(name)) merged.push_back(text);
  }
  for (const auto& [name, value] : changes) {
    if (value) merged.push_back(name + "=" + *value);
  }
  return merged;
}

std::vector<char*> pointersTo(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (auto& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

void makePipe(int fds[2]) {
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("pipe2: ") + std::strerror(errno));
  }
}

}  // namespace

std::string ProgramResult::describe() const {
  std::string how;
  if (timedOut) {
    how = "timed out after " + std::to_string(elapsed.count()) + " ms and was killed";
  } else if (exited) {
    how = "exited with " + std::to_string(exitCode);
  } else {
    how = std::string("killed by signal ") + strsignal(signal);
  }
  return how + "\n--- stdout ---\n" + out + "\n--- stderr ---\n" + err;
}

ChildProcess::ChildProcess(const Options& options) {
  // A child that dies while we write to its stdin must not kill the test.
  ::signal(SIGPIPE, SIG_IGN);

  // Everything the child needs is prepared before fork: the test process may have threads.
  std::vector<std::string> argvStrings{options.path};
  argvStrings.insert(argvStrings.end(), options.args.begin(), options.args.end());
  std::vector<std::string> envStrings = mergedEnvironment(options.environment);
  std::vector<char*> argv = pointersTo(argvStrings);
  std::vector<char*> envp = pointersTo(envStrings);

  int in[2], out[2] = {-1, -1}, err[2] = {-1, -1}, exec[2];
  makePipe(in);
  makePipe(exec);
  int logFd = -1;
  if (options.logFile) {
    logFd = ::open(options.logFile->c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (logFd < 0) throw std::runtime_error("cannot open " + *options.logFile);
  } else {
    makePipe(out);
    makePipe(err);
  }
  pid_t parent = ::getpid();
  started_ = steady_clock::now();
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid_ == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::dup2(in[0], 0);
    ::dup2(logFd >= 0 ? logFd : out[1], 1);
    ::dup2(logFd >= 0 ? logFd : err[1], 2);
    ::execve(argv[0], argv.data(), envp.data());
    int error = errno;
    ssize_t ignored = ::write(exec[1], &error, sizeof error);
    (void)ignored;
    ::_exit(127);
  }
  ::close(in[0]);
  ::close(exec[1]);
  if (logFd >= 0) ::close(logFd);
  if (out[1] >= 0) ::close(out[1]);
  if (err[1] >= 0) ::close(err[1]);
  stdinFd_ = in[1];
  stdoutFd_ = out[0];
  stderrFd_ = err[0];

  // The exec pipe closes on a successful exec, or carries errno when exec failed.
  int error = 0;
  ssize_t n;
  do {
    n = ::read(exec[0], &error, sizeof error);
  } while (n < 0 && errno == EINTR);
  ::close(exec[0]);
  if (n == sizeof error) {
    reap(true);
    throw std::runtime_error("cannot execute " + options.path + ": " + std::strerror(error));
  }
}

ChildProcess::~ChildProcess() {
  if (!reaped_) {
    ::kill(pid_, SIGKILL);
    reap(true);
  }
  for (int fd : {stdinFd_, stdoutFd_, stderrFd_}) {
    if (fd >= 0) ::close(fd);
  }
}

void ChildProcess::readAvailable(int timeoutMs) {
  pollfd fds[2];
  int count = 0;
  for (int fd : {stdoutFd_, stderrFd_}) {
    if (fd >= 0) fds[count++] = {fd, POLLIN, 0};
  }
  if (count == 0) {
    if (timeoutMs > 0) ::poll(nullptr, 0, timeoutMs);
    return;
  }
  if (::poll(fds, count, timeoutMs) <= 0) return;
  for (int i = 0; i < count; ++i) {
    if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    char buffer[65536];
    ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    bool isStdout = fds[i].fd == stdoutFd_;
    if (n <= 0) {
      ::close(fds[i].fd);
      (isStdout ? stdoutFd_ : stderrFd_) = -1;
    } else {
      (isStdout ? result_.out : result_.err).append(buffer, static_cast<size_t>(n));
    }
  }
}

bool ChildProcess::waitForStdout(const std::string& text, milliseconds timeout) {
  auto deadline = steady_clock::now() + timeout;
  while (true) {
    if (result_.out.find(text) != std::string::npos) return true;
    if (stdoutFd_ < 0) return false;
    auto left = std::chrono::duration_cast<milliseconds>(deadline - steady_clock::now());
    if (left.count() <= 0) return false;
    readAvailable(static_cast<int>(std::min<long>(left.count(), 100)));
  }
}

void ChildProcess::writeStdin(const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(stdinFd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error("write to child's stdin failed");
    done += static_cast<size_t>(n);
  }
}

void ChildProcess::closeStdin() {
  if (stdinFd_ >= 0) ::close(stdinFd_);
  stdinFd_ = -1;
}

void ChildProcess::signal(int sig) {
  if (!ended()) ::kill(pid_, sig);
}

bool ChildProcess::reap(bool block) {
  if (reaped_) return true;
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &status, block ? 0 : WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r != pid_) return false;
  reaped_ = true;
  result_.elapsed = std::chrono::duration_cast<milliseconds>(steady_clock::now() - started_);
  if (WIFEXITED(status)) {
    result_.exited = true;
    result_.exitCode = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result_.signal = WTERMSIG(status);
  }
  return true;
}

bool ChildProcess::ended() { return reap(false); }

ProgramResult ChildProcess::finish(milliseconds timeout) {
  auto deadline = steady_clock::now() + timeout;
  while (!reap(false)) {
    if (steady_clock::now() >= deadline) {
      ::kill(pid_, SIGKILL);
      reap(true);
      result_.timedOut = true;
      break;
    }
    readAvailable(20);
  }
  // Drain what is left; a grandchild holding the pipes open gets a short grace period only.
  auto drainDeadline = steady_clock::now() + milliseconds(2000);
  while ((stdoutFd_ >= 0 || stderrFd_ >= 0) && steady_clock::now() < drainDeadline) {
    readAvailable(50);
  }
  return result_;
}

ProgramResult runProgram(const std::string& path, const std::vector<std::string>& args,
                         const EnvironmentChanges& environment, milliseconds timeout) {
  ChildProcess child({path, args, environment, std::nullopt});
  child.closeStdin();
  return child.finish(timeout);
}

std::vector<std::string> keyValueLines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream lines(text);
  for (std::string l; std::getline(lines, l);) {
    if (l.find('=') != std::string::npos) out.push_back(l);
  }
  return out;
}

}  // namespace gpupool::e2e
