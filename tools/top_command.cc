#include "tools/top_command.h"

#include <poll.h>
#include <signal.h>
#include <termios.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include "tools/printf_text.h"
#include "tools/status_query.h"

namespace gpupool::tools {
namespace {

using Clock = std::chrono::steady_clock;

// A tenant's counters at the previous frame, so a frame can show rates over its interval.
struct TenantSample {
  double gpuSeconds = 0, queueSeconds = 0;
  uint64_t launches = 0;
};
struct Sample {
  Clock::time_point at;
  std::map<std::string, TenantSample> tenants;
};

std::string percent(double fraction) { return printfText("%.0f%%", fraction * 100); }

std::string wallClock() {
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char text[16];
  std::strftime(text, sizeof text, "%H:%M:%S", &local);
  return text;
}

// One frame of text; `previous` (null at the first frame) gives the interval's rates.
std::string renderFrame(wire::Response::StatusReply::Reader status, const std::string& url,
                        const Sample* previous, Sample* current) {
  std::ostringstream out;
  out << "gpupool top  " << url << "  gpupoold " << status.getServerVersion().cStr() << ", backend "
      << status.getBackendKind().cStr() << ", up "
      << static_cast<uint64_t>(status.getUptimeSeconds()) << " s  " << wallClock() << "\n\n";

  out << printfText("%-4s %-24s %5s %5s %5s  %s\n", "DEV", "MEMORY USED / TOTAL", "USED", "SESS",
                    "BUSY", "NAME");
  for (auto d : status.getDevices()) {
    double used = d.getMemoryTotal() ? static_cast<double>(d.getMemoryUsed()) /
                                           static_cast<double>(d.getMemoryTotal())
                                     : 0;
    std::string memory = humanBytes(d.getMemoryUsed()) + " / " + humanBytes(d.getMemoryTotal());
    out << printfText("%-4u %-24s %5s %5u %5s  %s", d.getIndex(), memory.c_str(),
                      percent(used).c_str(), d.getSessions(),
                      d.getUtilizationMeasured() ? percent(d.getUtilization()).c_str() : "-",
                      d.getName().cStr());
    if (d.getParent().size()) {
      out << "  MIG " << d.getProfile().cStr() << " on " << d.getParent().cStr();
    }
    out << "\n";
  }

  double elapsed = previous ? std::chrono::duration<double>(current->at - previous->at).count() : 0;
  if (status.getTenants().size()) {
    out << "\n"
        << printfText("%-16s %-28s %-6s %6s %5s %10s %5s %10s %10s\n", "TENANT", "MEMORY / QUOTA",
                      "PRIO", "WEIGHT", "SESS", "GPU-S", "GPU", "QUEUE-S", "WAIT/KERN");
  }
  for (auto t : status.getTenants()) {
    std::string name = t.getName().cStr();
    current->tenants[name] = {t.getGpuSeconds(), t.getQueueSeconds(), t.getLaunches()};
    std::string memory =
        humanBytes(t.getMemoryUsed()) + " / " +
        (t.getMemoryQuota() ? humanBytes(t.getMemoryQuota()) : std::string("unlimited"));
    // Rates over the interval since the previous frame: the tenant's share of GPU time, and the
    // average queueing delay of the kernels it started.
    std::string share = "-", wait = "-";
    if (previous && previous->tenants.count(name) && elapsed > 0) {
      const TenantSample& before = previous->tenants.at(name);
      share = percent((t.getGpuSeconds() - before.gpuSeconds) / elapsed);
      if (t.getLaunches() > before.launches) {
        wait = printfText("%.2f ms", (t.getQueueSeconds() - before.queueSeconds) * 1000 /
                                         static_cast<double>(t.getLaunches() - before.launches));
      }
    }
    out << printfText("%-16s %-28s %-6s %6g %5u %10.3f %5s %10.3f %10s\n", name.c_str(),
                      memory.c_str(), t.getPriority().cStr(), t.getWeight(), t.getSessions(),
                      t.getGpuSeconds(), share.c_str(), t.getQueueSeconds(), wait.c_str());
  }

  out << "\n"
      << printfText("%-8s %-24s %-16s %-12s %s\n", "SESSION", "CLIENT", "TENANT", "MEMORY",
                    "TRANSPORT");
  for (auto s : status.getSessions()) {
    out << printfText("%-8llu %-24s %-16s %-12s %s\n",
                      static_cast<unsigned long long>(s.getSessionId()), s.getClientName().cStr(),
                      s.getTenant().size() ? s.getTenant().cStr() : "-",
                      humanBytes(s.getMemoryUsed()).c_str(), s.getTransport().cStr());
  }
  if (status.getSessions().size() == 0) out << "(none)\n";
  return out.str();
}

volatile std::sig_atomic_t quitRequested = 0;
void requestQuit(int) { quitRequested = 1; }

// The terminal while top draws on it: the alternate screen with the cursor hidden, keys read one
// at a time without echo, Ctrl-C and SIGTERM turned into a clean quit. Everything is put back
// when it is destroyed, however top ends.
class LiveTerminal {
 public:
  LiveTerminal() {
    readsKeys_ = ::isatty(STDIN_FILENO) && ::tcgetattr(STDIN_FILENO, &saved_) == 0;
    if (readsKeys_) {
      termios keys = saved_;
      keys.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);  // ISIG stays: Ctrl-C is SIGINT
      keys.c_cc[VMIN] = 0;
      keys.c_cc[VTIME] = 0;
      ::tcsetattr(STDIN_FILENO, TCSANOW, &keys);
    }
    struct sigaction quit {};
    quit.sa_handler = requestQuit;
    sigemptyset(&quit.sa_mask);
    quit.sa_flags = 0;  // no SA_RESTART: the wait below wakes up at once
    ::sigaction(SIGINT, &quit, &savedInt_);
    ::sigaction(SIGTERM, &quit, &savedTerm_);
    std::cout << "\x1b[?1049h\x1b[?25l" << std::flush;
  }
  ~LiveTerminal() {
    std::cout << "\x1b[?25h\x1b[?1049l" << std::flush;
    if (readsKeys_) ::tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
    ::sigaction(SIGINT, &savedInt_, nullptr);
    ::sigaction(SIGTERM, &savedTerm_, nullptr);
  }
  LiveTerminal(const LiveTerminal&) = delete;
  LiveTerminal& operator=(const LiveTerminal&) = delete;

