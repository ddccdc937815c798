// The raw-verbs column of `gpupool bench --transport rdma`: what the RDMA device itself gives
// between this machine and the server, measured as perftest does (ib_send_lat: SEND/RECV
// ping-pong; ib_write_bw: streamed RDMA WRITEs) at the sizes the gpupool columns use.
#pragma once

#include "tools/bench_stats.h"
#include "transport/endpoint.h"

namespace gpupool::tools {

// Connects to the server's raw-verbs baseline at `rdmaEndpoint` and measures it. Throws
// transport::TransportError when the server or the device cannot run it.
json measureRawVerbs(const transport::Endpoint& rdmaEndpoint, bool quick);

}  // namespace gpupool::tools
