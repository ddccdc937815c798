// Context and device calls whose answer follows from what the device reports: the execution
// affinity of a context (cuCtxGetExecAffinity: its SMs, answered even where
// cuDeviceGetExecAffinitySupport reports 0), host atomics
// (cuDeviceGetHostAtomicCapabilities, per HOST_NATIVE_ATOMIC_SUPPORTED), the GPUDirect RDMA write
// flush (per GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS), dma_buf handles (per DMA_BUF_SUPPORTED), and
// memory budget notifications. Each answer must agree with the attribute that announces it. Limits
// set on the context read back (cuCtxSetLimit, cuCtxGetLimit).
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>

#include "driver_check.h"

namespace {

int attribute(CUdevice_attribute a, CUdevice device) {
  int value = 0;
  CHECK_CU(cuDeviceGetAttribute(&value, a, device));
  return value;
}

void budgetCallback(CUasyncNotificationInfo*, void*, CUasyncCallbackHandle) {}

}  // namespace

int main() {
  const CUdevice device = usePrimaryContext();

  // Execution affinity: the support query answers; an unknown type is an unsupported affinity.
  int affinitySupported = 0;
  CHECK_CU(
      cuDeviceGetExecAffinitySupport(&affinitySupported, CU_EXEC_AFFINITY_TYPE_SM_COUNT, device));
  // An ordinary context's SM-count affinity is the whole device, whatever the support query says
  // (observed on driver 580.159.04, H200: success where the support query reported 0).
  CUexecAffinityParam affinity = {};
  CHECK_CU(cuCtxGetExecAffinity(&affinity, CU_EXEC_AFFINITY_TYPE_SM_COUNT));
  CHECK(affinity.param.smCount.val > 0 &&
            static_cast<int>(affinity.param.smCount.val) <=
                attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device),
        "SM count affinity %u", affinity.param.smCount.val);
  expectError(cuCtxGetExecAffinity(nullptr, CU_EXEC_AFFINITY_TYPE_SM_COUNT),
              CUDA_ERROR_INVALID_VALUE, "cuCtxGetExecAffinity(null)");
  // An unknown type is an unsupported affinity (observed on driver 580.159.04, H200).
  expectError(cuCtxGetExecAffinity(&affinity, CU_EXEC_AFFINITY_TYPE_MAX),
              CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY, "cuCtxGetExecAffinity(MAX)");

  // Host atomics: without native host atomics no operation has a capability.
  CUatomicOperation ops[] = {CU_ATOMIC_OPERATION_INTEGER_ADD, CU_ATOMIC_OPERATION_CAS,
                             CU_ATOMIC_OPERATION_FLOAT_ADD};
  unsigned caps[3] = {~0u, ~0u, ~0u};
  CHECK_CU(cuDeviceGetHostAtomicCapabilities(caps, ops, 3, device));
  if (!attribute(CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED, device)) {
    for (unsigned c : caps) CHECK(c == 0, "host atomic capability %#x without native atomics", c);
  }
  expectError(cuDeviceGetHostAtomicCapabilities(caps, ops, 0, device), CUDA_ERROR_INVALID_VALUE,
              "cuDeviceGetHostAtomicCapabilities(count 0)");
  CUatomicOperation bad = CU_ATOMIC_OPERATION_MAX;
  expectError(cuDeviceGetHostAtomicCapabilities(caps, &bad, 1, device), CUDA_ERROR_INVALID_VALUE,
              "cuDeviceGetHostAtomicCapabilities(MAX)");
  expectError(cuDeviceGetHostAtomicCapabilities(caps, ops, 1, 1000), CUDA_ERROR_INVALID_DEVICE,
              "cuDeviceGetHostAtomicCapabilities(device 1000)");

  // The GPUDirect RDMA write flush exists where the device offers it to the host.
  const int flushOptions =
      attribute(CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS, device);
  CUresult r = cuFlushGPUDirectRDMAWrites(CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX,
                                          CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER);
  if (flushOptions & CU_FLUSH_GPU_DIRECT_RDMA_WRITES_OPTION_HOST) {
    CHECK(r == CUDA_SUCCESS, "cuFlushGPUDirectRDMAWrites returned %s", cuErrorName(r));
  } else {
    expectError(r, CUDA_ERROR_NOT_SUPPORTED, "cuFlushGPUDirectRDMAWrites without the HOST option");
  }

  // dma_buf handles exist where the device supports them.
  CUdeviceptr memory;
  CHECK_CU(cuMemAlloc(&memory, 1 << 21));
  int fd = -1;
  r = cuMemGetHandleForAddressRange(&fd, memory, 1 << 21, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
  if (!attribute(CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, device)) {
    expectError(r, CUDA_ERROR_NOT_SUPPORTED, "cuMemGetHandleForAddressRange without dma_buf");
  }
  CHECK_CU(cuMemFree(memory));

  // Memory budget notifications: registered and unregistered where offered, else not supported.
  CUasyncCallbackHandle handle = nullptr;
  r = cuDeviceRegisterAsyncNotification(device, budgetCallback, nullptr, &handle);
  if (r == CUDA_SUCCESS) {
    CHECK_CU(cuDeviceUnregisterAsyncNotification(device, handle));
  } else {
    expectError(r, CUDA_ERROR_NOT_SUPPORTED, "cuDeviceRegisterAsyncNotification");
  }

  // Context limits are the device driver's: a value set reads back (at least as large: a driver
  // rounds the stack size up), a limit that is not one is refused either way.
  const size_t stackWanted = 24 * 1024;
  CHECK_CU(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, stackWanted));
  size_t stack = 0;
  CHECK_CU(cuCtxGetLimit(&stack, CU_LIMIT_STACK_SIZE));
  CHECK(stack >= stackWanted, "stack size %zu after setting %zu", stack, stackWanted);
  const size_t fifoWanted = 3u << 20;
  CHECK_CU(cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, fifoWanted));
  size_t fifo = 0;
  CHECK_CU(cuCtxGetLimit(&fifo, CU_LIMIT_PRINTF_FIFO_SIZE));
  CHECK(fifo >= fifoWanted, "printf FIFO %zu after setting %zu", fifo, fifoWanted);
  size_t unused = 0;
  expectError(cuCtxGetLimit(&unused, CU_LIMIT_MAX), CUDA_ERROR_UNSUPPORTED_LIMIT,
              "cuCtxGetLimit(CU_LIMIT_MAX)");
  expectError(cuCtxSetLimit(CU_LIMIT_MAX, 1), CUDA_ERROR_UNSUPPORTED_LIMIT,
              "cuCtxSetLimit(CU_LIMIT_MAX)");
  expectError(cuCtxGetLimit(nullptr, CU_LIMIT_STACK_SIZE), CUDA_ERROR_INVALID_VALUE,
              "cuCtxGetLimit(null)");

  std::printf("context_capabilities_driver: ok\n");
  return pass();
}
