// Driver API only: a log callback registered at startup (as PyTorch does), work bracketed by
// cuProfilerStart/cuProfilerStop, the log iterator and dumps, device-memory budget callbacks, GPU
// core dump settings (global and per context), the stream queries of the newer ABIs
// (cuStreamGetCtx_v2, cuStreamGetGreenCtx, cuStreamGetDevice, cuCtxGetDevice_v2), and the errors
// cuda.h documents for invalid arguments. Under the pool (GPU_POOL_ENDPOINT set) turning core dumps
// on must be refused, since none is written for a pool client; NVIDIA's driver accepts it. Whatever
// the driver logged is not checked (a real driver may log), only that the calls behave as
// documented; the bracketed fill is read back and checked.
#include <cuda.h>
#include <cudaProfiler.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
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
  // With nothing logged the driver answers size 0 and writes no terminator (observed on driver
  // 580.159.04, H200); a dump of some bytes is terminated.
  CHECK(size < buffer.size() && (size == 0 || buffer[size] == '\0'),
        "dump of %zu bytes is not terminated", size);
  std::printf("logs: %zu bytes since the iterator\n", size);

  expectError(cuLogsRegisterCallback(nullptr, nullptr, &handle), CUDA_ERROR_INVALID_VALUE,
              "cuLogsRegisterCallback(NULL callback)");
  expectError(cuLogsCurrent(nullptr, 0), CUDA_ERROR_INVALID_VALUE, "cuLogsCurrent(NULL)");
  expectError(cuLogsDumpToMemory(&iterator, nullptr, &size, 0), CUDA_ERROR_INVALID_VALUE,
              "cuLogsDumpToMemory(NULL buffer)");
  CHECK_CU(cuLogsUnregisterCallback(handle));
  std::printf("log callback registered and unregistered\n");
}

void CUDA_CB onBudget(CUasyncNotificationInfo*, void*, CUasyncCallbackHandle) {}

void checkBudgetCallbacks(CUdevice device) {
  CUasyncCallbackHandle handle = nullptr;
  CHECK_CU(cuDeviceRegisterAsyncNotification(device, onBudget, nullptr, &handle));
  CHECK(handle != nullptr, "cuDeviceRegisterAsyncNotification returned no handle");
  expectError(cuDeviceRegisterAsyncNotification(device, nullptr, nullptr, &handle),
              CUDA_ERROR_INVALID_VALUE, "cuDeviceRegisterAsyncNotification(NULL callback)");
  expectError(cuDeviceRegisterAsyncNotification(-1, onBudget, nullptr, &handle),
              CUDA_ERROR_INVALID_DEVICE, "cuDeviceRegisterAsyncNotification(device -1)");
  CHECK_CU(cuDeviceUnregisterAsyncNotification(device, handle));
  // Once only: a handle is gone after it is unregistered.
  CHECK(cuDeviceUnregisterAsyncNotification(device, handle) != CUDA_SUCCESS,
        "a budget callback was unregistered twice");
  std::printf("budget callback registered and unregistered\n");
}

bool getBool(CUcoredumpSettings attribute, bool global) {
  bool value = true;
  size_t size = sizeof value;
  CHECK_CU(global ? cuCoredumpGetAttributeGlobal(attribute, &value, &size)
                  : cuCoredumpGetAttribute(attribute, &value, &size));
  return value;
}

void setBool(CUcoredumpSettings attribute, bool value, bool global) {
  size_t size = sizeof value;
  CHECK_CU(global ? cuCoredumpSetAttributeGlobal(attribute, &value, &size)
                  : cuCoredumpSetAttribute(attribute, &value, &size));
}

int getFlags(bool global) {
  int flags = -1;
  size_t size = sizeof flags;
  CHECK_CU(global ? cuCoredumpGetAttributeGlobal(CU_COREDUMP_GENERATION_FLAGS, &flags, &size)
                  : cuCoredumpGetAttribute(CU_COREDUMP_GENERATION_FLAGS, &flags, &size));
  return flags;
}

