// Handles that outlive their context, through our libcuda.so.1 loaded in this process: the
// driver ends a context's streams, events and modules with it, so a later call on one of them
// must be refused as an invalid handle, never reach into the ended context (whose client object
// is freed: under the sanitizers a use of it fails the test). The same for handles another thread
// destroyed after this one used them.
#include <cuda.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <thread>

#include "gpupool_server.h"
#include "harness_paths.h"

namespace gpupool::hardening {
namespace {

const char kPtx[] = R"(
.version 7.0
.target sm_50
.address_size 64
.visible .entry nothing()
{
  ret;
}
)";

// The library's entry points by name.
class Driver {
 public:
  explicit Driver(const std::string& path) : library_(dlopen(path.c_str(), RTLD_NOW)) {}
  ~Driver() {
    if (library_) dlclose(library_);
  }
  bool loaded() const { return library_ != nullptr; }
  template <typename Fn>
  Fn get(const char* name) const {
    return reinterpret_cast<Fn>(dlsym(library_, name));
  }

 private:
  void* library_;
};

TEST(StaleHandlesTest, StreamsEventsAndModulesOfAnEndedContextAreInvalidHandles) {
  e2e::GpupoolServer server;
  ::setenv("GPU_POOL_ENDPOINT", server.endpoint().c_str(), 1);
  ::unsetenv("GPU_POOL_TOKEN");
  Driver driver(e2e::libcudaDir() + "/libcuda.so.1");
  ASSERT_TRUE(driver.loaded()) << dlerror();
  auto init = driver.get<CUresult (*)(unsigned)>("cuInit");
  auto deviceGet = driver.get<CUresult (*)(CUdevice*, int)>("cuDeviceGet");
  auto ctxCreate = driver.get<CUresult (*)(CUcontext*, unsigned, CUdevice)>("cuCtxCreate_v2");
  auto ctxDestroy = driver.get<CUresult (*)(CUcontext)>("cuCtxDestroy_v2");
  auto streamCreate = driver.get<CUresult (*)(CUstream*, unsigned)>("cuStreamCreate");
  auto streamDestroy = driver.get<CUresult (*)(CUstream)>("cuStreamDestroy_v2");
  auto streamQuery = driver.get<CUresult (*)(CUstream)>("cuStreamQuery");
  auto eventCreate = driver.get<CUresult (*)(CUevent*, unsigned)>("cuEventCreate");
  auto eventDestroy = driver.get<CUresult (*)(CUevent)>("cuEventDestroy_v2");
  auto moduleLoadData = driver.get<CUresult (*)(CUmodule*, const void*)>("cuModuleLoadData");
  auto moduleGetFunction =
      driver.get<CUresult (*)(CUfunction*, CUmodule, const char*)>("cuModuleGetFunction");
  auto moduleUnload = driver.get<CUresult (*)(CUmodule)>("cuModuleUnload");
  auto ctxSetCurrent = driver.get<CUresult (*)(CUcontext)>("cuCtxSetCurrent");
  auto eventRecord = driver.get<CUresult (*)(CUevent, CUstream)>("cuEventRecord");
  auto launchKernel =
      driver.get<CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void**, void**)>("cuLaunchKernel");
  auto ctxSynchronize = driver.get<CUresult (*)()>("cuCtxSynchronize");
  for (void* entry : {reinterpret_cast<void*>(init), reinterpret_cast<void*>(ctxCreate),
                      reinterpret_cast<void*>(streamDestroy), reinterpret_cast<void*>(moduleUnload),
                      reinterpret_cast<void*>(moduleGetFunction)}) {
    ASSERT_NE(entry, nullptr);
  }

  ASSERT_EQ(init(0), CUDA_SUCCESS);
  CUdevice device = 0;
  ASSERT_EQ(deviceGet(&device, 0), CUDA_SUCCESS);
  for (int round = 0; round < 2; ++round) {  // the second context may reuse the first's memory
    CUcontext context = nullptr;
    ASSERT_EQ(ctxCreate(&context, 0, device), CUDA_SUCCESS);
    CUstream stream = nullptr;
    CUevent event = nullptr;
    CUmodule module = nullptr;
    ASSERT_EQ(streamCreate(&stream, 0), CUDA_SUCCESS);
    ASSERT_EQ(eventCreate(&event, 0), CUDA_SUCCESS);
    ASSERT_EQ(moduleLoadData(&module, kPtx), CUDA_SUCCESS);
    CUfunction function = nullptr;
    ASSERT_EQ(moduleGetFunction(&function, module, "nothing"), CUDA_SUCCESS);
    ASSERT_EQ(ctxDestroy(context), CUDA_SUCCESS);

    EXPECT_EQ(streamQuery(stream), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_EQ(streamDestroy(stream), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_EQ(eventDestroy(event), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_EQ(moduleGetFunction(&function, module, "nothing"), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_EQ(moduleUnload(module), CUDA_ERROR_INVALID_HANDLE);
  }

  // A thread answers the handles it looked up last without the registry's lock
  // (client/driver_state.cc, lookup): one that another thread destroyed meanwhile must be refused
  // all the same, not read from its freed object. Here rather than in a test of its own: the
  // library stays loaded after the Driver goes, bound to this test's server.
  {
    CUcontext context = nullptr;
    ASSERT_EQ(ctxCreate(&context, 0, device), CUDA_SUCCESS);
    CUstream stream = nullptr;
    CUevent event = nullptr;
    CUmodule module = nullptr;
    CUfunction function = nullptr;
    ASSERT_EQ(streamCreate(&stream, 0), CUDA_SUCCESS);
    ASSERT_EQ(eventCreate(&event, 0), CUDA_SUCCESS);
    ASSERT_EQ(moduleLoadData(&module, kPtx), CUDA_SUCCESS);
    ASSERT_EQ(moduleGetFunction(&function, module, "nothing"), CUDA_SUCCESS);
    // Used on this thread, twice each: the second use is answered from what the first found.
    for (int use = 0; use < 2; ++use) {
      ASSERT_EQ(launchKernel(function, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr),
                CUDA_SUCCESS);
      ASSERT_EQ(eventRecord(event, stream), CUDA_SUCCESS);
      ASSERT_EQ(ctxSynchronize(), CUDA_SUCCESS);
      ASSERT_EQ(streamQuery(stream), CUDA_SUCCESS);
    }

    std::thread other([&] {
      ASSERT_EQ(ctxSetCurrent(context), CUDA_SUCCESS);
      EXPECT_EQ(streamDestroy(stream), CUDA_SUCCESS);
      EXPECT_EQ(eventDestroy(event), CUDA_SUCCESS);
      EXPECT_EQ(moduleUnload(module), CUDA_SUCCESS);  // and its function with it
    });
    other.join();

    EXPECT_EQ(streamQuery(stream), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_EQ(eventRecord(event, nullptr), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_EQ(launchKernel(function, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr),
              CUDA_ERROR_INVALID_HANDLE);
    EXPECT_EQ(streamDestroy(stream), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_EQ(ctxDestroy(context), CUDA_SUCCESS);
    // And the context itself, which this thread named at every call above.
    EXPECT_EQ(ctxSetCurrent(context), CUDA_ERROR_INVALID_CONTEXT);
  }
}

}  // namespace
}  // namespace gpupool::hardening
