// `gpupool status`: asks a server what it serves and who is using it.
#pragma once

#include <optional>
#include <string>

namespace gpupool::tools {

struct StatusOptions {
  std::optional<std::string> endpoint;  // --endpoint; else the first of GPU_POOL_ENDPOINT
  bool json = false;                    // machine-readable output
};

// Connects, says Hello (purpose status), reads the Welcome, requests the status and prints it on
// stdout. Returns 0 on success, 1 when the server refuses or answers with an error, 2 for a usage
// or connection problem (message on stderr, e.g. "gpupool: cannot reach tcp://h:p: <reason>").
//
// --json prints one object:
//   {"server_version", "backend", "devices": [{"index", "name", "memory_used", "memory_total",
//    "sessions", "utilization", "uuid" ("GPU-…"/"MIG-…"),
//    ["parent", "profile" for MIG instances, where the server has NVML]}],
//    "sessions": [{"id", "client", "memory_used", "transport", ["tenant"]}],
//    "tenants": [{"name", "memory_used", "memory_quota", "priority", "weight", "sessions",
//                 "gpu_seconds", "gib_seconds", "queue_seconds", "bytes_in", "bytes_out",
//                 "calls", "launches"}]}   (tenants: empty when the server runs without --config)
int statusCommand(const StatusOptions& options);

}  // namespace gpupool::tools
