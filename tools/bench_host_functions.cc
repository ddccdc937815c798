#include "tools/bench_host_functions.h"

#include <atomic>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace gpupool::tools {
namespace {

void CUDA_CB countRun(void* runs) { static_cast<std::atomic<size_t>*>(runs)->fetch_add(1); }

}  // namespace

json measureHostFunctions(const BenchDriver& d, const BenchContext&, bool quick) {
  CUstream stream = nullptr;
  check(d, d.cuStreamCreate(&stream, 0), "cuStreamCreate");
  std::atomic<size_t> runs{0};
  size_t placed = 0;
  auto place = [&] {
    check(d, d.cuLaunchHostFunc(stream, countRun, &runs), "cuLaunchHostFunc");
    ++placed;
  };
  progress("host functions, one at a time");
  Stats one = measure(10, quick ? 200 : 1000, [&] {
    place();
    check(d, d.cuStreamSynchronize(stream), "cuStreamSynchronize");
  });
  progress("host functions, in bursts of " + std::to_string(kHostFunctionBurst));
  Stats burst = measure(2, quick ? 20 : 100, [&] {
    for (size_t i = 0; i < kHostFunctionBurst; ++i) place();
    check(d, d.cuStreamSynchronize(stream), "cuStreamSynchronize");
  });
  check(d, d.cuStreamDestroy(stream), "cuStreamDestroy");
  // The stream was synchronized after the last one: every function placed must have run.
  if (runs.load() != placed) {
    throw std::runtime_error(std::to_string(runs.load()) + " of " + std::to_string(placed) +
                             " host functions ran before cuStreamSynchronize returned");
  }
  return {{"one", latencyJson(one)},
          {"burst_functions", kHostFunctionBurst},
          {"burst_per_function_us", burst.median * 1e6 / kHostFunctionBurst}};
}

void printHostFunctions(const json& hostFunctions) {
  const json& one = hostFunctions["one"];
  std::printf(
      "\n  host functions: one + synchronize %.1f us median (p90 %.1f); in bursts of %zu, %.1f us "
      "each\n",
      one["median_us"].get<double>(), one["p90_us"].get<double>(),
      hostFunctions["burst_functions"].get<size_t>(),
      hostFunctions["burst_per_function_us"].get<double>());
}

}  // namespace gpupool::tools