std::string getName(CUcoredumpSettings attribute, bool global) {
  size_t size = 0;
  CHECK_CU(global ? cuCoredumpGetAttributeGlobal(attribute, nullptr, &size)
                  : cuCoredumpGetAttribute(attribute, nullptr, &size));
  CHECK(size > 1, "the name's size query gave %zu bytes", size);
  std::string name(size, '\0');
  CHECK_CU(global ? cuCoredumpGetAttributeGlobal(attribute, name.data(), &size)
                  : cuCoredumpGetAttribute(attribute, name.data(), &size));
  name.resize(std::strlen(name.c_str()));
  return name;
}

// Before a context: the global settings and their defaults.
void checkCoredumpDefaults() {
  CHECK(!getBool(CU_COREDUMP_ENABLE_ON_EXCEPTION, true), "dumps on exception are on by default");
  CHECK(!getBool(CU_COREDUMP_ENABLE_USER_TRIGGER, true), "user-triggered dumps are on by default");
  CHECK(getBool(CU_COREDUMP_TRIGGER_HOST, true), "trigger-host is off by default");
  CHECK(!getBool(CU_COREDUMP_LIGHTWEIGHT, true), "lightweight dumps are on by default");
  CHECK(getFlags(true) == CU_COREDUMP_DEFAULT_FLAGS, "generation flags are %d by default",
        getFlags(true));
  // The dump file, unset, reads empty although cuda.h names core.cuda.HOSTNAME.PID as where a dump
  // goes (observed on driver 580.159.04, H200).
  if (!std::getenv("CUDA_COREDUMP_FILE")) {
    std::string file = getName(CU_COREDUMP_FILE, true);
    CHECK(file.empty(), "the default dump file is '%s', expected ''", file.c_str());
  }
  size_t size = 0;
  CHECK_CU(cuCoredumpGetAttributeGlobal(CU_COREDUMP_ENABLE_ON_EXCEPTION, nullptr, &size));
  CHECK(size == sizeof(bool), "a bool setting's size query gave %zu", size);
  expectError(cuCoredumpGetAttributeGlobal(CU_COREDUMP_ENABLE_ON_EXCEPTION, nullptr, nullptr),
              CUDA_ERROR_INVALID_VALUE, "cuCoredumpGetAttributeGlobal(NULL size)");
  expectError(cuCoredumpGetAttributeGlobal(CU_COREDUMP_MAX, nullptr, &size),
              CUDA_ERROR_INVALID_VALUE, "cuCoredumpGetAttributeGlobal(CU_COREDUMP_MAX)");
  std::printf("core dump defaults ok\n");
}

