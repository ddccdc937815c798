#include "tools/bench_stats.h"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <numeric>

namespace gpupool::tools {

using Clock = std::chrono::steady_clock;

Stats measure(size_t warmup, size_t iterations, const std::function<void()>& f) {
  for (size_t i = 0; i < warmup; ++i) f();
  std::vector<double> samples;
  samples.reserve(iterations);
  for (size_t i = 0; i < iterations; ++i) {
    auto start = Clock::now();
    f();
    samples.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::sort(samples.begin(), samples.end());
  Stats s;
  s.iterations = samples.size();
  s.min = samples.front();
  s.median = samples[samples.size() / 2];
  s.p90 = samples[std::min(samples.size() - 1, samples.size() * 9 / 10)];
  s.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(s.iterations);
  s.p99 = samples[std::min(samples.size() - 1, samples.size() * 99 / 100)];
  return s;
}

json latencyJson(const Stats& s) {
  return {{"min_us", s.min * 1e6}, {"median_us", s.median * 1e6}, {"p90_us", s.p90 * 1e6},
          {"p99_us", s.p99 * 1e6}, {"mean_us", s.mean * 1e6},     {"iterations", s.iterations}};
}

json sizedLatency(size_t size, const Stats& s) {
  json j = latencyJson(s);
  j["size"] = size;
  return j;
}

json sizedBandwidth(size_t size, const Stats& s) {
  return {{"size", size},
          {"gb_per_s", static_cast<double>(size) / s.median / 1e9},
          {"median_us", s.median * 1e6},
          {"iterations", s.iterations}};
}

size_t iterationsFor(size_t size, bool quick) {
  size_t budget = quick ? (256u << 20) : (2048u << 20);  // bytes moved per point
  size_t n = std::clamp<size_t>(budget / std::max<size_t>(size, 1), 3, quick ? 200 : 1000);
  return n;
}

void progress(const std::string& what) { std::cerr << "gpupool bench: " << what << "...\n"; }

size_t latencyIterations(bool quick) { return quick ? 300 : 2000; }

Sizes::Sizes(bool quick) {
  bandwidth = {4096, 65536, 1u << 20, 16u << 20, 64u << 20};
  if (!quick) bandwidth.push_back(256u << 20);
}

}  // namespace gpupool::tools
