// Driver API only: a log callback registered at startup (as PyTorch does), work bracketed by
// cuProfilerStart/cuProfilerStop, the log iterator and dumps, the stream queries of the newer ABIs
// (cuStreamGetCtx_v2, cuStreamGetGreenCtx, cuStreamGetDevice, cuCtxGetDevice_v2), and the errors
// cuda.h documents for invalid arguments. Whatever the driver logged is not checked (a real driver
// may log), only that the calls behave as documented; the bracketed fill is read back and checked.
#include <cuda.h>
#include <cudaProfiler.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "driver_check.h"

namespace {

void CUDA_CB onDriverLog(void*, CUlogLevel, char*, size_t) {}

void checkLogs() {
  CUlogsCallbackHandle handle = nullptr;
  CHECK_CU(cuLogsRegisterCallback(onDriverLog, nullptr, &handle));
  CHECK(handle != nullptr, "cuLogsRegisterCallback returned no handle");
  CHECK_CU(cuLogsRegisterCallback(onDriverLog, nullptr, nullptr));  // the handle is optional

  CUlogIterator iterator = 0;
  CHECK_CU(cuLogsCurrent(&iterator, 0));
  // Everything logged from the iterator on; a real driver may have logged something by now.
  std::vector<char> buffer(25600, 'x');  // the most the driver keeps
  size_t size = buffer.size();
  CHECK_CU(cuLogsDumpToMemory(&iterator, buffer.data(), &size, 0));
  CHECK(size < buffer.size() && buffer[size] == '\0', "dump of %zu bytes is not terminated", size);
  std::printf("logs: %zu bytes since the iterator\n", size);

  expectError(cuLogsRegisterCallback(nullptr, nullptr, &handle), CUDA_ERROR_INVALID_VALUE,
              "cuLogsRegisterCallback(NULL callback)");
  expectError(cuLogsCurrent(nullptr, 0), CUDA_ERROR_INVALID_VALUE, "cuLogsCurrent(NULL)");
  expectError(cuLogsDumpToMemory(&iterator, nullptr, &size, 0), CUDA_ERROR_INVALID_VALUE,
              "cuLogsDumpToMemory(NULL buffer)");
  CHECK_CU(cuLogsUnregisterCallback(handle));
  std::printf("log callback registered and unregistered\n");
}

void checkStreamQueries(CUcontext context, CUdevice device) {
  CUstream stream;
  CHECK_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  for (CUstream s : {stream, static_cast<CUstream>(nullptr), CU_STREAM_LEGACY}) {
    CUcontext streamContext = nullptr;
    CUgreenCtx green = reinterpret_cast<CUgreenCtx>(1);
    CHECK_CU(cuStreamGetCtx_v2(s, &streamContext, &green));
    CHECK(streamContext == context, "cuStreamGetCtx_v2 gave another context");
    CHECK(green == nullptr, "cuStreamGetCtx_v2 gave a green context for a regular one");
    green = reinterpret_cast<CUgreenCtx>(1);
    CHECK_CU(cuStreamGetGreenCtx(s, &green));
    CHECK(green == nullptr, "cuStreamGetGreenCtx gave a green context for a regular stream");
    CUdevice streamDevice = -1;
    CHECK_CU(cuStreamGetDevice(s, &streamDevice));
    CHECK(streamDevice == device, "cuStreamGetDevice gave device %d, expected %d", streamDevice,
          device);
  }
  CUdevice contextDevice = -1;
  CHECK_CU(cuCtxGetDevice_v2(&contextDevice, context));
  CHECK(contextDevice == device, "cuCtxGetDevice_v2 gave device %d", contextDevice);
  expectError(cuStreamGetDevice(stream, nullptr), CUDA_ERROR_INVALID_VALUE,
              "cuStreamGetDevice(NULL)");
  CHECK_CU(cuStreamDestroy(stream));
  std::printf("stream queries ok\n");
}

}  // namespace

int main() {
  CHECK_CU(cuInit(0));
  checkLogs();  // before any context, as at a framework's startup
  CUdevice device;
  CHECK_CU(cuDeviceGet(&device, 0));
  CUcontext context;
  CHECK_CU(cuCtxCreate(&context, nullptr, 0, device));

  constexpr size_t kCount = 1 << 16;
  constexpr uint32_t kPattern = 0x5EED1234u;
  CUdeviceptr buffer;
  CHECK_CU(cuMemAlloc(&buffer, kCount * sizeof(uint32_t)));
  CHECK_CU(cuProfilerStart());
  CHECK_CU(cuMemsetD32(buffer, kPattern, kCount));
  CHECK_CU(cuCtxSynchronize());
  CHECK_CU(cuProfilerStop());
  // Deprecated: NVIDIA's driver has refused it since CUDA 12.0, and so does the pool.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  expectError(cuProfilerInitialize("profiler.cfg", "profile.out", CU_OUT_KEY_VALUE_PAIR),
              CUDA_ERROR_NOT_SUPPORTED, "cuProfilerInitialize");
#pragma GCC diagnostic pop
  std::vector<uint32_t> host(kCount);
  CHECK_CU(cuMemcpyDtoH(host.data(), buffer, kCount * sizeof(uint32_t)));
  for (size_t i = 0; i < kCount; ++i) {
    CHECK(host[i] == kPattern, "word %zu is 0x%08x, expected 0x%08x", i, host[i], kPattern);
  }
  std::printf("profiled fill: %zu words ok\n", kCount);

  checkStreamQueries(context, device);
  CHECK_CU(cuMemFree(buffer));
  CHECK_CU(cuCtxDestroy(context));
  // With no current context there is nothing to profile.
  expectError(cuProfilerStart(), CUDA_ERROR_INVALID_CONTEXT, "cuProfilerStart() without a context");
  return pass();
}
