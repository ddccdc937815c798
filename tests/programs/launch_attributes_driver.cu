// Stream attributes, priorities, parameter layouts and cuLaunchKernelEx through the driver API:
// - the priority range, priorities clamped to it, and read back both ways;
// - an access-policy window and a synchronization policy set, read back and copied to another
//   stream; an attribute streams do not have is refused;
// - cuFuncGetParamInfo gives each parameter's offset and size as the kernel's signature lays them
//   out (checked against a struct of the same members), and refuses an index past the last;
// - cuLaunchKernelEx with the hints every pool serves (priority, programmatic stream
//   serialization, memory sync domain, a cooperative flag of 0) computes the right result; its
//   launch-completion event lets another stream wait for the kernel; attributes the device does
//   not offer (cooperative, clusters, when it says so) and unknown ones are refused with
//   CUDA_ERROR_INVALID_VALUE.
#include <cuda.h>

#include <cstddef>
#include <vector>

#include "driver_check.h"

namespace {

constexpr int kCount = 4096;
constexpr size_t kBytes = kCount * sizeof(int);

__global__ void scaleAdd(const int* in, int* out, int n, char tag, double factor,
                         long long offset) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = static_cast<int>(in[i] * factor) + static_cast<int>(offset) + tag;
}

__global__ void plusOne(const int* in, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] + 1;
}

// The parameters as the ABI lays them out in the kernel's parameter space.
struct ScaleAddParams {
  const int* in;
  int* out;
  int n;
  char tag;
  double factor;
  long long offset;
};

CUfunction functionOf(const void* kernel) {
  cudaFunction_t f;
  CHECK_CUDA(cudaGetFuncBySymbol(&f, kernel));
  return reinterpret_cast<CUfunction>(f);
}

}  // namespace

