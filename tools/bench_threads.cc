#include "tools/bench_threads.h"

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <exception>
#include <functional>
#include <optional>
#include <thread>
#include <vector>

namespace gpupool::tools {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kThreadCounts[] = {1, 2, 4, 8};
// Null calls between two looks at the clock.
constexpr size_t kNullCallsPerBatch = 10;

// Each point is the median of kRepeats runs of a fixed time rather than a fixed count, so a slow
// link (soft-RoCE takes milliseconds per synchronize) keeps the series' length (2 modes x 8 points
// x 3 runs: ~10 s by default, ~5 s quick) and one scheduling hiccup on a busy host does not make
// the figure.
constexpr size_t kRepeats = 3;
double secondsPerRepeat(bool quick) { return quick ? 0.1 : 0.2; }

// A stream of the calling thread, destroyed with it.
class ThreadStream {
 public:
  explicit ThreadStream(const BenchDriver& d) : d_(d) {
    check(d, d.cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  }
  ~ThreadStream() { d_.cuStreamDestroy(stream_); }
  ThreadStream(const ThreadStream&) = delete;
  ThreadStream& operator=(const ThreadStream&) = delete;
  CUstream get() const { return stream_; }

 private:
  const BenchDriver& d_;
  CUstream stream_ = nullptr;
};

// What one thread of a point did.
struct ThreadOutcome {
  size_t calls = 0;
  Clock::time_point started, finished;
  std::exception_ptr error;
};

// Work a thread repeats until its time is up; returns the calls it completed.
using Batch = std::function<size_t(CUstream)>;

// Runs `batch` on `threads` threads of context c, each on its own stream: one untimed batch each,
// then all start together and repeat it for `seconds`. Returns the calls completed per second over
// all threads, from the first thread's start to the last one's end. Rethrows a thread's error.
double callsPerSecond(const BenchDriver& d, const BenchContext& c, size_t threads, double seconds,
                      const Batch& batch) {
  std::vector<ThreadOutcome> outcomes(threads);
  // Every thread arrives, even one whose set-up failed, so none waits forever.
  std::barrier start(static_cast<std::ptrdiff_t>(threads + 1));
  const auto duration =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  {
    std::vector<std::jthread> workers;
    for (ThreadOutcome& out : outcomes) {
      workers.emplace_back([&] {
        std::optional<ThreadStream> stream;
        try {
          check(d, d.cuCtxSetCurrent(c.context), "cuCtxSetCurrent");
          stream.emplace(d);
          batch(stream->get());
        } catch (...) {
          out.error = std::current_exception();
        }
        start.arrive_and_wait();
        out.started = Clock::now();
        if (!out.error) {
          try {
            const auto deadline = out.started + duration;
            do {  // at least one timed batch, however late this thread was scheduled
              out.calls += batch(stream->get());
            } while (Clock::now() < deadline);
          } catch (...) {
            out.error = std::current_exception();
          }
        }
        out.finished = Clock::now();
      });
    }
    start.arrive_and_wait();
  }  // joins the workers
  Clock::time_point begin = Clock::time_point::max(), end = Clock::time_point::min();
  size_t calls = 0;
  for (const ThreadOutcome& out : outcomes) {
    if (out.error) std::rethrow_exception(out.error);
    begin = std::min(begin, out.started);
    end = std::max(end, out.finished);
    calls += out.calls;
  }
  const double elapsed = std::chrono::duration<double>(end - begin).count();
  return static_cast<double>(calls) / elapsed;
}

// The median over kRepeats runs of callsPerSecond.
double medianCallsPerSecond(const BenchDriver& d, const BenchContext& c, size_t threads,
                            double seconds, const Batch& batch) {
  std::vector<double> rates;
  for (size_t i = 0; i < kRepeats; ++i)
    rates.push_back(callsPerSecond(d, c, threads, seconds, batch));
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

}  // namespace

json measureThreads(const BenchDriver& d, const BenchContext& c, bool quick) {
  const double seconds = secondsPerRepeat(quick);
  const Batch nullCalls = [&](CUstream) {
    for (size_t i = 0; i < kNullCallsPerBatch; ++i) {
      check(d, d.cuCtxSynchronize(), "cuCtxSynchronize");
    }
    return kNullCallsPerBatch;
  };
  const Batch launches = [&](CUstream stream) {
    for (size_t i = 0; i < kLaunchesPerSynchronize; ++i)
      launchEmptyKernel(d, c.emptyKernel, stream);
    check(d, d.cuStreamSynchronize(stream), "cuStreamSynchronize");
    return kLaunchesPerSynchronize;
  };
  json series = json::array();
  for (size_t threads : kThreadCounts) {
    progress(std::to_string(threads) + " thread(s)");
    series.push_back(
        {{"threads", threads},
         {"null_calls_per_second", medianCallsPerSecond(d, c, threads, seconds, nullCalls)},
         {"launches_per_second", medianCallsPerSecond(d, c, threads, seconds, launches)}});
  }
  return series;
}

json mergeThreadSeries(const json& concurrent, const json& serialized) {
  json merged = json::array();
  for (size_t i = 0; i < concurrent.size(); ++i) {
    json entry = concurrent[i];
    entry["serialized_null_calls_per_second"] = serialized.at(i).at("null_calls_per_second");
    entry["serialized_launches_per_second"] = serialized.at(i).at("launches_per_second");
    merged.push_back(entry);
  }
  return merged;
}

json threadSeriesSettings(bool quick) {
  return {{"null_call", "cuCtxSynchronize"},
          {"launches_per_synchronize", kLaunchesPerSynchronize},
          {"runs_per_point", kRepeats},
          {"seconds_per_run", secondsPerRepeat(quick)},
          {"serialized_with", std::string(kSerializeCallsVariable) + "=1"}};
}

void printThreadSeries(const json& threads) {
  std::printf(
      "\n  threads of one program, own stream each; calls per second over all threads\n"
      "  (serialized: %s=1, one call in flight per session; launches: %zu per stream "
      "synchronize)\n",
      kSerializeCallsVariable, kLaunchesPerSynchronize);
  std::printf("  %-8s %12s %12s %7s %12s %12s %7s\n", "threads", "null calls", "serialized",
              "ratio", "launches", "serialized", "ratio");
  for (const json& point : threads) {
    auto rate = [&](const char* name) { return point[name].get<double>(); };
    std::printf("  %-8zu %12.0f %12.0f %7.2f %12.0f %12.0f %7.2f\n", point["threads"].get<size_t>(),
                rate("null_calls_per_second"), rate("serialized_null_calls_per_second"),
                rate("null_calls_per_second") / rate("serialized_null_calls_per_second"),
                rate("launches_per_second"), rate("serialized_launches_per_second"),
                rate("launches_per_second") / rate("serialized_launches_per_second"));
  }
}

}  // namespace gpupool::tools
