// The per-thread default stream, as a program built with `nvcc --default-stream per-thread` gets
// it for stream 0 (tests/programs/CMakeLists.txt and scripts/gpu-bundle.sh pass that flag to the
// programs that test CUDA_API_PER_THREAD_DEFAULT_STREAM like this one):
// 1. each host thread has its own: a kernel on one thread's stream 0 spins until a copy on
//    another thread's stream 0 sets its flag;
// 2. it keeps its own order, and orders with the legacy stream (cudaStreamLegacy) both ways;
// 3. it does not wait for other blocking streams, nor they for it.
#ifndef CUDA_API_PER_THREAD_DEFAULT_STREAM
#error "build with nvcc --default-stream per-thread"
#endif

#include <atomic>
#include <thread>

#include "stream_order_checks.h"

int main() {
  const OrderBuffers b;

  // 1. Thread A synchronizes its stream only once B is done, so that this does not depend on
  //    calls of one thread proceeding while another waits (concurrent_flag_handoff tests that).
  b.reset();
  std::atomic<bool> launched{false}, signalerDone{false};
  auto waitForFlag = [&]() -> std::string {
    spinUntilFlag<<<1, 1>>>(b.flag, b.outcome, kFlagDeadlineNs);
    RETURN_IF_CUDA_ERROR(cudaGetLastError());
    launched = true;
    if (!awaitOtherThread(signalerDone)) return "thread B did not finish";
    RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(0));
    return "";
  };
  auto copyFlag = [&]() -> std::string {
    if (!awaitOtherThread(launched)) return "thread A did not launch its kernel";
    RETURN_IF_CUDA_ERROR(b.setAsync(0));
    RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(0));
    return "";
  };
  auto setFlag = [&] {
    const std::string error = copyFlag();
    signalerDone = true;
    return error;
  };
  runOnTwoThreads("thread A (kernel on its stream 0)", waitForFlag,
                  "thread B (copy on its stream 0)", setFlag);
  const unsigned outcome = b.readOutcome();
  CHECK(outcome == kFlagSeen,
        "the kernel on thread A's stream 0 %s: thread B's stream 0 waited for it",
        flagWaitOutcomeName(outcome));
  std::printf("two threads' default streams are independent ok\n");

  // 2.
  expectReaderWaits(b, 0, 0, 3, "the per-thread default stream keeps its order");
  expectReaderWaits(b, 0, cudaStreamLegacy, 5,
                    "cudaStreamLegacy waits for the per-thread default stream");
  expectReaderWaits(b, cudaStreamLegacy, 0, 7,
                    "the per-thread default stream waits for cudaStreamLegacy");

  // 3.
  cudaStream_t blocking;
  CHECK_CUDA(cudaStreamCreate(&blocking));
  expectNoWait(b, blocking, 0, "the per-thread default stream does not wait for a blocking stream");
  expectNoWait(b, 0, blocking, "a blocking stream does not wait for the per-thread default stream");
  CHECK_CUDA(cudaStreamDestroy(blocking));
  return pass();
}
