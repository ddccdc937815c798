// The host-function series of `gpupool bench`: what a host function in stream order
// (cuLaunchHostFunc) costs, placed and synchronized one at a time (a framework's host callback
// between steps), and in bursts of kHostFunctionBurst on one stream before one synchronize. Each
// function counts its runs; the series fails unless every one ran.
#pragma once

#include "tools/bench_driver.h"
#include "tools/bench_stats.h"

namespace gpupool::tools {

inline constexpr size_t kHostFunctionBurst = 100;

// {"one": latency of cuLaunchHostFunc + cuStreamSynchronize (latencyJson), "burst_functions": B,
// "burst_per_function_us": median of a burst's B functions and one synchronize, divided by B},
// measured through `d` with context `c` current on the calling thread; throws on failure.
json measureHostFunctions(const BenchDriver& d, const BenchContext& c, bool quick);

// The lines of the series.
void printHostFunctions(const json& hostFunctions);

}  // namespace gpupool::tools
