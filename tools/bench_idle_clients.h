// The idle-clients series of `gpupool bench --idle-clients N`: the null call measured with no
// other client, then again with N authenticated driver sessions held open and idle, and their
// ratio; when the server runs on this host (found by the socket listening on the endpoint's
// port), its threads and descriptors with the N sessions open and its memory per idle session.
#pragma once

#include "tools/bench_driver.h"
#include "tools/bench_stats.h"
#include "transport/endpoint.h"

namespace gpupool::tools {

inline constexpr unsigned kDefaultIdleClients = 1000;

// The bench's null call: cuCtxSynchronize on the current context, round trip to the server.
Stats measureNullCall(const BenchDriver& d, bool quick);

// {"count", "null_call_us_baseline", "null_call_us_loaded", "ratio", "server_pid",
//  "server_threads", "server_fds", "rss_bytes_per_idle_client"} (the server figures null when its
// process is not found), measured through `d` (a context current on the calling thread) with
// `count` idle sessions to `endpoint`. Throws std::runtime_error when the sessions cannot be
// opened (e.g. too few descriptors).
json measureIdleClients(const BenchDriver& d, const transport::Endpoint& endpoint, unsigned count,
                        bool quick);

void printIdleClients(const json& idle);

}  // namespace gpupool::tools