int main() {
  CHECK_CUDA(cudaFree(nullptr));  // the primary context the driver calls use
  CUdevice device;
  CHECK_CU(cuCtxGetDevice(&device));

  // Priorities.
  int least = 0, greatest = 0;
  CHECK_CU(cuCtxGetStreamPriorityRange(&least, &greatest));
  CHECK(greatest <= least, "priority range [%d, %d]", greatest, least);
  CUstream high, low;
  CHECK_CU(cuStreamCreateWithPriority(&high, CU_STREAM_NON_BLOCKING, greatest - 10));
  CHECK_CU(cuStreamCreateWithPriority(&low, CU_STREAM_NON_BLOCKING, least));
  int priority = 1;
  CHECK_CU(cuStreamGetPriority(high, &priority));
  CHECK(priority == greatest, "a priority past the range became %d, not %d", priority, greatest);
  CUstreamAttrValue value{};
  CHECK_CU(cuStreamGetAttribute(high, CU_STREAM_ATTRIBUTE_PRIORITY, &value));
  CHECK(value.priority == greatest, "the priority attribute says %d", value.priority);
  CHECK_CU(cuStreamGetPriority(low, &priority));
  CHECK(priority == least, "the lowest priority became %d", priority);
  std::printf("priorities in [%d, %d], clamped and read back\n", greatest, least);

  // Stream attributes.
  CUdeviceptr a, b, c;
  CHECK_CU(cuMemAlloc(&a, kBytes));
  CHECK_CU(cuMemAlloc(&b, kBytes));
  CHECK_CU(cuMemAlloc(&c, kBytes));
  int maxWindow = 0;
  CHECK_CU(
      cuDeviceGetAttribute(&maxWindow, CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE, device));
  CUstreamAttrValue window{};
  window.accessPolicyWindow.base_ptr = reinterpret_cast<void*>(a);
  const size_t windowLimit = static_cast<size_t>(maxWindow);
  window.accessPolicyWindow.num_bytes = kBytes < windowLimit ? kBytes : windowLimit;
  window.accessPolicyWindow.hitRatio = 0.5f;
  window.accessPolicyWindow.hitProp = CU_ACCESS_PROPERTY_PERSISTING;
  window.accessPolicyWindow.missProp = CU_ACCESS_PROPERTY_STREAMING;
  CHECK_CU(cuStreamSetAttribute(high, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &window));
  CUstreamAttrValue sync{};
  sync.syncPolicy = CU_SYNC_POLICY_BLOCKING_SYNC;
  CHECK_CU(cuStreamSetAttribute(high, CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY, &sync));
  CHECK_CU(cuStreamCopyAttributes(low, high));
  for (CUstream s : {high, low}) {
    CUstreamAttrValue got{};
    CHECK_CU(cuStreamGetAttribute(s, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &got));
    CHECK(got.accessPolicyWindow.base_ptr == window.accessPolicyWindow.base_ptr &&
              got.accessPolicyWindow.num_bytes == window.accessPolicyWindow.num_bytes &&
              got.accessPolicyWindow.hitRatio == 0.5f &&
              got.accessPolicyWindow.hitProp == CU_ACCESS_PROPERTY_PERSISTING &&
              got.accessPolicyWindow.missProp == CU_ACCESS_PROPERTY_STREAMING,
          "the access-policy window did not come back as set");
    CHECK_CU(cuStreamGetAttribute(s, CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY, &got));
    CHECK(got.syncPolicy == CU_SYNC_POLICY_BLOCKING_SYNC, "synchronization policy %d",
          static_cast<int>(got.syncPolicy));
  }
  CUstreamAttrValue cooperative{};
  cooperative.cooperative = 1;
  expectError(cuStreamSetAttribute(
                  high, static_cast<CUstreamAttrID>(CU_LAUNCH_ATTRIBUTE_COOPERATIVE), &cooperative),
              CUDA_ERROR_INVALID_VALUE, "cuStreamSetAttribute(COOPERATIVE)");
  std::printf("stream attributes set, read back and copied\n");

  // Parameter layout.
  CUfunction function = functionOf(reinterpret_cast<const void*>(scaleAdd));
  const size_t offsets[] = {offsetof(ScaleAddParams, in),     offsetof(ScaleAddParams, out),
                            offsetof(ScaleAddParams, n),      offsetof(ScaleAddParams, tag),
                            offsetof(ScaleAddParams, factor), offsetof(ScaleAddParams, offset)};
  const size_t sizes[] = {sizeof(const int*), sizeof(int*),   sizeof(int),
                          sizeof(char),       sizeof(double), sizeof(long long)};
  for (size_t i = 0; i < 6; ++i) {
    size_t offset = 0, size = 0;
    CHECK_CU(cuFuncGetParamInfo(function, i, &offset, &size));
    CHECK(offset == offsets[i] && size == sizes[i],
          "parameter %zu: offset %zu size %zu, expected %zu %zu", i, offset, size, offsets[i],
          sizes[i]);
  }
  size_t offset = 0, size = 0;
  expectError(cuFuncGetParamInfo(function, 6, &offset, &size), CUDA_ERROR_INVALID_VALUE,
              "cuFuncGetParamInfo past the last parameter");
  int numRegs = 0, maxThreads = 0;
  CHECK_CU(cuFuncGetAttribute(&numRegs, CU_FUNC_ATTRIBUTE_NUM_REGS, function));
  CHECK_CU(cuFuncGetAttribute(&maxThreads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, function));
  CHECK(numRegs > 0 && maxThreads >= 256, "function attributes: %d registers, %d threads", numRegs,
        maxThreads);
  // Every function attribute answers, with what a kernel without clusters has.
  int ptxVersion = 0, binaryVersion = 0;
  CHECK_CU(cuFuncGetAttribute(&ptxVersion, CU_FUNC_ATTRIBUTE_PTX_VERSION, function));
  CHECK_CU(cuFuncGetAttribute(&binaryVersion, CU_FUNC_ATTRIBUTE_BINARY_VERSION, function));
  CHECK(ptxVersion > 0 && binaryVersion > 0, "PTX version %d, binary version %d", ptxVersion,
        binaryVersion);
  for (int a = CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET;
       a <= CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH; ++a) {
    int v = -1;
    CHECK_CU(cuFuncGetAttribute(&v, static_cast<CUfunction_attribute>(a), function));
    CHECK(v == 0, "function attribute %d is %d for a kernel without clusters", a, v);
  }
  std::printf("parameter layout matches the signature\n");

  // cuLaunchKernelEx with the accepted attributes.
  std::vector<int> input(kCount), output(kCount);
  for (int i = 0; i < kCount; ++i) input[i] = i;
  CHECK_CU(cuMemcpyHtoD(a, input.data(), kBytes));
  CUevent done;
  CHECK_CU(cuEventCreate(&done, CU_EVENT_DISABLE_TIMING));
  CUlaunchAttribute attrs[5] = {};
  attrs[0].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
  attrs[0].value.priority = greatest;
  attrs[1].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attrs[1].value.programmaticStreamSerializationAllowed = 1;
  attrs[2].id = CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN;
  attrs[2].value.memSyncDomain = CU_LAUNCH_MEM_SYNC_DOMAIN_DEFAULT;
  attrs[3].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
  attrs[3].value.cooperative = 0;
  attrs[4].id = CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT;
  attrs[4].value.launchCompletionEvent.event = done;
  CUlaunchConfig config{};
  config.gridDimX = kCount / 256;
  config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = 256;
  config.blockDimY = config.blockDimZ = 1;
  config.hStream = high;
  config.attrs = attrs;
  config.numAttrs = 5;
  int n = kCount;
  char tag = 3;
  double factor = 2.0;
  long long shift = 100;
  void* params[] = {&a, &b, &n, &tag, &factor, &shift};
  CHECK_CU(cuLaunchKernelEx(&config, function, params, nullptr));
  // Another stream waits for the kernel through its completion event, then adds one.
  CHECK_CU(cuStreamWaitEvent(low, done, 0));
  CUfunction plus = functionOf(reinterpret_cast<const void*>(plusOne));
  void* plusParams[] = {&b, &c, &n};
  CHECK_CU(cuLaunchKernel(plus, kCount / 256, 1, 1, 256, 1, 1, 0, low, plusParams, nullptr));
  CHECK_CU(cuStreamSynchronize(low));
  CHECK_CU(cuMemcpyDtoH(output.data(), c, kBytes));
  for (int i = 0; i < kCount; ++i) {
    int want = i * 2 + 100 + 3 + 1;
    CHECK(output[i] == want, "element %d is %d, expected %d", i, output[i], want);
  }
  CHECK_CU(cuStreamSynchronize(high));
  std::printf("cuLaunchKernelEx with priority, serialization, sync domain and completion event\n");

  // Attributes the device does not offer, and unknown ones, are refused.
  int cooperativeLaunch = 0, clusterLaunch = 0;
  CHECK_CU(
      cuDeviceGetAttribute(&cooperativeLaunch, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, device));
  CHECK_CU(cuDeviceGetAttribute(&clusterLaunch, CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, device));
  CUlaunchAttribute refused{};
  config.attrs = &refused;
  config.numAttrs = 1;
  if (!cooperativeLaunch) {
    refused.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    refused.value.cooperative = 1;
    expectError(cuLaunchKernelEx(&config, function, params, nullptr), CUDA_ERROR_INVALID_VALUE,
                "a cooperative cuLaunchKernelEx on a device without cooperative launch");
  }
  if (!clusterLaunch) {
    refused = CUlaunchAttribute{};
    refused.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    refused.value.clusterDim.x = 2;
    refused.value.clusterDim.y = refused.value.clusterDim.z = 1;
    expectError(cuLaunchKernelEx(&config, function, params, nullptr), CUDA_ERROR_INVALID_VALUE,
                "a 2x1x1 cluster on a device without cluster launch");
  }
  refused = CUlaunchAttribute{};
  refused.id = static_cast<CUlaunchAttributeID>(999);
  expectError(cuLaunchKernelEx(&config, function, params, nullptr), CUDA_ERROR_INVALID_VALUE,
              "cuLaunchKernelEx with an unknown attribute");
  CHECK_CU(cuCtxSynchronize());
  std::printf("refused launch attributes return CUDA_ERROR_INVALID_VALUE\n");

  CHECK_CU(cuEventDestroy(done));
  CHECK_CU(cuStreamDestroy(high));
  CHECK_CU(cuStreamDestroy(low));
  for (CUdeviceptr p : {a, b, c}) CHECK_CU(cuMemFree(p));
  return pass();
}
