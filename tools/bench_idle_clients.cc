#include "tools/bench_idle_clients.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "tools/bench_raw_wire.h"
#include "transport/open_file_limit.h"

namespace gpupool::tools {
namespace {

bool isLoopback(const std::string& host) {
  in_addr v4{};
  return host == "localhost" || host == "::1" ||
         (inet_pton(AF_INET, host.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127);
}

// The inode of the socket listening on `endpoint` on this host (0 when there is none): from
// /proc/net/tcp{,6}, a listener on the endpoint's own IPv4 address, or on a wildcard address when
// the endpoint is a loopback one.
unsigned long listeningInode(const transport::Endpoint& endpoint) {
  in_addr target{};
  const bool ipv4 = inet_pton(AF_INET, endpoint.host.c_str(), &target) == 1;
  const bool loopback = isLoopback(endpoint.host);
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      // sl local_address rem_address st tx_queue:rx_queue tr:when retrnsmt uid timeout inode
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout;
      unsigned long inode = 0;
      fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >>
          timeout >> inode;
      auto colon = local.find(':');
      if (state != "0A" || colon == std::string::npos) continue;  // 0A: LISTEN
      if (std::stoul(local.substr(colon + 1), nullptr, 16) != endpoint.port) continue;
      const std::string address = local.substr(0, colon);
      const bool wildcard = address.find_first_not_of('0') == std::string::npos;
      // The kernel prints an IPv4 address as the 32-bit value it stores, in host order.
      const bool same = ipv4 && address.size() == 8 &&
                        static_cast<uint32_t>(std::stoul(address, nullptr, 16)) == target.s_addr;
      if (same || (wildcard && loopback)) return inode;
    }
  }
  return 0;
}

// The process holding the socket `inode` open (only processes whose descriptors we may read).
std::optional<pid_t> processHoldingSocket(unsigned long inode) {
  const std::string wanted = "socket:[" + std::to_string(inode) + "]";
  std::error_code ec;
  for (const auto& process : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = process.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::error_code fdError;
    for (std::filesystem::directory_iterator fd(process.path() / "fd", fdError), end;
         !fdError && fd != end; fd.increment(fdError)) {
      std::error_code linkError;
      if (std::filesystem::read_symlink(fd->path(), linkError).string() == wanted)
        return static_cast<pid_t>(std::stol(name));
    }
  }
  return std::nullopt;
}

struct ServerFigures {
  long threads = -1, descriptors = -1, rssBytes = -1;
};

ServerFigures figuresOf(pid_t pid) {
  const std::filesystem::path dir = "/proc/" + std::to_string(pid);
  ServerFigures figures;
  std::ifstream status(dir / "status");
  for (std::string key; status >> key;) {
    if (key == "Threads:") status >> figures.threads;
    if (key == "VmRSS:" && status >> figures.rssBytes) figures.rssBytes *= 1024;
  }
  std::error_code ec;
  long descriptors = 0;
  for (std::filesystem::directory_iterator it(dir / "fd", ec), end; !ec && it != end;
       it.increment(ec))
    ++descriptors;
  if (!ec) figures.descriptors = descriptors;
  return figures;
}

json orNull(long value) { return value < 0 ? json(nullptr) : json(value); }

}  // namespace

Stats measureNullCall(const BenchDriver& d, bool quick) {
  return measure(100, latencyIterations(quick),
                 [&] { check(d, d.cuCtxSynchronize(), "cuCtxSynchronize"); });
}

json measureIdleClients(const BenchDriver& d, const transport::Endpoint& endpoint, unsigned count,
                        bool quick) {
  std::optional<pid_t> server;
  if (unsigned long inode = listeningInode(endpoint)) server = processHoldingSocket(inode);
  progress("null call, no idle clients");
  const Stats baseline = measureNullCall(d, quick);

  // Sampled right before the sessions open, so the baseline's own allocations are not counted.
  const ServerFigures before = server ? figuresOf(*server) : ServerFigures{};

  progress("opening " + std::to_string(count) + " idle client sessions");
  transport::raiseOpenFileLimit();  // each idle session holds a descriptor
  std::vector<std::unique_ptr<RawWire>> idle;
  idle.reserve(count);
  for (unsigned i = 0; i < count; ++i) {
    try {
      idle.push_back(std::make_unique<RawWire>(endpoint, wire::Hello::Purpose::DRIVER));
    } catch (const std::exception& e) {
      throw std::runtime_error("idle client " + std::to_string(i + 1) + " of " +
                               std::to_string(count) + ": " + e.what() +
                               " (descriptors: ulimit -n; sessions: the server's --max-sessions)");
    }
  }
  const ServerFigures loaded = server ? figuresOf(*server) : ServerFigures{};

  progress("null call, " + std::to_string(count) + " idle clients");
  const Stats withIdle = measureNullCall(d, quick);
  const double baselineUs = baseline.median * 1e6, loadedUs = withIdle.median * 1e6;
  // Signed: when the server returns more memory to the system meanwhile than the sessions
  // cost (seen under ASan), the measured difference is negative and is reported as measured.
  const json rssPerClient =
      loaded.rssBytes >= 0 && before.rssBytes >= 0 && count
          ? json((loaded.rssBytes - before.rssBytes) / static_cast<long>(count))
          : json(nullptr);
  return {{"count", count},
          {"null_call_us_baseline", baselineUs},
          {"null_call_us_loaded", loadedUs},
          {"ratio", loadedUs / baselineUs},
          {"server_pid", server ? json(*server) : json(nullptr)},
          {"server_threads", orNull(loaded.threads)},
          {"server_fds", orNull(loaded.descriptors)},
          {"rss_bytes_per_idle_client", rssPerClient}};
}

void printIdleClients(const json& idle) {
  const unsigned count = idle["count"].get<unsigned>();
  std::printf("\n  idle clients: %u authenticated driver sessions held open\n", count);
  std::printf(
      "  null call (cuCtxSynchronize), median: %.1f us with none, %.1f us with %u, ratio "
      "%.2f\n",
      idle["null_call_us_baseline"].get<double>(), idle["null_call_us_loaded"].get<double>(), count,
      idle["ratio"].get<double>());
  if (idle["server_pid"].is_null()) {
    std::printf(
        "  server process not found on this host: no thread, descriptor or memory "
        "figures\n");
    return;
  }
  auto figure = [&](const char* name) {
    return idle[name].is_null() ? std::string("?") : std::to_string(idle[name].get<long>());
  };
  std::printf(
      "  server (pid %d) with them open: %s threads, %s descriptors, %s bytes RSS per "
      "idle client\n",
      idle["server_pid"].get<int>(), figure("server_threads").c_str(), figure("server_fds").c_str(),
      figure("rss_bytes_per_idle_client").c_str());
}

}  // namespace gpupool::tools
