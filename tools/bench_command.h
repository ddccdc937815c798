// `gpupool bench`: what gpupool costs, measured against the raw wire in the same run.
//
// The raw baseline uses the same connection type to the same server, with requests the server
// answers without any CUDA processing (ping, sink, source). The gpupool side drives the real
// libcuda.so.1 through the driver API. Ratios compare the two at the same sizes.
#pragma once

#include <optional>
#include <string>

namespace gpupool::tools {

struct BenchOptions {
  std::optional<std::string> endpoint;  // else GPU_POOL_ENDPOINT
  bool json = false;
  bool quick = false;               // a run under ~20 s
  std::optional<std::string> plot;  // SVG file to write
  // A real CUDA driver to measure as a third column (default: none; "auto" probes the usual path).
  std::optional<std::string> localDriver;
  // "tcp" or "rdma" (default: rdma for an rdma:// endpoint, else tcp). rdma adds a raw-verbs
  // baseline (SEND/RECV ping-pong, RDMA WRITE bandwidth) on the same device in the same run.
  std::optional<std::string> transport;
  // Also measure the null call with this many idle authenticated sessions held open
  // (tools/bench_idle_clients.h).
  std::optional<unsigned> idleClients;
  // Measure the emu device's interpreter in this process instead (tools/bench_emu.h): no server.
  bool emu = false;
  // Internal: measure only the driver at this path and print its JSON (used for the local column).
  std::optional<std::string> driverOnly;
  // Internal: measure only the threads series through gpupool's library at this path and print its
  // JSON (used for the serialized and the concurrent run).
  std::optional<std::string> threadsOnly;
};

// Returns 0 on success, 1 when a measurement failed, 2 for usage or connection problems.
int benchCommand(const BenchOptions& options);

}  // namespace gpupool::tools
