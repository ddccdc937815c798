// The graphs series of `gpupool bench`: one graph of N empty-kernel nodes in a chain (so it runs
// in the order the same kernels launched one by one on a stream would), launched and synchronized,
// against the same N kernels launched one by one on the same stream and synchronized. Both are
// timed to completion; the figures are medians of repeated runs. Through gpupool a graph launch is
// one posted message whatever its size, so the gap grows with N.
#pragma once

#include "tools/bench_driver.h"
#include "tools/bench_stats.h"

namespace gpupool::tools {

// The node counts measured.
inline constexpr size_t kGraphNodeCounts[] = {1, 10, 100};

// [{"nodes": N, "graph_launch_us": median, "separate_launches_us": median}, ...], measured through
// `d` with context `c` current on the calling thread; throws on failure.
json measureGraphs(const BenchDriver& d, const BenchContext& c, bool quick);

// The table of the series, with the ratio of separate launches to the graph launch.
void printGraphs(const json& graphs);

}  // namespace gpupool::tools
