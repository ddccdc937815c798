// Green contexts through the driver API: the device's SM resource, its split by count (the query
// form, groups rounded up to the minimum and alignment, as many as fit, the remaining group, and
// the errors), descriptors, green contexts made of them and converted to contexts that load
// modules, allocate, launch and copy, streams of a green context, events recorded and waited
// across a green and an ordinary context, the cooperative launch limit of a partition (its SMs,
// not the device's), distinct ids, and destruction. Links against libcuda only.
#include <cuda.h>

#include <cstdio>
#include <vector>

#include "driver_check.h"

namespace {

// fill: out[i] = value + i for i < n. nop: nothing, for the cooperative launch limit.
const char kPtx[] = R"PTX(
.version 8.0
.target sm_75
.address_size 64

.visible .entry fill(.param .u64 out, .param .u32 value, .param .u32 n)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<5>;

    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [value];
    ld.param.u32 %r2, [n];
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mov.u32 %r5, %tid.x;
    mad.lo.u32 %r6, %r3, %r4, %r5;
    setp.ge.u32 %p1, %r6, %r2;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r6, 4;
    add.s64 %rd4, %rd2, %rd3;
    add.u32 %r7, %r1, %r6;
    st.global.u32 [%rd4], %r7;
DONE:
    ret;
}

.visible .entry nop()
{
    ret;
}
)PTX";

constexpr unsigned kN = 777;
constexpr unsigned kBlock = 128;

struct Kernels {
  CUmodule module = nullptr;
  CUfunction fill = nullptr;
  CUfunction nop = nullptr;
};

// Loads the module in the current context.
Kernels loadKernels() {
  Kernels k;
  CHECK_CU(cuModuleLoadData(&k.module, kPtx));
  CHECK_CU(cuModuleGetFunction(&k.fill, k.module, "fill"));
  CHECK_CU(cuModuleGetFunction(&k.nop, k.module, "nop"));
  return k;
}

void launchFill(const Kernels& k, CUdeviceptr out, unsigned value, CUstream stream) {
  unsigned n = kN;
  void* params[] = {&out, &value, &n};
  CHECK_CU(cuLaunchKernel(k.fill, (kN + kBlock - 1) / kBlock, 1, 1, kBlock, 1, 1, 0, stream, params,
                          nullptr));
}

void expectFilled(CUdeviceptr out, unsigned value, const char* how) {
  std::vector<unsigned> got(kN);
  CHECK_CU(cuMemcpyDtoH(got.data(), out, kN * sizeof(unsigned)));
  for (unsigned i = 0; i < kN; ++i) {
    CHECK(got[i] == value + i, "%s: out[%u] = %u, expected %u", how, i, got[i], value + i);
  }
}

CUresult launchCooperative(CUfunction f, unsigned blocks) {
  return cuLaunchCooperativeKernel(f, blocks, 1, 1, 32, 1, 1, 0, nullptr, nullptr);
}

}  // namespace

