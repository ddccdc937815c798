// The measuring and reporting conventions every `gpupool bench` series shares (perftest style:
// untimed warm-up, then min / median / p99 of timed iterations, with p90 and the mean for the
// tail between), and the sizes it measures.
#pragma once

#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace gpupool::tools {

using json = nlohmann::ordered_json;

struct Stats {
  double min = 0, median = 0, p90 = 0, p99 = 0, mean = 0;  // seconds
  size_t iterations = 0;
};

// Times `iterations` runs of f after `warmup` untimed ones (perftest style: warm-up excluded).
Stats measure(size_t warmup, size_t iterations, const std::function<void()>& f);

json latencyJson(const Stats& s);
json sizedLatency(size_t size, const Stats& s);
json sizedBandwidth(size_t size, const Stats& s);

// Iterations of one bandwidth point: about a fixed number of bytes moved, within bounds.
size_t iterationsFor(size_t size, bool quick);
// Timed iterations of one latency point.
size_t latencyIterations(bool quick);

void progress(const std::string& what);

// The transfer sizes of the latency and bandwidth series.
struct Sizes {
  std::vector<size_t> latency{4, 64, 1024, 4096, 16384, 65536};
  std::vector<size_t> bandwidth;
  explicit Sizes(bool quick);
};

}  // namespace gpupool::tools
