// The multi-threaded series of `gpupool bench`: N threads of one program (one context, so one
// session), each on a non-blocking stream of its own, first doing null calls, then launching the
// empty kernel asynchronously with a synchronize of its stream every kLaunchesPerSynchronize
// launches. Figures are calls per second summed over all threads.
//
// The series runs twice, each time in a child process (the client reads its settings when its
// session opens): once with kSerializeCallsVariable=1, the client keeping one call in flight per
// session (the behaviour before calls from many threads overlapped), and once without it.
#pragma once

#include <cstddef>

#include "tools/bench_driver.h"
#include "tools/bench_stats.h"

namespace gpupool::tools {

inline constexpr char kSerializeCallsVariable[] = "GPU_POOL_SERIALIZE_CALLS";
inline constexpr size_t kLaunchesPerSynchronize = 100;

// [{"threads": N, "null_calls_per_second": R, "launches_per_second": R}, ...] for N = 1, 2, 4, 8,
// measured in this process through `d` (whose context `c` is current on the calling thread).
json measureThreads(const BenchDriver& d, const BenchContext& c, bool quick);

// The series as `--json` reports it: each entry of `concurrent` with the same point of
// `serialized` added as serialized_null_calls_per_second and serialized_launches_per_second.
json mergeThreadSeries(const json& concurrent, const json& serialized);

// How the series was measured (`threads_settings` in `--json`).
json threadSeriesSettings(bool quick);

// The table of the series, with the ratio of each figure to its serialized baseline.
void printThreadSeries(const json& threads);

}  // namespace gpupool::tools
