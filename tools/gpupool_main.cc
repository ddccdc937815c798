// gpupool: the command-line tool for a GPU pool (run programs against it, inspect servers).
//
// Exit codes: 0 ok, 1 server error, 2 usage or connection error; `run` returns the program's own
// status (it replaces this process) or 127 when the program cannot be started.
#include <CLI/CLI.hpp>
#include <string>

#include "tools/bench_command.h"
#include "tools/bench_idle_clients.h"
#include "tools/run_command.h"
#include "tools/smi_command.h"
#include "tools/status_command.h"
#include "tools/top_command.h"
#include "tools/usage_command.h"

namespace {

constexpr int kUsageError = 2;

}  // namespace

int main(int argc, char** argv) {
  using namespace gpupool::tools;
  CLI::App app{"gpupool: use and inspect a pool of remote GPUs", "gpupool"};
  app.set_version_flag("--version", std::string("gpupool ") + GPUPOOL_VERSION);
  app.require_subcommand(1);

  RunOptions run;
  CLI::App* runCommandLine = app.add_subcommand(
      "run", "Run a program with gpupool's libcuda.so.1 in front, talking to a pool server");
  runCommandLine->add_option("--endpoint", run.endpoint,
                             "Server(s), tcp://HOST:PORT[,...] (default: $GPU_POOL_ENDPOINT)");
  runCommandLine->add_option("command", run.command, "The program and its arguments, after --")
      ->required();
  runCommandLine->footer(
      "Example: gpupool run --endpoint tcp://gpuhost:7000 -- ./train --epochs 3\n"
      "The library directory is <gpupool>/../lib unless GPU_POOL_LIBRARY_DIR is set.");

  StatusOptions status;
  CLI::App* statusCommandLine =
      app.add_subcommand("status", "Show a server's devices and sessions");
  statusCommandLine->add_option("--endpoint", status.endpoint,
                                "Server, tcp://HOST:PORT (default: the first of "
                                "$GPU_POOL_ENDPOINT)");
  statusCommandLine->add_flag("--json", status.json, "Print JSON instead of text");

  TopOptions top;
  CLI::App* topCommandLine =
      app.add_subcommand("top", "Show a server's devices, tenants and sessions live, like status");
  topCommandLine->add_option("--endpoint", top.endpoint,
                             "Server, tcp://HOST:PORT (default: the first of $GPU_POOL_ENDPOINT)");
  topCommandLine->add_option("--interval", top.intervalSeconds, "Seconds between frames")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  topCommandLine->add_flag("--once", top.once,
                           "Print one frame as plain text and exit (also when stdout is not a "
                           "terminal)");
  topCommandLine->add_option("--iterations", top.iterations, "Draw this many frames, then exit")
      ->check(CLI::Range(1u, 1000000u));
  topCommandLine->footer("Keys: q or Ctrl-C quits.");

  BenchOptions bench;
  CLI::App* benchCommandLine = app.add_subcommand(
      "bench", "Measure gpupool's latency and bandwidth against the raw wire, in one run");
  benchCommandLine->add_option(
      "--endpoint", bench.endpoint,
      "Server, tcp://HOST:PORT (default: the first of $GPU_POOL_ENDPOINT)");
  benchCommandLine->add_flag("--json", bench.json, "Print JSON instead of a table");
  benchCommandLine->add_flag("--quick", bench.quick, "A short run (under ~20 s)");
  benchCommandLine->add_option("--plot", bench.plot,
                               "Also draw latency and bandwidth against size into this SVG file");
  benchCommandLine->add_option("--local-driver", bench.localDriver,
                               "Also measure a real CUDA driver on this machine (a path, or auto)");
  benchCommandLine->add_option("--transport", bench.transport,
                               "tcp, rdma or shm (default: the endpoint's); rdma adds a raw "
                               "verbs baseline on the same device; shm (--endpoint "
                               "shm:///PATH,tcp://HOST:PORT) adds TCP's null call and memcpy "
                               "bandwidth from the same run");
  benchCommandLine
      ->add_option("--idle-clients", bench.idleClients,
                   "Also measure the null call with N idle authenticated sessions held open (N "
                   "defaults to " +
                       std::to_string(kDefaultIdleClients) +
                       "), and, for a server on this host, its threads, descriptors and memory per "
                       "idle session")
      ->expected(0, 1)
      ->default_str(std::to_string(kDefaultIdleClients));
  benchCommandLine->add_flag("--emu", bench.emu,
                             "Measure the emu device's PTX interpreter instead, in this process "
                             "(thread-instructions per second of three kernels, one and two "
                             "interpreter threads); needs no server");
  benchCommandLine->add_option("--driver-only", bench.driverOnly)->group("");    // internal
  benchCommandLine->add_option("--threads-only", bench.threadsOnly)->group("");  // internal
  benchCommandLine->footer(
      "Ratios compare gpupool with the raw wire measured in the same run on the same connection\n"
      "type. Progress goes to stderr; results to stdout.");

  SmiOptions smi;
  bool smiList = false, smiHelpQuery = false;
  CLI::App* smiCommandLine = app.add_subcommand(
      "smi", "Show the GPUs this client sees, like nvidia-smi (through gpupool's NVML library)");
  smiCommandLine->add_option("--endpoint", smi.endpoint,
                             "Server(s), tcp://HOST:PORT[,...] (default: $GPU_POOL_ENDPOINT)");
  smiCommandLine->add_flag("-L,--list-gpus", smiList, "List the GPUs with their UUIDs");
  smiCommandLine->add_option("--query-gpu", smi.queryGpu,
                             "Print these fields, comma-separated (see --help-query-gpu)");
  smiCommandLine->add_option("--format", smi.format,
                             "With --query-gpu: csv, optionally ,noheader and ,nounits");
  smiCommandLine->add_flag("--help-query-gpu", smiHelpQuery, "List the fields --query-gpu knows");
  smiCommandLine->add_option("-i,--id", smi.ids,
                             "Only these GPUs: indices or UUIDs, comma-separated");
  CLI::App* dmonCommandLine = smiCommandLine->add_subcommand(
      "dmon", "One line per GPU and interval: power, temperature, utilization, memory, clocks");
  CLI::App* pmonCommandLine = smiCommandLine->add_subcommand(
      "pmon", "One line per process and interval: which process holds which GPU, and how much");
  for (CLI::App* monitor : {dmonCommandLine, pmonCommandLine}) {
    monitor->add_option("-c,--count", smi.count, "Stop after this many intervals (default: never)");
    monitor->add_option("-d,--delay", smi.delaySeconds, "Seconds between intervals")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    monitor->add_option("-i,--id", smi.ids, "Only these GPUs: indices or UUIDs, comma-separated");
  }
  smiCommandLine->footer(
      "Examples: gpupool smi    gpupool smi -L    gpupool smi dmon -c 5\n"
      "  gpupool smi --query-gpu=index,name,memory.used,memory.total --format=csv,noheader\n"
      "Exit codes: 0 ok, 1 server or NVML error, 2 usage error or no server.");

  UsageOptions usage;
  CLI::App* usageCommandLine = app.add_subcommand(
      "usage", "Report usage per tenant and device from gpupoold's metering database (billing)");
  usageCommandLine
      ->add_option("--db", usage.database,
                   "The metering database ([metering] database in the pool "
                   "configuration; default <config>.usage.db)")
      ->required();
  usageCommandLine->add_option("--since", usage.since,
                               "Only records since a UTC date (2024-05-01[T08:00:00]) or an age "
                               "(90m, 12h, 7d)");
  usageCommandLine->add_flag("--json", usage.json, "Print JSON instead of a table");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);  // prints help, the version, or the error with a usage hint
    return code == 0 ? 0 : kUsageError;
  }

  if (runCommandLine->parsed()) return runCommand(run);
  if (statusCommandLine->parsed()) return statusCommand(status);
  if (topCommandLine->parsed()) return topCommand(top);
  if (benchCommandLine->parsed()) return benchCommand(bench);
  if (usageCommandLine->parsed()) return usageCommand(usage);
  if (smiCommandLine->parsed()) {
    if (smiHelpQuery) {
      printSmiQueryFields();
      return 0;
    }
    if (dmonCommandLine->parsed()) {
      smi.view = SmiOptions::View::kDeviceMonitor;
    } else if (pmonCommandLine->parsed()) {
      smi.view = SmiOptions::View::kProcessMonitor;
    } else if (smiList) {
      smi.view = SmiOptions::View::kList;
    } else if (!smi.queryGpu.empty() || !smi.format.empty()) {
      smi.view = SmiOptions::View::kQuery;
    }
    return smiCommand(smi);
  }
  return kUsageError;  // unreachable: a subcommand is required
}