// With a current context: settings per context over the global ones, and turning dumps on.
void checkCoredumpSettings() {
  const bool pooled = std::getenv("GPU_POOL_ENDPOINT") != nullptr;
  expectError(cuCoredumpGetAttribute(CU_COREDUMP_GENERATION_FLAGS, nullptr, nullptr),
              CUDA_ERROR_INVALID_VALUE, "cuCoredumpGetAttribute(NULL size)");
  int flags = CU_COREDUMP_SKIP_LOCAL_MEMORY;
  size_t size = sizeof flags;
  CHECK_CU(cuCoredumpSetAttributeGlobal(CU_COREDUMP_GENERATION_FLAGS, &flags, &size));
  CHECK(getFlags(false) == CU_COREDUMP_SKIP_LOCAL_MEMORY,
        "the context does not see the global flags (%d)", getFlags(false));
  flags = CU_COREDUMP_SKIP_GLOBAL_MEMORY;
  CHECK_CU(cuCoredumpSetAttribute(CU_COREDUMP_GENERATION_FLAGS, &flags, &size));
  CHECK(getFlags(false) == CU_COREDUMP_SKIP_GLOBAL_MEMORY, "the context's flags read %d",
        getFlags(false));
  CHECK(getFlags(true) == CU_COREDUMP_SKIP_LOCAL_MEMORY, "a context's flags changed the global");
  if (pooled) {
    // How the deprecated lightweight and trigger-host settings show in the flags is the pool's
    // reading of cuda.h ("equivalent to"); NVIDIA's driver is not held to it here.
    setBool(CU_COREDUMP_LIGHTWEIGHT, true, true);
    CHECK(getFlags(true) == CU_COREDUMP_LIGHTWEIGHT_FLAGS, "lightweight gave flags %d",
          getFlags(true));
    CHECK(!getBool(CU_COREDUMP_LIGHTWEIGHT, false), "the context reads lightweight");
    setBool(CU_COREDUMP_TRIGGER_HOST, false, false);
    CHECK(getFlags(false) == (CU_COREDUMP_SKIP_GLOBAL_MEMORY | CU_COREDUMP_SKIP_ABORT),
          "trigger-host off gave flags %d", getFlags(false));
    CHECK(!getBool(CU_COREDUMP_TRIGGER_HOST, false), "trigger-host reads on after off");
  }
  flags = 1 << 20;
  expectError(cuCoredumpSetAttribute(CU_COREDUMP_GENERATION_FLAGS, &flags, &size),
              CUDA_ERROR_INVALID_VALUE, "cuCoredumpSetAttribute(unknown generation flag)");
  flags = CU_COREDUMP_DEFAULT_FLAGS;
  CHECK_CU(cuCoredumpSetAttributeGlobal(CU_COREDUMP_GENERATION_FLAGS, &flags, &size));

  if (!std::getenv("CUDA_COREDUMP_FILE")) {
    char file[] = "/tmp/gpupool-test-core";
    size = sizeof file;
    CHECK_CU(cuCoredumpSetAttribute(CU_COREDUMP_FILE, file, &size));
    CHECK(getName(CU_COREDUMP_FILE, false) == file, "the context's dump file reads '%s'",
          getName(CU_COREDUMP_FILE, false).c_str());
    CHECK(getName(CU_COREDUMP_FILE, true) != file, "a context's dump file changed the global");
    std::string tooLong(1100, 'x');
    size = tooLong.size() + 1;
    expectError(cuCoredumpSetAttributeGlobal(CU_COREDUMP_FILE, tooLong.data(), &size),
                CUDA_ERROR_INVALID_VALUE, "cuCoredumpSetAttributeGlobal(1100-character file)");
  }

  // Turning dumps off always works; on works with NVIDIA's driver and is refused by the pool.
  setBool(CU_COREDUMP_ENABLE_ON_EXCEPTION, false, false);
  setBool(CU_COREDUMP_ENABLE_ON_EXCEPTION, false, true);
  bool on = true;
  size = sizeof on;
  CUresult enable = cuCoredumpSetAttribute(CU_COREDUMP_ENABLE_ON_EXCEPTION, &on, &size);
  if (pooled) {
    expectError(enable, CUDA_ERROR_NOT_SUPPORTED, "cuCoredumpSetAttribute(ENABLE_ON_EXCEPTION)");
    expectError(cuCoredumpSetAttributeGlobal(CU_COREDUMP_ENABLE_ON_EXCEPTION, &on, &size),
                CUDA_ERROR_NOT_PERMITTED, "cuCoredumpSetAttributeGlobal(ENABLE_ON_EXCEPTION)");
    CHECK(!getBool(CU_COREDUMP_ENABLE_ON_EXCEPTION, false), "a refused enable reads as on");
    CUcontext dumping = nullptr;
    expectError(cuCtxCreate(&dumping, nullptr, CU_CTX_COREDUMP_ENABLE, 0), CUDA_ERROR_NOT_SUPPORTED,
                "cuCtxCreate(CU_CTX_COREDUMP_ENABLE)");
  } else {
    CHECK_CU(enable);
    CHECK(getBool(CU_COREDUMP_ENABLE_ON_EXCEPTION, false), "an accepted enable reads as off");
    setBool(CU_COREDUMP_ENABLE_ON_EXCEPTION, false, false);
  }
  std::printf("core dump settings ok (%s)\n", pooled ? "dumps refused by the pool" : "local");
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
  checkCoredumpDefaults();
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
  checkBudgetCallbacks(device);
  checkCoredumpSettings();
  CHECK_CU(cuMemFree(buffer));
  CHECK_CU(cuCtxDestroy(context));
  // With no current context there is nothing to profile.
  expectError(cuProfilerStart(), CUDA_ERROR_INVALID_CONTEXT, "cuProfilerStart() without a context");
  return pass();
}
