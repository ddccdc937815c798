// concurrent_flag_handoff.cu through the driver API, as a program that JITs its own PTX: thread A
// launches (cuLaunchKernel, non-blocking stream) a kernel that spins until a device flag becomes
// 1, records an event after it and blocks in cuEventSynchronize; thread B, once A is blocked, sets
// the flag with cuMemcpyHtoDAsync on a second non-blocking stream and cuStreamSynchronize's it.
// Both threads work in the device's primary context. Links against libcuda only.
#include <cuda.h>

#include <atomic>
#include <thread>

#include "concurrency.h"
#include "driver_check.h"

namespace {

// concurrency.h's spinUntilFlag by hand, so that the program does not depend on nvcc's PTX.
const char kSpinPtx[] = R"PTX(
.version 8.0
.target sm_75
.address_size 64

.visible .entry spin_until_flag(
    .param .u64 flag,
    .param .u64 outcome,
    .param .u64 deadline_ns)
{
    .reg .pred %p<3>;
    .reg .b32 %r<3>;
    .reg .b64 %rd<8>;

    ld.param.u64 %rd1, [flag];
    ld.param.u64 %rd2, [outcome];
    ld.param.u64 %rd3, [deadline_ns];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    mov.u64 %rd4, %globaltimer;
WAIT:
    ld.volatile.global.u32 %r1, [%rd1];
    setp.eq.u32 %p1, %r1, 1;
    @%p1 bra SEEN;
    mov.u64 %rd5, %globaltimer;
    sub.u64 %rd6, %rd5, %rd4;
    setp.gt.u64 %p2, %rd6, %rd3;
    @%p2 bra GAVE_UP;
    bra WAIT;
SEEN:
    mov.u32 %r2, 1;  // kFlagSeen
    st.global.u32 [%rd2], %r2;
    ret;
GAVE_UP:
    mov.u32 %r2, 2;  // kFlagDeadlinePassed
    st.global.u32 [%rd2], %r2;
    ret;
}
)PTX";

}  // namespace

// For the threads: FAIL would exit under the other thread's feet, so they return the error.
#define RETURN_IF_CU_ERROR(call)                                                           \
  do {                                                                                     \
    const CUresult return_status_ = (call);                                                \
    if (return_status_ != CUDA_SUCCESS) {                                                  \
      return std::string(#call) + " returned " + cuErrorName(return_status_) + " (line " + \
             std::to_string(__LINE__) + ")";                                               \
    }                                                                                      \
  } while (0)

int main() {
  CHECK_CU(cuInit(0));
  CUdevice device;
  CHECK_CU(cuDeviceGet(&device, 0));
  CUcontext context;
  CHECK_CU(cuDevicePrimaryCtxRetain(&context, device));
  CHECK_CU(cuCtxSetCurrent(context));

  CUmodule module;
  CHECK_CU(cuModuleLoadData(&module, kSpinPtx));
  CUfunction spin;
  CHECK_CU(cuModuleGetFunction(&spin, module, "spin_until_flag"));
  CUdeviceptr flag, outcome;
  CHECK_CU(cuMemAlloc(&flag, sizeof(unsigned)));
  CHECK_CU(cuMemAlloc(&outcome, sizeof(unsigned)));
  CHECK_CU(cuMemsetD32(flag, 0, 1));
  CHECK_CU(cuMemsetD32(outcome, 0, 1));
  unsigned* one = nullptr;
  CHECK_CU(cuMemHostAlloc(reinterpret_cast<void**>(&one), sizeof(unsigned), 0));
  *one = 1;
  CUstream waitStream, signalStream;
  CHECK_CU(cuStreamCreate(&waitStream, CU_STREAM_NON_BLOCKING));
  CHECK_CU(cuStreamCreate(&signalStream, CU_STREAM_NON_BLOCKING));
  CUevent spun;
  CHECK_CU(cuEventCreate(&spun, CU_EVENT_DISABLE_TIMING));

  std::atomic<bool> waiterLaunched{false};
  double waiterSyncedMs = 0, flagSentMs = 0;
  const Stopwatch clock;
  auto waitForFlag = [&]() -> std::string {
    RETURN_IF_CU_ERROR(cuCtxSetCurrent(context));
    unsigned long long deadline = kFlagDeadlineNs;
    void* params[] = {&flag, &outcome, &deadline};
    RETURN_IF_CU_ERROR(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, waitStream, params, nullptr));
    RETURN_IF_CU_ERROR(cuEventRecord(spun, waitStream));
    waiterLaunched = true;
    RETURN_IF_CU_ERROR(cuEventSynchronize(spun));
    waiterSyncedMs = clock.ms();
    return "";
  };
  auto setFlag = [&]() -> std::string {
    RETURN_IF_CU_ERROR(cuCtxSetCurrent(context));
    if (!awaitOtherThread(waiterLaunched)) return "thread A did not launch its kernel";
    // Long enough for A to be inside cuEventSynchronize.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    RETURN_IF_CU_ERROR(cuMemcpyHtoDAsync(flag, one, sizeof(unsigned), signalStream));
    RETURN_IF_CU_ERROR(cuStreamSynchronize(signalStream));
    flagSentMs = clock.ms();
    return "";
  };
  runOnTwoThreads("thread A (waits)", waitForFlag, "thread B (sets the flag)", setFlag);
  unsigned outcomeValue = kFlagWaitRunning;
  CHECK_CU(cuMemcpyDtoH(&outcomeValue, outcome, sizeof(outcomeValue)));
  expectHandoff(outcomeValue, flagSentMs, waiterSyncedMs, "cuEventSynchronize");

  CHECK_CU(cuEventDestroy(spun));
  CHECK_CU(cuStreamDestroy(waitStream));
  CHECK_CU(cuStreamDestroy(signalStream));
  CHECK_CU(cuMemFreeHost(one));
  CHECK_CU(cuMemFree(flag));
  CHECK_CU(cuMemFree(outcome));
  CHECK_CU(cuModuleUnload(module));
  CHECK_CU(cuDevicePrimaryCtxRelease(device));
  return pass();
}
