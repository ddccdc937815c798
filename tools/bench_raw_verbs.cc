#include "tools/bench_raw_verbs.h"

#include <algorithm>
#include <chrono>

#include "transport/link_baseline.h"

namespace gpupool::tools {

json measureRawVerbs(const transport::Endpoint& rdmaEndpoint, bool quick) {
  const Sizes sizes(quick);
  size_t maxMessage = *std::max_element(sizes.latency.begin(), sizes.latency.end());
  size_t sinkBytes = *std::max_element(sizes.bandwidth.begin(), sizes.bandwidth.end());
  auto link = transport::connectLinkBaseline(rdmaEndpoint, uint32_t(maxMessage), sinkBytes);
  transport::LinkBaseline& verbs = *link;
  json out;
  out["device"] = verbs.deviceName();
  out["max_inline"] = verbs.maxInline();

  progress("raw verbs SEND/RECV ping-pong (ib_send_lat)");
  json sendLatency = json::array();
  for (size_t size : sizes.latency) {
    json point = sizedLatency(
        size, measure(50, latencyIterations(quick), [&] { verbs.pingPong(uint32_t(size)); }));
    // The figures above are round trips, like raw.rtt; ib_send_lat prints half of one.
    point["one_way_median_us"] = point["median_us"].get<double>() / 2;
    sendLatency.push_back(point);
  }
  out["send_lat"] = sendLatency;

  progress("raw verbs RDMA WRITE streaming (ib_write_bw)");
  json writeBandwidth = json::array();
  for (size_t size : sizes.bandwidth) {
    size_t iterations = iterationsFor(size, quick);
    verbs.writeStream(size, std::min<size_t>(iterations, 8));  // warm-up, untimed
    auto start = std::chrono::steady_clock::now();
    verbs.writeStream(size, iterations);
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    writeBandwidth.push_back({{"size", size},
                              {"gb_per_s", double(size) * double(iterations) / seconds / 1e9},
                              {"seconds", seconds},
                              {"iterations", iterations}});
  }
  out["write_bw"] = writeBandwidth;
  return out;
}

}  // namespace gpupool::tools