int main() {
  CHECK_CU(cuInit(0));
  CUdevice device;
  CHECK_CU(cuDeviceGet(&device, 0));
  int sms = 0, devices = 0;
  CHECK_CU(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device));
  CHECK_CU(cuDeviceGetCount(&devices));

  // The device's SM resource.
  CUdevResource whole{};
  CHECK_CU(cuDeviceGetDevResource(device, &whole, CU_DEV_RESOURCE_TYPE_SM));
  CHECK(whole.type == CU_DEV_RESOURCE_TYPE_SM, "the device resource has type %d",
        static_cast<int>(whole.type));
  CHECK(whole.sm.smCount == static_cast<unsigned>(sms), "the device resource has %u SMs, not %d",
        whole.sm.smCount, sms);
  const unsigned minSize = whole.sm.minSmPartitionSize, align = whole.sm.smCoscheduledAlignment;
  CHECK(minSize > 0 && align > 0, "minimum partition %u, alignment %u", minSize, align);
  CUdevResource scratch{};
  expectError(cuDeviceGetDevResource(device, nullptr, CU_DEV_RESOURCE_TYPE_SM),
              CUDA_ERROR_INVALID_VALUE, "cuDeviceGetDevResource(NULL)");
  expectError(cuDeviceGetDevResource(devices, &scratch, CU_DEV_RESOURCE_TYPE_SM),
              CUDA_ERROR_INVALID_DEVICE, "cuDeviceGetDevResource(no such device)");
  expectError(cuDeviceGetDevResource(device, &scratch, CU_DEV_RESOURCE_TYPE_INVALID),
              CUDA_ERROR_INVALID_RESOURCE_TYPE, "cuDeviceGetDevResource(TYPE_INVALID)");
  std::printf("device: %u SMs, partitions of at least %u in steps of %u\n", whole.sm.smCount,
              minSize, align);

  // The split: groups of minCount rounded up to the minimum and the alignment.
  const unsigned minCount = minSize + 1;
  const unsigned groupSize = (minCount + align - 1) / align * align;
  unsigned fit = 0;
  CHECK_CU(cuDevSmResourceSplitByCount(nullptr, &fit, &whole, nullptr, 0, minCount));
  CHECK(fit == whole.sm.smCount / groupSize, "the query form says %u groups of %u SMs fit in %u",
        fit, groupSize, whole.sm.smCount);
  CHECK(fit >= 2, "only %u groups of %u SMs fit: the test needs 2", fit, groupSize);
  CUdevResource groups[2]{}, remaining{};
  unsigned made = 2;
  CHECK_CU(cuDevSmResourceSplitByCount(groups, &made, &whole, &remaining, 0, minCount));
  CHECK(made == 2, "asked for 2 groups, got %u", made);
  for (const CUdevResource& g : groups) {
    CHECK(g.type == CU_DEV_RESOURCE_TYPE_SM && g.sm.smCount == groupSize,
          "a group has %u SMs, expected %u", g.sm.smCount, groupSize);
  }
  CHECK(remaining.type == CU_DEV_RESOURCE_TYPE_SM &&
            remaining.sm.smCount == whole.sm.smCount - 2 * groupSize,
        "the remaining group has %u SMs, expected %u", remaining.sm.smCount,
        whole.sm.smCount - 2 * groupSize);
  std::vector<CUdevResource> many(fit + 3);
  unsigned asked = fit + 3;
  CHECK_CU(cuDevSmResourceSplitByCount(many.data(), &asked, &whole, nullptr, 0, minCount));
  CHECK(asked == fit, "asked for %u groups where %u fit, got %u", fit + 3, fit, asked);
  expectError(cuDevSmResourceSplitByCount(groups, nullptr, &whole, nullptr, 0, minCount),
              CUDA_ERROR_INVALID_VALUE, "cuDevSmResourceSplitByCount(nbGroups NULL)");
  unsigned one = 1;
  // Observed on driver 580.159.04, H200.
  expectError(cuDevSmResourceSplitByCount(&scratch, &one, &whole, nullptr, 0, whole.sm.smCount + 1),
              CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION,
              "cuDevSmResourceSplitByCount(minCount > smCount)");
  CUdevResource invalid{};
  expectError(cuDevSmResourceSplitByCount(&scratch, &one, &invalid, nullptr, 0, minCount),
              CUDA_ERROR_INVALID_RESOURCE_TYPE, "cuDevSmResourceSplitByCount(TYPE_INVALID input)");
  expectError(cuDevSmResourceSplitByCount(&scratch, &one, &groups[0], nullptr, 0, minSize),
              CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION,
              "cuDevSmResourceSplitByCount(a split's group, again)");
  std::printf("split: %u groups of %u SMs fit; 2 made, %u SMs remaining\n", fit, groupSize,
              remaining.sm.smCount);

  // Descriptors: one group; two groups of one split; groups of two splits, which NVIDIA accepts
  // although its documentation asks for one split (observed on driver 580.159.04, H200).
  CUdevResourceDesc desc = nullptr, pair = nullptr, mixedDesc = nullptr;
  CHECK_CU(cuDevResourceGenerateDesc(&desc, &groups[0], 1));
  CHECK_CU(cuDevResourceGenerateDesc(&pair, groups, 2));
  expectError(cuDevResourceGenerateDesc(nullptr, groups, 1), CUDA_ERROR_INVALID_VALUE,
              "cuDevResourceGenerateDesc(NULL)");
  CUdevResource mixed[2] = {groups[0], many[0]};
  CHECK_CU(cuDevResourceGenerateDesc(&mixedDesc, mixed, 2));
  CHECK(mixedDesc != nullptr, "cuDevResourceGenerateDesc(groups of two splits) gave NULL");

  // Green contexts.
  CUgreenCtx green = nullptr, greenPair = nullptr;
  expectError(cuGreenCtxCreate(&green, desc, device, 0), CUDA_ERROR_INVALID_VALUE,
              "cuGreenCtxCreate(without CU_GREEN_CTX_DEFAULT_STREAM)");
  CHECK_CU(cuGreenCtxCreate(&green, desc, device, CU_GREEN_CTX_DEFAULT_STREAM));
  CHECK_CU(cuGreenCtxCreate(&greenPair, pair, device, CU_GREEN_CTX_DEFAULT_STREAM));
  CUdevResource got{};
  CHECK_CU(cuGreenCtxGetDevResource(green, &got, CU_DEV_RESOURCE_TYPE_SM));
  CHECK(got.sm.smCount == groupSize, "the green context has %u SMs, expected %u", got.sm.smCount,
        groupSize);
  CHECK_CU(cuGreenCtxGetDevResource(greenPair, &got, CU_DEV_RESOURCE_TYPE_SM));
  CHECK(got.sm.smCount == 2 * groupSize, "the two-group green context has %u SMs, expected %u",
        got.sm.smCount, 2 * groupSize);
  unsigned long long id = 0, pairId = 0, currentId = 0;
  CHECK_CU(cuGreenCtxGetId(green, &id));
  CHECK_CU(cuGreenCtxGetId(greenPair, &pairId));
  CHECK(id != pairId, "two green contexts share the id %llu", id);

  CUcontext greenCtx = nullptr;
  CHECK_CU(cuCtxFromGreenCtx(&greenCtx, green));
  CHECK(greenCtx != nullptr, "cuCtxFromGreenCtx gave NULL");
  CHECK_CU(cuCtxGetDevResource(greenCtx, &got, CU_DEV_RESOURCE_TYPE_SM));
  CHECK(got.sm.smCount == groupSize, "the green context's context has %u SMs, expected %u",
        got.sm.smCount, groupSize);
  expectError(cuCtxDestroy(greenCtx), CUDA_ERROR_INVALID_CONTEXT,
              "cuCtxDestroy(a green context's context)");

  // An ordinary context beside it has the whole device.
  CUcontext plain = nullptr;
  CHECK_CU(cuCtxCreate(&plain, nullptr, 0, device));
  CHECK_CU(cuCtxGetDevResource(plain, &got, CU_DEV_RESOURCE_TYPE_SM));
  CHECK(got.sm.smCount == whole.sm.smCount, "an ordinary context has %u SMs, expected %u",
        got.sm.smCount, whole.sm.smCount);
  Kernels plainKernels = loadKernels();
  CUdeviceptr plainOut = 0;
  CHECK_CU(cuMemAlloc(&plainOut, kN * sizeof(unsigned)));
  CUstream plainStream = nullptr;
  CHECK_CU(cuStreamCreate(&plainStream, CU_STREAM_NON_BLOCKING));
  CUgreenCtx none = green;
  CHECK_CU(cuStreamGetGreenCtx(plainStream, &none));
  CHECK(none == nullptr, "an ordinary context's stream has a green context");

  // The green context at work: module, allocation, launch, copy.
  CHECK_CU(cuCtxPushCurrent(greenCtx));
  CHECK_CU(cuGreenCtxGetId(nullptr, &currentId));
  CHECK(currentId == id, "the current green context's id is %llu, expected %llu", currentId, id);
  Kernels greenKernels = loadKernels();
  CUdeviceptr greenOut = 0;
  CHECK_CU(cuMemAlloc(&greenOut, kN * sizeof(unsigned)));
  launchFill(greenKernels, greenOut, 1000, nullptr);
  CHECK_CU(cuCtxSynchronize());
  expectFilled(greenOut, 1000, "a launch in the green context");

  // Its streams.
  CUstream greenStream = nullptr;
  expectError(cuGreenCtxStreamCreate(&greenStream, green, CU_STREAM_DEFAULT, 0),
              CUDA_ERROR_INVALID_VALUE, "cuGreenCtxStreamCreate(without CU_STREAM_NON_BLOCKING)");
  CHECK_CU(cuGreenCtxStreamCreate(&greenStream, green, CU_STREAM_NON_BLOCKING, 0));
  CUgreenCtx owner = nullptr;
  CHECK_CU(cuStreamGetGreenCtx(greenStream, &owner));
  CHECK(owner == green, "the green context's stream answers another green context");
  CUcontext streamCtx = nullptr;
  CHECK_CU(cuStreamGetCtx(greenStream, &streamCtx));
  CHECK(streamCtx == greenCtx, "cuStreamGetCtx does not answer the green context's context");
  owner = nullptr;
  CHECK_CU(cuStreamGetCtx_v2(greenStream, &streamCtx, &owner));
  CHECK(owner == green && streamCtx != nullptr,
        "cuStreamGetCtx_v2 does not answer the stream's green context");
  launchFill(greenKernels, greenOut, 2000, greenStream);
  CHECK_CU(cuStreamSynchronize(greenStream));
  expectFilled(greenOut, 2000, "a launch on a green context's stream");

  // Events across the two contexts: ordinary work the green context waits for, and green work
  // the ordinary context waits for.
  CUevent plainEvent = nullptr, greenEvent = nullptr;
  CHECK_CU(cuCtxPopCurrent(nullptr));
  CHECK_CU(cuEventCreate(&plainEvent, CU_EVENT_DISABLE_TIMING));
  launchFill(plainKernels, plainOut, 3000, plainStream);
  CHECK_CU(cuEventRecord(plainEvent, plainStream));
  CHECK_CU(cuGreenCtxWaitEvent(green, plainEvent));
  expectError(cuGreenCtxRecordEvent(green, plainEvent), CUDA_ERROR_INVALID_HANDLE,
              "cuGreenCtxRecordEvent(an event of another context)");
  CHECK_CU(cuCtxPushCurrent(greenCtx));
  CHECK_CU(cuEventCreate(&greenEvent, CU_EVENT_DISABLE_TIMING));
  launchFill(greenKernels, greenOut, 4000, greenStream);
  CHECK_CU(cuGreenCtxRecordEvent(green, greenEvent));
  CHECK_CU(cuEventSynchronize(greenEvent));
  CHECK(cuEventQuery(plainEvent) == CUDA_SUCCESS,
        "green work after cuGreenCtxWaitEvent finished before the event it waited for");
  expectFilled(greenOut, 4000, "green work covered by cuGreenCtxRecordEvent");
  CHECK_CU(cuCtxWaitEvent(plain, greenEvent));
  expectFilled(plainOut, 3000, "ordinary work the green context waited for");
  std::printf("events: recorded and waited across a green and an ordinary context\n");

  // The cooperative launch limit counts the partition's SMs.
  int perSm = 0;
  CHECK_CU(cuOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, greenKernels.nop, 32, 0));
  CHECK(perSm > 0, "occupancy says %d blocks per multiprocessor", perSm);
  const unsigned greenLimit = static_cast<unsigned>(perSm) * groupSize;
  CHECK_CU(launchCooperative(greenKernels.nop, greenLimit));
  expectError(launchCooperative(greenKernels.nop, greenLimit + 1),
              CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE,
              "cuLaunchCooperativeKernel(one block more than the partition holds)");
  CHECK_CU(cuCtxSynchronize());
  int minGrid = 0, bestBlock = 0, bestPerSm = 0;
  CHECK_CU(cuOccupancyMaxPotentialBlockSize(&minGrid, &bestBlock, greenKernels.nop, nullptr, 0, 0));
  CHECK_CU(cuOccupancyMaxActiveBlocksPerMultiprocessor(&bestPerSm, greenKernels.nop, bestBlock, 0));
  CHECK(minGrid == bestPerSm * static_cast<int>(groupSize),
        "the green context's minimum grid for full occupancy is %d, expected %d x %u SMs", minGrid,
        bestPerSm, groupSize);
  CHECK_CU(cuCtxPopCurrent(nullptr));
  CHECK_CU(cuCtxPushCurrent(plain));
  CHECK_CU(launchCooperative(plainKernels.nop, greenLimit + 1));
  CHECK_CU(cuCtxSynchronize());
  CHECK_CU(cuCtxPopCurrent(nullptr));
  std::printf(
      "cooperative launches: %u blocks (%d per SM x %u SMs) in the green context, one "
      "more only in the ordinary one\n",
      greenLimit, perSm, groupSize);

  // Teardown: streams first, as CUDA asks, then the contexts.
  CHECK_CU(cuCtxPushCurrent(greenCtx));
  CHECK_CU(cuEventDestroy(greenEvent));
  CHECK_CU(cuStreamDestroy(greenStream));
  CHECK_CU(cuMemFree(greenOut));
  CHECK_CU(cuModuleUnload(greenKernels.module));
  CHECK_CU(cuCtxPopCurrent(nullptr));
  CHECK_CU(cuGreenCtxDestroy(green));
  CHECK_CU(cuGreenCtxDestroy(greenPair));
  CHECK_CU(cuCtxPushCurrent(plain));
  CHECK_CU(cuEventDestroy(plainEvent));
  CHECK_CU(cuStreamDestroy(plainStream));
  CHECK_CU(cuCtxPopCurrent(nullptr));
  CHECK_CU(cuCtxDestroy(plain));
  return pass();
}
