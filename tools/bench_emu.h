// `gpupool bench --emu`: how fast the emu device's PTX interpreter runs, in thread-instructions per
// second (active lanes summed over every instruction executed), for a compute-bound kernel (a tiled
// 192^3 matrix multiply), a memory-bound one (vector add over 64 Mi elements; 4 Mi with --quick)
// and a warp-divergent one (an interleaved reduction over 16 Mi integers; 1 Mi with --quick), each
// with one and two interpreter threads, and with one thread on the interpreter's generic path (no
// fast steps: the same run's baseline). It runs in this process, on the emu backend's own device
// memory, with no server; every result is checked against the host's. Issue #16, item 4.
#pragma once

#include "tools/bench_stats.h"

namespace gpupool::tools {

// {"matmul": {"threads_1": R, "threads_2": R, "generic_path_threads_1": R}, "vector_add": {...},
// "divergent_reduce": {...}},
// R in thread-instructions per second; `settings` gets each kernel's size and thread-instruction
// count. Throws std::runtime_error when a kernel fails to load or run or computes a wrong result.
json measureEmu(bool quick, json* settings);

// The table of measureEmu's figures, with ratios.emu_KERNEL_vs_generic_path.
void printEmu(const json& emu, const json& settings, const json& ratios);

}  // namespace gpupool::tools