  void draw(const std::string& frame) {
    std::cout << "\x1b[H\x1b[2J" << frame << "\npress q to quit" << std::flush;
  }

  // Waits `seconds`; true when the user asked to quit meanwhile (q, Ctrl-C, SIGTERM).
  bool waitForQuit(double seconds) {
    auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(seconds));
    while (!quitRequested) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return false;
      pollfd input{STDIN_FILENO, POLLIN, 0};
      int ready = ::poll(&input, readsKeys_ ? 1 : 0, static_cast<int>(left));
      if (ready > 0) {
        char key = 0;
        ssize_t n = ::read(STDIN_FILENO, &key, 1);
        if (n == 1 && (key == 'q' || key == 'Q')) return true;
        if (n == 0) readsKeys_ = false;  // input closed: only signals quit now
      }
    }
    return true;
  }

 private:
  bool readsKeys_ = false;
  termios saved_{};
  struct sigaction savedInt_ {
  }, savedTerm_{};
};

}  // namespace

int topCommand(const TopOptions& options) {
  StatusFailure failure;
  auto endpoint = statusEndpoint(options.endpoint, &failure);
  if (!endpoint) {
    std::cerr << failure.message << "\n";
    return failure.exitCode;
  }
  bool live = !options.once && ::isatty(STDOUT_FILENO);
  unsigned frames = options.iterations.value_or(live ? 0 : 1);  // 0 = until the user quits

  Sample previous;
  bool havePrevious = false;
  auto fetchFrame = [&](std::string* frame) {
    auto status = fetchStatus(*endpoint, "gpupool top", &failure);
    if (!status) return false;
    Sample current{Clock::now(), {}};
    *frame = renderFrame(status->reader(), endpoint->url(), havePrevious ? &previous : nullptr,
                         &current);
    previous = std::move(current);
    havePrevious = true;
    return true;
  };

  bool failed = false;
  if (live) {
    LiveTerminal terminal;
    for (unsigned drawn = 0; frames == 0 || drawn < frames; ++drawn) {
      std::string frame;
      if (!fetchFrame(&frame)) {
        failed = true;
        break;
      }
      terminal.draw(frame);
      if (frames != 0 && drawn + 1 == frames) break;
      if (terminal.waitForQuit(options.intervalSeconds)) break;
    }
  } else {
    for (unsigned drawn = 0; drawn < frames; ++drawn) {
      if (drawn) {
        std::this_thread::sleep_for(std::chrono::duration<double>(options.intervalSeconds));
        std::cout << "\n";
      }
      std::string frame;
      if (!fetchFrame(&frame)) {
        failed = true;
        break;
      }
      std::cout << frame << std::flush;
    }
  }
  if (failed) {  // reported once the terminal is restored
    std::cerr << failure.message << "\n";
    return failure.exitCode;
  }
  return 0;
}

}  // namespace gpupool::tools
