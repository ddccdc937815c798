#include "tools/bench_command.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <vector>

#include "tools/bench_driver.h"
#include "tools/bench_emu.h"
#include "tools/bench_graphs.h"
#include "tools/bench_host_functions.h"
#include "tools/bench_idle_clients.h"
#include "tools/bench_managed.h"
#include "tools/bench_plot.h"
#include "tools/bench_raw_verbs.h"
#include "tools/bench_raw_wire.h"
#include "tools/bench_stats.h"
#include "tools/bench_threads.h"
#include "tools/library_location.h"
#include "transport/endpoint.h"
#include "transport/transport_factory.h"

namespace gpupool::tools {
namespace {

using Clock = std::chrono::steady_clock;

std::string humanSize(size_t n) {
  char buf[32];
  if (n >= (1u << 20)) {
    std::snprintf(buf, sizeof buf, "%zu MiB", n >> 20);
  } else if (n >= 1024) {
    std::snprintf(buf, sizeof buf, "%zu KiB", n >> 10);
  } else {
    std::snprintf(buf, sizeof buf, "%zu B", n);
  }
  return buf;
}

// Whether p lies in a mapping of a memory file of our library's pinned memory.
bool inSharedPinnedFile(const void* p) {
  FILE* maps = std::fopen("/proc/self/maps", "r");
  if (!maps) return false;
  auto address = reinterpret_cast<uintptr_t>(p);
  bool found = false;
  char line[512];
  while (!found && std::fgets(line, sizeof line, maps)) {
    unsigned long begin = 0, end = 0;
    if (std::sscanf(line, "%lx-%lx", &begin, &end) == 2 && address >= begin && address < end)
      found = std::strstr(line, "memfd:gpupool-pinned") != nullptr;
  }
  std::fclose(maps);
  return found;
}

// Launches per burst of async_launch.burst_per_second.
constexpr size_t kLaunchBurst = 1000;

// The CUDA-side measurements, through whichever driver `d` is.
json measureDriver(BenchDriver& d, bool quick) {
  const Sizes sizes(quick);
  const size_t latencyIters = latencyIterations(quick);
  json out;
  const BenchContext context = openBenchContext(d);
  size_t maxSize = sizes.bandwidth.back();
  CUdeviceptr buffer = 0;
  check(d, d.cuMemAlloc(&buffer, maxSize), "cuMemAlloc");
  std::vector<uint8_t> pageable(maxSize, 0x5a);
  void* pinned = nullptr;
  check(d, d.cuMemHostAlloc(&pinned, maxSize, 0), "cuMemHostAlloc");
  std::memset(pinned, 0x5a, maxSize);
  // Over shm our library puts pinned memory in a file the server maps (docs/shm.md), so its
  // copies carry no bytes: say which kind the pinned figures below measured.
  out["pinned_host_memory"] =
      inSharedPinnedFile(pinned) ? "memory file mapped by the server" : "this process's memory";

  progress("null synchronous call");
  out["null_call"] = latencyJson(measureNullCall(d, quick));

  progress("small copy latency");
  json h2d = json::array(), d2h = json::array();
  for (size_t size : sizes.latency) {
    // Host-to-device returns before the copy completes, so the synchronize is part of the cost.
    h2d.push_back(sizedLatency(size, measure(50, latencyIters, [&] {
                                 check(d, d.cuMemcpyHtoD(buffer, pageable.data(), size),
                                       "cuMemcpyHtoD");
                                 check(d, d.cuCtxSynchronize(), "cuCtxSynchronize");
                               })));
    d2h.push_back(sizedLatency(size, measure(50, latencyIters, [&] {
                                 check(d, d.cuMemcpyDtoH(pageable.data(), buffer, size),
                                       "cuMemcpyDtoH");
                               })));
  }
  out["copy_latency"] = {{"h2d", h2d}, {"d2h", d2h}};

  progress("kernel launches");
  auto launch = [&] { launchEmptyKernel(d, context.emptyKernel, nullptr); };
  out["launch_sync"] = latencyJson(measure(50, quick ? 200 : 1000, [&] {
    launch();
    check(d, d.cuCtxSynchronize(), "cuCtxSynchronize");
  }));
  const size_t launches = quick ? 20000 : 100000;
  for (int i = 0; i < 100; ++i) launch();
  check(d, d.cuCtxSynchronize(), "cuCtxSynchronize");
  auto start = Clock::now();
  for (size_t i = 0; i < launches; ++i) launch();
  double issue = std::chrono::duration<double>(Clock::now() - start).count();
  check(d, d.cuCtxSynchronize(), "cuCtxSynchronize");
  double total = std::chrono::duration<double>(Clock::now() - start).count();
  // Bursts the size of a GPU's launch queue (about a thousand launches wait there before a
  // real driver's cuLaunchKernel blocks), each after a synchronize: what issuing costs the
  // caller while the link and the server keep up, where the long run above ends up paced by the
  // device once the buffers between them fill.
  const size_t bursts = quick ? 20 : 100;
  double burstIssue = 0;
  for (size_t b = 0; b < bursts; ++b) {
    auto burstStart = Clock::now();
    for (size_t i = 0; i < kLaunchBurst; ++i) launch();
    burstIssue += std::chrono::duration<double>(Clock::now() - burstStart).count();
    check(d, d.cuCtxSynchronize(), "cuCtxSynchronize");
  }
  out["async_launch"] = {
      {"launches", launches},
      {"per_second", static_cast<double>(launches) / issue},
      {"completed_per_second", static_cast<double>(launches) / total},
      {"burst_launches", kLaunchBurst},
      {"bursts", bursts},
      {"burst_per_second", static_cast<double>(bursts * kLaunchBurst) / burstIssue}};
  out["graphs"] = measureGraphs(d, context, quick);
  out["host_functions"] = measureHostFunctions(d, context, quick);
  out["managed"] = measureManaged(d, context, quick);

  progress("bandwidth");
  json bw;
  for (auto [name, host] : {std::pair<const char*, void*>{"pageable", pageable.data()},
                            std::pair<const char*, void*>{"pinned", pinned}}) {
    json up = json::array(), down = json::array();
    for (size_t size : sizes.bandwidth) {
      size_t iters = iterationsFor(size, quick);
      up.push_back(sizedBandwidth(size, measure(1, iters, [&] {
                                    check(d, d.cuMemcpyHtoD(buffer, host, size), "cuMemcpyHtoD");
                                    check(d, d.cuCtxSynchronize(), "cuCtxSynchronize");
                                  })));
      down.push_back(sizedBandwidth(size, measure(1, iters, [&] {
                                      check(d, d.cuMemcpyDtoH(host, buffer, size), "cuMemcpyDtoH");
                                    })));
    }
    bw[std::string("h2d_") + name] = up;
    bw[std::string("d2h_") + name] = down;
  }
  out["bandwidth"] = bw;
  d.cuMemFreeHost(pinned);
  d.cuMemFree(buffer);
  return out;
}

json measureRaw(RawWire& wire, bool quick) {
  const Sizes sizes(quick);
  const size_t latencyIters = latencyIterations(quick);
  json out;
  progress("raw round trip");
  out["rtt"] = latencyJson(measure(100, latencyIters, [&] { wire.pingPong(); }));
  std::vector<uint8_t> data(sizes.bandwidth.back(), 0xa5);
  json up = json::array(), down = json::array();
  for (size_t size : sizes.latency) {
    up.push_back(
        sizedLatency(size, measure(50, latencyIters, [&] { wire.toServer(data.data(), size); })));
    down.push_back(
        sizedLatency(size, measure(50, latencyIters, [&] { wire.fromServer(data.data(), size); })));
  }
  out["latency"] = {{"to_server", up}, {"from_server", down}};
  progress("raw stream throughput");
  json upBw = json::array(), downBw = json::array();
  for (size_t size : sizes.bandwidth) {
    size_t iters = iterationsFor(size, quick);
    upBw.push_back(
        sizedBandwidth(size, measure(1, iters, [&] { wire.toServer(data.data(), size); })));
    downBw.push_back(
        sizedBandwidth(size, measure(1, iters, [&] { wire.fromServer(data.data(), size); })));
  }
  out["bandwidth"] = {{"to_server", upBw}, {"from_server", downBw}};
  return out;
}

// The bandwidth at the largest size both series measured.
double largest(const json& series) { return series.back()["gb_per_s"].get<double>(); }

void printRawVerbs(const json& r) {
  const json& verbs = r["raw_verbs"];
  std::printf("\n  raw verbs on %s (as perftest measures; max inline %u B)\n",
              verbs["device"].get<std::string>().c_str(), verbs["max_inline"].get<unsigned>());
  std::printf("  %-12s %14s %14s     %-12s %12s\n", "size", "SEND/RECV RTT", "one way", "size",
              "WRITE GB/s");
  const json& lat = verbs["send_lat"];
  const json& bw = verbs["write_bw"];
  for (size_t i = 0; i < std::max(lat.size(), bw.size()); ++i) {
    if (i < lat.size()) {
      std::printf("  %-12s %11.1f us %11.1f us", humanSize(lat[i]["size"].get<size_t>()).c_str(),
                  lat[i]["median_us"].get<double>(), lat[i]["one_way_median_us"].get<double>());
    } else {
      std::printf("  %-12s %14s %14s", "", "", "");
    }
    if (i < bw.size()) {
      std::printf("     %-12s %12.3f", humanSize(bw[i]["size"].get<size_t>()).c_str(),
                  bw[i]["gb_per_s"].get<double>());
    }
    std::printf("\n");
  }
  const json& q = r["ratios"];
  std::printf(
      "  ratios to raw verbs: null call / SEND RTT = %.2f, raw wire RTT / SEND RTT = %.2f, "
      "H2D / WRITE = %.2f, D2H / WRITE = %.2f\n",
      q["null_call_rtt_vs_raw_verbs"].get<double>(), q["raw_wire_rtt_vs_raw_verbs"].get<double>(),
      q["h2d_bandwidth_vs_raw_verbs"].get<double>(), q["d2h_bandwidth_vs_raw_verbs"].get<double>());
}

void printShmComparison(const json& r);

void printText(const json& r) {
  std::printf("gpupool bench — %s, backend %s, transport %s%s\n\n",
              r["endpoint"].get<std::string>().c_str(), r["backend"].get<std::string>().c_str(),
              r["transport"].get<std::string>().c_str(), r["quick"].get<bool>() ? " (quick)" : "");
  auto row = [](const char* name, const json& s) {
    std::printf("  %-34s %10.1f %10.1f %10.1f %8zu\n", name, s["min_us"].get<double>(),
                s["median_us"].get<double>(), s["p99_us"].get<double>(),
                s["iterations"].get<size_t>());
  };
  std::printf("  %-34s %10s %10s %10s %8s\n", "latency (us)", "min", "median", "p99", "iters");
  row("raw round trip", r["raw"]["rtt"]);
  row("gpupool null call (cuCtxSynchronize)", r["gpupool"]["null_call"]);
  row("gpupool launch + synchronize", r["gpupool"]["launch_sync"]);
  const json& rawUp = r["raw"]["latency"]["to_server"];
  const json& rawDown = r["raw"]["latency"]["from_server"];
  const json& h2d = r["gpupool"]["copy_latency"]["h2d"];
  const json& d2h = r["gpupool"]["copy_latency"]["d2h"];
  for (size_t i = 0; i < rawUp.size(); ++i) {
    std::string size = humanSize(rawUp[i]["size"].get<size_t>());
    row(("raw to server " + size).c_str(), rawUp[i]);
    row(("gpupool H2D+sync " + size).c_str(), h2d[i]);
    row(("raw from server " + size).c_str(), rawDown[i]);
    row(("gpupool D2H " + size).c_str(), d2h[i]);
  }
  std::printf("\n  %-12s %12s %12s %12s %12s %12s %12s\n", "bandwidth", "raw up", "H2D page",
              "H2D pinned", "raw down", "D2H page", "D2H pinned");
  const json& bw = r["gpupool"]["bandwidth"];
  for (size_t i = 0; i < r["raw"]["bandwidth"]["to_server"].size(); ++i) {
    auto g = [&](const json& s) { return s[i]["gb_per_s"].get<double>(); };
    std::printf("  %-12s %10.2f GB/s %7.2f %12.2f %12.2f %12.2f %12.2f\n",
                humanSize(r["raw"]["bandwidth"]["to_server"][i]["size"].get<size_t>()).c_str(),
                g(r["raw"]["bandwidth"]["to_server"]), g(bw["h2d_pageable"]), g(bw["h2d_pinned"]),
                g(r["raw"]["bandwidth"]["from_server"]), g(bw["d2h_pageable"]),
                g(bw["d2h_pinned"]));
  }
  std::printf(
      "\n  async launches: %.0f per second from one thread (%.0f completed per second); in "
      "bursts of %zu: %.0f per second\n",
      r["async_launch"]["per_second"].get<double>(),
      r["async_launch"]["completed_per_second"].get<double>(),
      r["async_launch"]["burst_launches"].get<size_t>(),
      r["async_launch"]["burst_per_second"].get<double>());
  std::printf("  ratios: null call / raw RTT = %.2f, H2D / raw = %.2f, D2H / raw = %.2f\n",
              r["ratios"]["null_call_rtt_vs_raw"].get<double>(),
              r["ratios"]["h2d_bandwidth_vs_raw"].get<double>(),
              r["ratios"]["d2h_bandwidth_vs_raw"].get<double>());
  printGraphs(r["graphs"]);
  if (r.contains("host_functions")) printHostFunctions(r["host_functions"]);
  if (r.contains("managed")) printManaged(r["managed"]);
  printThreadSeries(r["threads"]);
  if (r.contains("idle_clients")) printIdleClients(r["idle_clients"]);
  if (r.contains("raw_verbs")) printRawVerbs(r);
  if (r.contains("tcp")) printShmComparison(r);
  if (r.contains("local")) std::printf("  (a local-driver column is in the --json output)\n");
}

std::vector<PlotPanel> plotPanels(const json& r) {
  auto latencySeries = [](const char* name, const json& s) {
    PlotSeries out{name, {}};
    for (auto& p : s)
      out.points.emplace_back(p["size"].get<double>(), p["median_us"].get<double>());
    return out;
  };
  auto bandwidthSeries = [](const char* name, const json& s) {
    PlotSeries out{name, {}};
    for (auto& p : s) out.points.emplace_back(p["size"].get<double>(), p["gb_per_s"].get<double>());
    return out;
  };
  PlotPanel latency{"Small-transfer latency (median)", "microseconds", true, {}};
  latency.series.push_back(latencySeries("raw to server", r["raw"]["latency"]["to_server"]));
  latency.series.push_back(
      latencySeries("gpupool H2D + sync", r["gpupool"]["copy_latency"]["h2d"]));
  latency.series.push_back(latencySeries("raw from server", r["raw"]["latency"]["from_server"]));
  latency.series.push_back(latencySeries("gpupool D2H", r["gpupool"]["copy_latency"]["d2h"]));
  PlotPanel bandwidth{"Bandwidth", "GB/s", false, {}};
  bandwidth.series.push_back(bandwidthSeries("raw to server", r["raw"]["bandwidth"]["to_server"]));
  bandwidth.series.push_back(
      bandwidthSeries("gpupool H2D pinned", r["gpupool"]["bandwidth"]["h2d_pinned"]));
  bandwidth.series.push_back(
      bandwidthSeries("raw from server", r["raw"]["bandwidth"]["from_server"]));
  bandwidth.series.push_back(
      bandwidthSeries("gpupool D2H pinned", r["gpupool"]["bandwidth"]["d2h_pinned"]));
  if (r.contains("raw_verbs")) {
    latency.series.push_back(latencySeries("raw verbs SEND/RECV RTT", r["raw_verbs"]["send_lat"]));
    bandwidth.series.push_back(bandwidthSeries("raw verbs RDMA WRITE", r["raw_verbs"]["write_bw"]));
  }
  return {latency, bandwidth};
}

// This environment with `changes` applied (a value sets the variable, nullopt removes it).
std::vector<std::string> environmentWith(
    const std::vector<std::pair<std::string, std::optional<std::string>>>& changes) {
  std::vector<std::string> out;
  for (char** e = environ; *e; ++e) {
    std::string entry = *e;
    std::string name = entry.substr(0, entry.find('='));
    bool changed = std::any_of(changes.begin(), changes.end(),
                               [&](const auto& change) { return change.first == name; });
    if (!changed) out.push_back(std::move(entry));
  }
  for (const auto& [name, value] : changes) {
    if (value) out.push_back(name + "=" + *value);
  }
  return out;
}

// Runs this executable again as `gpupool bench ARGS` in `environment` and parses the JSON it
// prints; nullopt when it fails. Measurements that need a process of their own go through here:
// two libcuda.so.1 cannot share a process, and the client reads its settings when its session
// opens. posix_spawn, because this process already runs the client's threads.
std::optional<json> benchChild(const std::vector<std::string>& benchArgs,
                               std::vector<std::string> environment) {
  std::error_code ec;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (ec) return std::nullopt;
  std::vector<std::string> args = {self, "bench"};
  args.insert(args.end(), benchArgs.begin(), benchArgs.end());
  auto pointers = [](std::vector<std::string>& strings) {
    std::vector<char*> out;
    for (auto& s : strings) out.push_back(s.data());
    out.push_back(nullptr);
    return out;
  };
  std::vector<char*> argv = pointers(args);
  std::vector<char*> envp = pointers(environment);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return std::nullopt;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  pid_t pid = 0;
  int spawned = posix_spawn(&pid, self.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (spawned != 0) {
    close(fds[0]);
    return std::nullopt;
  }
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
  try {
    return json::parse(text);
  } catch (...) {
    return std::nullopt;
  }
}

// The arguments of a child that measures the driver at `path` with `option`.
std::vector<std::string> childArguments(const char* option, const std::string& path, bool quick) {
  std::vector<std::string> args = {option, path};
  if (quick) args.push_back("--quick");
  return args;
}

// A real driver, measured in a child process away from gpupool's endpoint.
std::optional<json> measureLocalDriver(const std::string& path, bool quick) {
  return benchChild(childArguments("--driver-only", path, quick),
                    environmentWith({{"GPU_POOL_ENDPOINT", std::nullopt}}));
}

// The threads series through gpupool's library at `path`, serialized and not, one child process
// each; nullopt when either fails.
std::optional<json> measureThreadSeries(const std::string& path, bool quick) {
  const std::vector<std::string> args = childArguments("--threads-only", path, quick);
  progress("threads, serialized calls");
  auto serialized = benchChild(args, environmentWith({{kSerializeCallsVariable, "1"}}));
  if (!serialized) return std::nullopt;
  progress("threads, concurrent calls");
  auto concurrent = benchChild(args, environmentWith({{kSerializeCallsVariable, std::nullopt}}));
  if (!concurrent) return std::nullopt;
  return mergeThreadSeries(*concurrent, *serialized);
}

// Where `--transport` points the run: rdma measures over rdma:// (a tcp:// endpoint is replaced by
// the RDMA endpoint the server advertises) and adds the raw-verbs column; shm measures over the
// list's shm:// endpoint and, in the same run, the null call over its tcp:// one; tcp keeps to TCP.
struct BenchTarget {
  transport::Endpoint endpoint;
  bool rdma = false;
  std::optional<transport::Endpoint> tcpToCompare;  // shm only
};

std::optional<BenchTarget> shmTarget(const std::vector<transport::Endpoint>& endpoints,
                                     std::string* error) {
  BenchTarget target;
  bool shm = false;
  for (const auto& e : endpoints) {
    if (e.scheme == "shm" && !shm) {
      target.endpoint = e;
      shm = true;
    }
    if (e.scheme == "tcp" && !target.tcpToCompare) target.tcpToCompare = e;
  }
  if (!shm || !target.tcpToCompare) {
    *error =
        "--transport shm measures shm:// and, in the same run, TCP to the same server: give both, "
        "e.g. --endpoint shm:///run/gpupool.sock,tcp://127.0.0.1:7000";
    return std::nullopt;
  }
  return target;
}

std::optional<BenchTarget> benchTarget(const std::vector<transport::Endpoint>& endpoints,
                                       const std::optional<std::string>& transportOption,
                                       std::string* error) {
  const transport::Endpoint& given = endpoints.front();
  std::string wanted = transportOption.value_or(
      given.scheme == "rdma" ? "rdma" : (given.scheme == "shm" ? "shm" : "tcp"));
  if (wanted == "shm") return shmTarget(endpoints, error);
  if (given.scheme == "shm") {
    *error = "an shm:// endpoint is measured with --transport shm";
    return std::nullopt;
  }
  if (wanted == "tcp") {
    BenchTarget target{given, false, std::nullopt};
    if (given.scheme == "rdma") target.endpoint.scheme = "tcp";
    return target;
  }
  if (wanted != "rdma") {
    *error = "--transport must be tcp, rdma or shm, not '" + wanted + "'";
    return std::nullopt;
  }
  if (std::string why = transport::transportUnavailableReason("rdma"); !why.empty()) {
    *error = "--transport rdma: RDMA cannot be used here: " + why;
    return std::nullopt;
  }
  if (given.scheme == "rdma") return BenchTarget{given, true, std::nullopt};
  std::string advertised;
  try {
    advertised = RawWire(given).rdmaEndpoint();
  } catch (const std::exception& e) {
    *error = "cannot reach " + given.url() + ": " + e.what();
    return std::nullopt;
  }
  if (advertised.empty()) {
    *error = given.url() + " does not listen for RDMA (start gpupoold with --rdma-listen)";
    return std::nullopt;
  }
  auto endpoint = transport::parseEndpoint(advertised, error);
  if (!endpoint) return std::nullopt;
  return BenchTarget{*endpoint, true, std::nullopt};
}

// This machine's memcpy bandwidth at 64 MiB: what copying through shared memory is bounded by.
json measureMemcpy(bool quick) {
  progress("memcpy");
  constexpr size_t kBytes = 64u << 20;
  std::vector<uint8_t> from(kBytes, 0x5a), to(kBytes, 0);
  return sizedBandwidth(kBytes, measure(1, iterationsFor(kBytes, quick),
                                        [&] { std::memcpy(to.data(), from.data(), kBytes); }));
}

// The same run's null call and raw round trip over TCP, for `--transport shm`: the library in a
// child process of its own (one session per process), pointed at `tcp`.
std::optional<json> measureTcpToCompare(const transport::Endpoint& tcp, const std::string& library,
                                        bool quick) {
  progress("TCP, to compare: raw round trip");
  RawWire wire(tcp);
  json out;
  out["endpoint"] = tcp.url();
  out["raw_rtt"] = latencyJson(measure(100, latencyIterations(quick), [&] { wire.pingPong(); }));
  progress("TCP, to compare: the library");
  auto driver = benchChild(
      childArguments("--driver-only", library, quick),
      environmentWith({{"GPU_POOL_ENDPOINT", tcp.url()}, {"GPU_POOL_TRANSPORT", "tcp"}}));
  if (!driver) return std::nullopt;
  out["null_call"] = (*driver)["null_call"];
  return out;
}

void addShmRatios(json& result) {
  const json& tcp = result["tcp"];
  json& ratios = result["ratios"];
  ratios["null_call_shm_vs_tcp"] = result["gpupool"]["null_call"]["median_us"].get<double>() /
                                   tcp["null_call"]["median_us"].get<double>();
  ratios["raw_rtt_shm_vs_tcp"] =
      result["raw"]["rtt"]["median_us"].get<double>() / tcp["raw_rtt"]["median_us"].get<double>();
  double memcpyBandwidth = result["memcpy"]["gb_per_s"].get<double>();
  ratios["h2d_bandwidth_vs_memcpy"] =
      largest(result["gpupool"]["bandwidth"]["h2d_pinned"]) / memcpyBandwidth;
  ratios["d2h_bandwidth_vs_memcpy"] =
      largest(result["gpupool"]["bandwidth"]["d2h_pinned"]) / memcpyBandwidth;
}

void printShmComparison(const json& r) {
  const json& tcp = r["tcp"];
  const json& q = r["ratios"];
  std::printf("\n  same run over %s: raw round trip %.1f us, null call %.1f us (medians)\n",
              tcp["endpoint"].get<std::string>().c_str(), tcp["raw_rtt"]["median_us"].get<double>(),
              tcp["null_call"]["median_us"].get<double>());
  std::printf(
      "  ratios shm / tcp: null call = %.2f, raw round trip = %.2f; memcpy %.2f GB/s, pinned H2D / "
      "memcpy = %.2f, D2H / memcpy = %.2f\n",
      q["null_call_shm_vs_tcp"].get<double>(), q["raw_rtt_shm_vs_tcp"].get<double>(),
      r["memcpy"]["gb_per_s"].get<double>(), q["h2d_bandwidth_vs_memcpy"].get<double>(),
      q["d2h_bandwidth_vs_memcpy"].get<double>());
}

// gpupool against the device itself: the null call against a SEND/RECV round trip of the
// smallest size, pinned copies against RDMA WRITE streaming at the largest size.
void addRawVerbsRatios(json& result) {
  const json& verbs = result["raw_verbs"];
  const json& bw = result["gpupool"]["bandwidth"];
  double verbsRtt = verbs["send_lat"].front()["median_us"].get<double>();
  double verbsBandwidth = largest(verbs["write_bw"]);
  json& ratios = result["ratios"];
  ratios["null_call_rtt_vs_raw_verbs"] =
      result["gpupool"]["null_call"]["median_us"].get<double>() / verbsRtt;
  ratios["raw_wire_rtt_vs_raw_verbs"] = result["raw"]["rtt"]["median_us"].get<double>() / verbsRtt;
  ratios["h2d_bandwidth_vs_raw_verbs"] = largest(bw["h2d_pinned"]) / verbsBandwidth;
  ratios["d2h_bandwidth_vs_raw_verbs"] = largest(bw["d2h_pinned"]) / verbsBandwidth;
  ratios["h2d_pageable_bandwidth_vs_raw_verbs"] = largest(bw["h2d_pageable"]) / verbsBandwidth;
  ratios["d2h_pageable_bandwidth_vs_raw_verbs"] = largest(bw["d2h_pageable"]) / verbsBandwidth;
}

// A child's side of benchChild: loads the driver at `path`, measures, prints the JSON.
int printChildMeasurement(const std::string& path,
                          const std::function<json(BenchDriver&)>& measurement) {
  std::string error;
  auto driver = BenchDriver::load(path, &error);
  if (!driver) {
    std::cerr << "gpupool bench: " << error << "\n";
    return 2;
  }
  try {
    std::cout << measurement(*driver).dump() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "gpupool bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

// `gpupool bench --emu`: the interpreter's throughput, with the settings that say what ran.
static int benchEmu(const BenchOptions& options) {
  json result;
  result["quick"] = options.quick;
  try {
    progress(
        "emu interpreter: matmul, vector_add, divergent_reduce with 1 and 2 threads, and with 1 "
        "on the generic path");
    json settings;
    result["emu"] = measureEmu(options.quick, &settings);
    result["emu_settings"] = settings;
    // Fast steps against the generic path, one thread each, same run.
    for (const auto& [kernel, rates] : result["emu"].items()) {
      result["ratios"]["emu_" + kernel + "_vs_generic_path"] =
          rates["threads_1"].get<double>() / rates["generic_path_threads_1"].get<double>();
    }
  } catch (const std::exception& e) {
    std::cerr << "gpupool bench --emu: " << e.what() << "\n";
    return 1;
  }
  if (options.json) {
    std::cout << result.dump(2) << "\n";
  } else {
    printEmu(result["emu"], result["emu_settings"], result["ratios"]);
  }
  return 0;
}

int benchCommand(const BenchOptions& options) {
  std::string error;
  if (options.emu) return benchEmu(options);
  if (options.driverOnly) {
    return printChildMeasurement(*options.driverOnly,
                                 [&](BenchDriver& d) { return measureDriver(d, options.quick); });
  }
  if (options.threadsOnly) {
    return printChildMeasurement(*options.threadsOnly, [&](BenchDriver& d) {
      return measureThreads(d, openBenchContext(d), options.quick);
    });
  }

  std::string endpointText;
  if (options.endpoint) {
    endpointText = *options.endpoint;
  } else if (const char* e = std::getenv("GPU_POOL_ENDPOINT"); e && *e) {
    endpointText = e;
  } else {
    std::cerr << "gpupool bench: no endpoint: pass --endpoint or set GPU_POOL_ENDPOINT\n";
    return 2;
  }
  auto endpoints = transport::parseEndpointList(endpointText, &error);
  if (!endpoints) {
    std::cerr << "gpupool bench: " << error << "\n";
    return 2;
  }
  auto target = benchTarget(*endpoints, options.transport, &error);
  if (!target) {
    std::cerr << "gpupool bench: " << error << "\n";
    return 2;
  }
  const transport::Endpoint& endpoint = target->endpoint;
  auto libraryDir = libraryDirectory(&error);
  if (!libraryDir) {
    std::cerr << "gpupool bench: " << error << "\n";
    return 2;
  }

  json result;
  result["endpoint"] = endpoint.url();
  result["quick"] = options.quick;
  try {
    std::unique_ptr<RawWire> wire;
    try {
      wire = std::make_unique<RawWire>(endpoint);
    } catch (const std::exception& e) {
      std::cerr << "gpupool: cannot reach " << endpoint.url() << ": " << e.what() << "\n";
      return 2;
    }
    result["backend"] = wire->backend();
    result["transport"] = wire->transport();
    result["raw"] = measureRaw(*wire, options.quick);
    if (target->rdma) result["raw_verbs"] = measureRawVerbs(endpoint, options.quick);

    setenv("GPU_POOL_ENDPOINT", endpoint.url().c_str(), 1);
    // Over tcp:// the library would switch to a server's advertised RDMA endpoint by itself.
    if (!target->rdma) setenv("GPU_POOL_TRANSPORT", "tcp", 1);
    const std::string library = (*libraryDir / "libcuda.so.1").string();
    auto driver = BenchDriver::load(library, &error);
    if (!driver) {
      std::cerr << "gpupool bench: " << error << "\n";
      return 2;
    }
    json g = measureDriver(*driver, options.quick);
    result["async_launch"] = g["async_launch"];
    result["graphs"] = g["graphs"];
    result["managed"] = g["managed"];
    result["host_functions"] = g["host_functions"];
    g.erase("async_launch");
    g.erase("graphs");
    g.erase("managed");
    g.erase("host_functions");
    result["gpupool"] = g;
    // The library's session is still open: the server says which transport it really used.
    std::string used = wire->sessionTransport("(pid " + std::to_string(getpid()) + ")");
    if (used != wire->transport()) {
      std::cerr << "gpupool bench: the library's session ran over '" << used << "', not "
                << wire->transport() << "; its figures would not compare\n";
      return 1;
    }
    auto threads = measureThreadSeries(library, options.quick);
    if (!threads) {
      std::cerr << "gpupool bench: the threads series could not be measured\n";
      return 1;
    }
    result["threads"] = *threads;
    result["threads_settings"] = threadSeriesSettings(options.quick);
    if (target->tcpToCompare) {
      auto tcp = measureTcpToCompare(*target->tcpToCompare, library, options.quick);
      if (!tcp) {
        std::cerr << "gpupool bench: the null call over " << target->tcpToCompare->url()
                  << " could not be measured\n";
        return 1;
      }
      result["tcp"] = *tcp;
      result["memcpy"] = measureMemcpy(options.quick);
    }
    if (options.idleClients) {
      openBenchContext(*driver);  // current on this thread again
      result["idle_clients"] =
          measureIdleClients(*driver, endpoint, *options.idleClients, options.quick);
    }
  } catch (const std::exception& e) {
    std::cerr << "gpupool bench: measurement failed: " << e.what() << "\n";
    return 1;
  }

  const json& raw = result["raw"];
  const json& bw = result["gpupool"]["bandwidth"];
  result["ratios"] = {
      {"null_call_rtt_vs_raw", result["gpupool"]["null_call"]["median_us"].get<double>() /
                                   raw["rtt"]["median_us"].get<double>()},
      {"h2d_bandwidth_vs_raw", largest(bw["h2d_pinned"]) / largest(raw["bandwidth"]["to_server"])},
      {"d2h_bandwidth_vs_raw",
       largest(bw["d2h_pinned"]) / largest(raw["bandwidth"]["from_server"])},
      {"h2d_pageable_bandwidth_vs_raw",
       largest(bw["h2d_pageable"]) / largest(raw["bandwidth"]["to_server"])},
      {"d2h_pageable_bandwidth_vs_raw",
       largest(bw["d2h_pageable"]) / largest(raw["bandwidth"]["from_server"])},
      {"bandwidth_size", raw["bandwidth"]["to_server"].back()["size"]}};
  if (result.contains("raw_verbs")) addRawVerbsRatios(result);
  if (result.contains("tcp")) addShmRatios(result);

  std::string local = options.localDriver.value_or("");
  if (local == "auto") {
    local.clear();
    for (const char* candidate :
         {"/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/lib64/libcuda.so.1"}) {
      if (access(candidate, R_OK) == 0) local = candidate;
    }
  }
  if (!local.empty()) {
    progress("local driver " + local);
    if (auto measured = measureLocalDriver(local, options.quick)) {
      result["local"] = *measured;
    } else {
      std::cerr << "gpupool bench: the local driver " << local << " could not be measured\n";
    }
  }

  if (options.plot) {
    if (!writePlot(*options.plot, plotPanels(result), &error)) {
      std::cerr << "gpupool bench: " << error << "\n";
      return 1;
    }
  }
  if (options.json) {
    std::cout << result.dump(2) << "\n";
  } else {
    printText(result);
  }
  return 0;
}

}  // namespace gpupool::tools
