// Shared by the programs that test threads and streams working at the same time
// (concurrent_*.cu, stream_*.cu): kernels that wait on the device, by wall time or for a flag
// that another stream sets, and host-side timing.
//
// The waits read %globaltimer (nanoseconds of wall time on a GPU and on the emu device alike), so
// that how long a kernel runs does not depend on the clock rate or on how fast the emu
// interprets. Every wait for a flag has a deadline: a program whose flag never arrives fails by
// itself instead of hanging.
#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "self_check.h"

// How long a kernel waits for a flag before it gives up. A flag that other work sets arrives in
// milliseconds; only a program whose other threads or streams are held up reaches this.
constexpr unsigned long long kFlagDeadlineNs = 10'000'000'000ull;

// What spinUntilFlag wrote.
enum FlagWaitOutcome : unsigned {
  kFlagWaitRunning = 0,  // not finished (or not started)
  kFlagSeen = 1,
  kFlagDeadlinePassed = 2,
};

inline const char* flagWaitOutcomeName(unsigned outcome) {
  switch (outcome) {
    case kFlagWaitRunning:
      return "still running";
    case kFlagSeen:
      return "saw the flag";
    case kFlagDeadlinePassed:
      return "gave up: the flag never came";
    default:
      return "wrote garbage";
  }
}

__device__ inline unsigned long long globalTimerNs() {
  unsigned long long ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  return ns;
}

// Between two looks at the clock or the flag: leaves the core (the emu's: a host core) to other
// work where the device can sleep.
__device__ inline void spinPause() {
#if __CUDA_ARCH__ >= 700
  __nanosleep(1000);
#endif
}

// Spins until *flag is 1, or until deadlineNs have passed; writes which into *outcome.
__global__ void spinUntilFlag(const volatile unsigned* flag, unsigned* outcome,
                              unsigned long long deadlineNs) {
  const unsigned long long start = globalTimerNs();
  while (*flag != 1) {
    if (globalTimerNs() - start > deadlineNs) {
      *outcome = kFlagDeadlinePassed;
      return;
    }
    spinPause();
  }
  *outcome = kFlagSeen;
}

// Spins for ns of wall time, then writes value into *out (when out is not null).
__global__ void spinThenWrite(unsigned long long ns, int* out, int value) {
  const unsigned long long start = globalTimerNs();
  while (globalTimerNs() - start < ns) spinPause();
  if (out != nullptr) *(volatile int*)out = value;
}

// *out = *in + 1: a reader whose result shows whether it ran after a writer.
__global__ void plusOne(const int* in, int* out) { *out = *(const volatile int*)in + 1; }

constexpr unsigned long long msToNs(unsigned long long ms) { return ms * 1'000'000ull; }

class Stopwatch {
 public:
  double ms() const {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_)
        .count();
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// For host threads other than main: FAIL would exit the process under the other threads' feet,
// so a thread returns what went wrong ("" when nothing did) and main fails with it.
#define RETURN_IF_CUDA_ERROR(call)                                                              \
  do {                                                                                          \
    const cudaError_t return_status_ = (call);                                                  \
    if (return_status_ != cudaSuccess) {                                                        \
      return std::string(#call) + " returned " + cudaGetErrorName(return_status_) + " (line " + \
             std::to_string(__LINE__) + ")";                                                    \
    }                                                                                           \
  } while (0)

// Fails the program with the error a host thread returned, if any.
#define CHECK_THREAD(name, error) CHECK((error).empty(), "%s: %s", name, (error).c_str())

// Runs two functions that return an error ("" for none) on two threads at once, and fails the
// program with the first error.
template <typename First, typename Second>
void runOnTwoThreads(const char* firstName, First first, const char* secondName, Second second) {
  std::string firstError, secondError;
  std::thread firstThread([&] { firstError = first(); });
  std::thread secondThread([&] { secondError = second(); });
  firstThread.join();
  secondThread.join();
  CHECK_THREAD(firstName, firstError);
  CHECK_THREAD(secondName, secondError);
}

// Waits until another thread sets `ready`: false when it never does (it failed before), so that
// one thread's failure does not hang the other. Twice a kernel's deadline, so that a thread held
// up by a kernel waiting for its flag reports that itself.
inline bool awaitOtherThread(const std::atomic<bool>& ready) {
  const auto deadline =
      std::chrono::steady_clock::now() + 2 * std::chrono::nanoseconds(kFlagDeadlineNs);
  while (!ready) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

// A flag for spinUntilFlag, the outcome it writes, and a pinned 1 to copy into the flag.
struct FlagBuffers {
  unsigned* flag = nullptr;
  unsigned* outcome = nullptr;
  unsigned* one = nullptr;

  FlagBuffers() {
    CHECK_CUDA(cudaMalloc(&flag, sizeof(unsigned)));
    CHECK_CUDA(cudaMalloc(&outcome, sizeof(unsigned)));
    CHECK_CUDA(cudaMallocHost(&one, sizeof(unsigned)));
    *one = 1;
    reset();
  }
  ~FlagBuffers() {
    CHECK_CUDA(cudaFree(flag));
    CHECK_CUDA(cudaFree(outcome));
    CHECK_CUDA(cudaFreeHost(one));
  }
  FlagBuffers(const FlagBuffers&) = delete;
  FlagBuffers& operator=(const FlagBuffers&) = delete;

  // Zeroes the flag and the outcome once the device is idle.
  void reset() const {
    CHECK_CUDA(cudaDeviceSynchronize());
    CHECK_CUDA(cudaMemset(flag, 0, sizeof(unsigned)));
    CHECK_CUDA(cudaMemset(outcome, 0, sizeof(unsigned)));
    CHECK_CUDA(cudaDeviceSynchronize());
  }
  // Sets the flag by a copy on `stream` (asynchronous, like any copy on a stream).
  cudaError_t setAsync(cudaStream_t stream) const {
    return cudaMemcpyAsync(flag, one, sizeof(unsigned), cudaMemcpyHostToDevice, stream);
  }
  unsigned readOutcome() const {
    unsigned host = kFlagWaitRunning;
    CHECK_CUDA(cudaMemcpy(&host, outcome, sizeof(host), cudaMemcpyDeviceToHost));
    return host;
  }
};

// The end of a two-thread flag hand-off: prints when each side was done and fails unless the
// kernel saw the flag that the other thread's copy set while the waiting thread was in waitCall.
inline void expectHandoff(unsigned outcome, double flagSentMs, double waiterDoneMs,
                          const char* waitCall) {
  std::printf("flag copied and its stream synchronized after %.1f ms; %s returned after %.1f ms\n",
              flagSentMs, waitCall, waiterDoneMs);
  CHECK(outcome == kFlagSeen,
        "the kernel %s: thread B's copy on another stream did not reach the device while thread "
        "A was in %s",
        flagWaitOutcomeName(outcome), waitCall);
  std::printf("kernel saw the flag set by another thread's copy\n");
}
