// `gpupool usage`: the billing report, read from gpupoold's metering database (SQLite), so it works
// whether or not the server runs.
#pragma once

#include <optional>
#include <string>

namespace gpupool::tools {

struct UsageOptions {
  std::string database;              // --db; the server's [metering] database
  std::optional<std::string> since;  // --since: "2024-05-01", "2024-05-01T08:00:00" (UTC), or
                                     // an age such as "90m", "12h", "7d"
  bool json = false;
};

// Prints usage per tenant and device since `since` (default: all records). Returns 0, or 2 with a
// message on stderr when the database cannot be read or --since is not understood.
//
// --json prints {"since": <unix seconds>, "usage": [{"tenant", "device", "gpu_seconds",
// "gib_seconds", "queue_seconds", "bytes_in", "bytes_out", "calls", "launches"}],
// "tenants": [{"tenant", <the same sums over devices>}]}. Device -1 holds calls outside a context.
int usageCommand(const UsageOptions& options);

// Parses a --since value into Unix seconds relative to `now`; nullopt when it is not understood.
std::optional<double> parseSince(const std::string& text, double now);

}  // namespace gpupool::tools
