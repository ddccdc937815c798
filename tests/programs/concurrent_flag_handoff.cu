// One thread waits while another makes progress (runtime API): thread A launches, on a
// non-blocking stream, a kernel that spins until a device flag becomes 1 and blocks in
// cudaStreamSynchronize; thread B, once A is blocked, sets the flag with cudaMemcpyAsync on a
// second non-blocking stream and synchronizes that stream. On a GPU this finishes at once; a
// driver that lets A's synchronize hold up B's calls never delivers the flag, and the kernel gives
// up after kFlagDeadlineNs.
#include <atomic>
#include <thread>

#include "concurrency.h"

int main() {
  const FlagBuffers f;  // also initializes the runtime before the threads race
  cudaStream_t waitStream, signalStream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&waitStream, cudaStreamNonBlocking));
  CHECK_CUDA(cudaStreamCreateWithFlags(&signalStream, cudaStreamNonBlocking));

  std::atomic<bool> waiterLaunched{false};
  double waiterSyncedMs = 0, flagSentMs = 0;
  const Stopwatch clock;
  auto waitForFlag = [&]() -> std::string {
    spinUntilFlag<<<1, 1, 0, waitStream>>>(f.flag, f.outcome, kFlagDeadlineNs);
    RETURN_IF_CUDA_ERROR(cudaGetLastError());
    waiterLaunched = true;
    RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(waitStream));
    waiterSyncedMs = clock.ms();
    return "";
  };
  auto setFlag = [&]() -> std::string {
    if (!awaitOtherThread(waiterLaunched)) return "thread A did not launch its kernel";
    // Long enough for A to be inside cudaStreamSynchronize.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    RETURN_IF_CUDA_ERROR(f.setAsync(signalStream));
    RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(signalStream));
    flagSentMs = clock.ms();
    return "";
  };
  runOnTwoThreads("thread A (waits)", waitForFlag, "thread B (sets the flag)", setFlag);
  expectHandoff(f.readOutcome(), flagSentMs, waiterSyncedMs, "cudaStreamSynchronize");

  CHECK_CUDA(cudaStreamDestroy(waitStream));
  CHECK_CUDA(cudaStreamDestroy(signalStream));
  return pass();
}
