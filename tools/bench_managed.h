// The managed series of `gpupool bench`: what managed memory costs against explicit copies for a
// kernel touching 1, 10 and 100% of the pages of a 256 MiB buffer (32 MiB with --quick). Each round
// the host writes one word on each touched page, a kernel adds 1 to it, and the host reads it back
// after synchronizing. With managed memory (cuMemAllocManaged) that is all the program does; with
// explicit copies it copies the whole buffer to the device before the kernel and back after it, as
// a program that does not track what it wrote must. The figures are medians of timed rounds.
#pragma once

#include "tools/bench_driver.h"
#include "tools/bench_stats.h"

namespace gpupool::tools {

// The share of the buffer's pages the kernel touches, in percent.
inline constexpr int kManagedTouchedPercents[] = {1, 10, 100};

// {"buffer_bytes": B, "points": [{"touched_percent": P, "managed_ms": median,
// "explicit_copies_ms": median}, ...]}, measured through `d` with context `c` current; throws on
// failure.
json measureManaged(const BenchDriver& d, const BenchContext& c, bool quick);

// The table of the series, with the ratio of explicit copies to managed memory.
void printManaged(const json& managed);

}  // namespace gpupool::tools
