// Cooperative launches through the driver API: cuLaunchCooperativeKernel and cuLaunchKernelEx with
// CU_LAUNCH_ATTRIBUTE_COOPERATIVE run a kernel whose blocks meet at grid-wide barriers
// (cooperative groups' grid.sync()); a grid too large to be resident at once fails with
// CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE from the launch itself; a cooperative launch captured
// from a stream, and a kernel node given CU_LAUNCH_ATTRIBUTE_COOPERATIVE with
// cuGraphKernelNodeSetAttribute (and another given it by cuGraphKernelNodeCopyAttributes), run as
// cooperative launches in a graph; node attributes read back, unset ones as zero, and those a
// node cannot carry or the pool cannot serve are refused; the deprecated multi-device form runs
// on one device where COOPERATIVE_MULTI_DEVICE_LAUNCH is 1 and is refused where it is 0.
#include <cooperative_groups.h>
#include <cuda.h>

#include <vector>

#include "driver_check.h"
#include "graph_node_params.h"

namespace cg = cooperative_groups;

namespace {

constexpr int kThreads = 32;

// Block b adds its index into every slot of `counts` in turn, one slot per round, and checks
// after each barrier that every block's contribution to the previous slot is there.
__global__ void countRounds(unsigned* counts, int rounds, int* errors) {
  cg::grid_group grid = cg::this_grid();
  const unsigned want = gridDim.x * (gridDim.x - 1) / 2;
  for (int r = 0; r < rounds; ++r) {
    if (threadIdx.x == 0) atomicAdd(&counts[r], blockIdx.x);
    grid.sync();
    if (threadIdx.x == 0 && counts[r] != want) atomicAdd(errors, 1);
  }
}

CUfunction functionOf(const void* kernel) {
  cudaFunction_t f;
  CHECK_CUDA(cudaGetFuncBySymbol(&f, kernel));
  return reinterpret_cast<CUfunction>(f);
}

void checkRun(CUdeviceptr counts, CUdeviceptr errors, int rounds, unsigned blocks,
              const char* how) {
  std::vector<unsigned> got(static_cast<size_t>(rounds));
  int bad = -1;
  CHECK_CU(cuMemcpyDtoH(got.data(), counts, got.size() * sizeof(unsigned)));
  CHECK_CU(cuMemcpyDtoH(&bad, errors, sizeof bad));
  const unsigned want = blocks * (blocks - 1) / 2;
  for (int r = 0; r < rounds; ++r) {
    CHECK(got[r] == want, "%s: round %d counted %u, expected %u", how, r, got[r], want);
  }
  CHECK(bad == 0, "%s: %d blocks saw an incomplete round after grid.sync()", how, bad);
  std::printf("%s: %d barriers across %u blocks\n", how, rounds, blocks);
}

}  // namespace

int main() {
  CHECK_CUDA(cudaFree(nullptr));  // the primary context the driver calls use
  CUdevice device;
  CHECK_CU(cuCtxGetDevice(&device));
  int cooperative = 0, multiDevice = -1, sms = 0;
  CHECK_CU(cuDeviceGetAttribute(&cooperative, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, device));
  CHECK_CU(cuDeviceGetAttribute(&multiDevice, CU_DEVICE_ATTRIBUTE_COOPERATIVE_MULTI_DEVICE_LAUNCH,
                                device));
  CHECK_CU(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device));
  CHECK(cooperative == 1, "COOPERATIVE_LAUNCH is %d", cooperative);

  CUfunction f = functionOf(reinterpret_cast<const void*>(countRounds));
  constexpr int kRounds = 12;
  constexpr unsigned kBlocks = 5;
  CUdeviceptr counts = 0, errors = 0;
  CHECK_CU(cuMemAlloc(&counts, kRounds * sizeof(unsigned)));
  CHECK_CU(cuMemAlloc(&errors, sizeof(int)));
  int rounds = kRounds;
  void* params[] = {&counts, &rounds, &errors};

  CHECK_CU(cuMemsetD32(counts, 0, kRounds));
  CHECK_CU(cuMemsetD32(errors, 0, 1));
  CHECK_CU(cuLaunchCooperativeKernel(f, kBlocks, 1, 1, kThreads, 1, 1, 0, nullptr, params));
  CHECK_CU(cuCtxSynchronize());
  checkRun(counts, errors, kRounds, kBlocks, "cuLaunchCooperativeKernel");

  CUstream stream;
  CHECK_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CHECK_CU(cuMemsetD32Async(counts, 0, kRounds, stream));
  CHECK_CU(cuMemsetD32Async(errors, 0, 1, stream));
  CUlaunchAttribute attribute{};
  attribute.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
  attribute.value.cooperative = 1;
  CUlaunchConfig config{};
  config.gridDimX = kBlocks + 2;
  config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = kThreads;
  config.blockDimY = config.blockDimZ = 1;
  config.hStream = stream;
  config.attrs = &attribute;
  config.numAttrs = 1;
  CHECK_CU(cuLaunchKernelEx(&config, f, params, nullptr));
  CHECK_CU(cuStreamSynchronize(stream));
  checkRun(counts, errors, kRounds, kBlocks + 2, "cuLaunchKernelEx(COOPERATIVE)");

  int perSm = 0;
  CHECK_CU(cuOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, f, kThreads, 0));
  CHECK(perSm > 0, "occupancy says %d blocks per multiprocessor", perSm);
  const unsigned tooMany = static_cast<unsigned>(perSm * sms + 1);
  expectError(cuLaunchCooperativeKernel(f, tooMany, 1, 1, kThreads, 1, 1, 0, nullptr, params),
              CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE,
              "cuLaunchCooperativeKernel(too many blocks)");
  config.gridDimX = tooMany;
  expectError(cuLaunchKernelEx(&config, f, params, nullptr),
              CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, "cuLaunchKernelEx(COOPERATIVE, too many)");
  CHECK_CU(cuCtxSynchronize());
  std::printf("%u blocks (%d per SM x %d SMs + 1) refused at the launch\n", tooMany, perSm, sms);

  // Captured: the launch becomes a kernel node that carries the cooperative attribute.
  CHECK_CU(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CHECK_CU(cuMemsetD32Async(counts, 0, kRounds, stream));
  CHECK_CU(cuMemsetD32Async(errors, 0, 1, stream));
  CHECK_CU(cuLaunchCooperativeKernel(f, kBlocks, 1, 1, kThreads, 1, 1, 0, stream, params));
  CUgraph graph = nullptr;
  CHECK_CU(cuStreamEndCapture(stream, &graph));
  size_t count = 0;
  CHECK_CU(cuGraphGetNodes(graph, nullptr, &count));
  std::vector<CUgraphNode> nodes(count);
  CHECK_CU(cuGraphGetNodes(graph, nodes.data(), &count));
  CUgraphNode captured = nullptr;
  for (CUgraphNode n : nodes) {
    CUgraphNodeType type;
    CHECK_CU(cuGraphNodeGetType(n, &type));
    if (type == CU_GRAPH_NODE_TYPE_KERNEL) captured = n;
  }
  CHECK(captured != nullptr, "the captured graph has no kernel node");
  CUkernelNodeAttrValue value{};
  CHECK_CU(cuGraphKernelNodeGetAttribute(captured, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, &value));
  CHECK(value.cooperative == 1, "the captured node's cooperative attribute is %d",
        value.cooperative);
  CUgraphExec exec = nullptr;
  for (int launch = 0; launch < 2; ++launch) {
    if (!exec) CHECK_CU(cuGraphInstantiate(&exec, graph, 0));
    CHECK_CU(cuGraphLaunch(exec, stream));
    CHECK_CU(cuStreamSynchronize(stream));
    checkRun(counts, errors, kRounds, kBlocks, "captured cooperative launch, graph launched");
  }
  CHECK_CU(cuGraphExecDestroy(exec));
  CHECK_CU(cuGraphDestroy(graph));

  // Built: a kernel node made cooperative by attribute, a second one by copying its attributes.
  CHECK_CU(cuGraphCreate(&graph, 0));
  const CUDA_KERNEL_NODE_PARAMS kernel = kernelNodeParams(f, params, kBlocks, kThreads);
  CUgraphNode first = nullptr, second = nullptr;
  CHECK_CU(cuGraphAddKernelNode(&first, graph, nullptr, 0, &kernel));
  CHECK_CU(cuGraphAddKernelNode(&second, graph, &first, 1, &kernel));
  CHECK_CU(cuGraphKernelNodeGetAttribute(first, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, &value));
  CHECK(value.cooperative == 0, "an unset cooperative attribute reads %d", value.cooperative);
  value = CUkernelNodeAttrValue{};
  value.cooperative = 1;
  CHECK_CU(cuGraphKernelNodeSetAttribute(first, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, &value));
  value = CUkernelNodeAttrValue{};
  value.priority = -1;
  CHECK_CU(cuGraphKernelNodeSetAttribute(first, CU_LAUNCH_ATTRIBUTE_PRIORITY, &value));
  CHECK_CU(cuGraphKernelNodeCopyAttributes(second, first));
  value = CUkernelNodeAttrValue{};
  CHECK_CU(cuGraphKernelNodeGetAttribute(second, CU_LAUNCH_ATTRIBUTE_PRIORITY, &value));
  CHECK(value.priority == -1, "the copied priority is %d", value.priority);
  CHECK_CU(cuGraphKernelNodeGetAttribute(second, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, &value));
  CHECK(value.cooperative == 1, "the copied cooperative attribute is %d", value.cooperative);
  value = CUkernelNodeAttrValue{};
  value.clusterDim.x = 2;
  value.clusterDim.y = value.clusterDim.z = 1;
  // 2x1x1 does not divide the node's grid of kBlocks = 5 blocks (observed on driver 580.159.04,
  // H200).
  expectError(cuGraphKernelNodeSetAttribute(first, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, &value),
              CUDA_ERROR_INVALID_CLUSTER_SIZE, "cuGraphKernelNodeSetAttribute(a 2x1x1 cluster)");
  expectError(cuGraphKernelNodeGetAttribute(
                  first, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, &value),
              CUDA_ERROR_INVALID_VALUE,
              "cuGraphKernelNodeGetAttribute(PROGRAMMATIC_STREAM_SERIALIZATION)");
  CHECK_CU(cuMemsetD32(counts, 0, kRounds));
  CHECK_CU(cuMemsetD32(errors, 0, 1));
  CHECK_CU(cuGraphInstantiate(&exec, graph, 0));
  CHECK_CU(cuGraphLaunch(exec, stream));
  CHECK_CU(cuStreamSynchronize(stream));
  // Two cooperative runs, one after the other, each adding every block's index per round.
  std::vector<unsigned> twice(kRounds);
  CHECK_CU(cuMemcpyDtoH(twice.data(), counts, kRounds * sizeof(unsigned)));
  int bad = -1;
  CHECK_CU(cuMemcpyDtoH(&bad, errors, sizeof bad));
  for (int r = 0; r < kRounds; ++r) {
    CHECK(twice[r] == kBlocks * (kBlocks - 1), "two graph nodes: round %d counted %u, expected %u",
          r, twice[r], kBlocks * (kBlocks - 1));
  }
  // The first node's checks see complete rounds; the second node's checks expect one run's count
  // and so must all have failed, once per block and round: that they ran as grids proves it.
  CHECK(bad == static_cast<int>(kBlocks * kRounds), "the graph's nodes counted %d mismatches", bad);
  CHECK_CU(cuGraphExecDestroy(exec));
  CHECK_CU(cuGraphDestroy(graph));
  std::printf("cooperative kernel nodes: captured, set by attribute, copied\n");

  // The deprecated multi-device form: NVIDIA reports COOPERATIVE_MULTI_DEVICE_LAUNCH 1 (driver
  // 580.159.04, H200) and then launches on one device as cuLaunchCooperativeKernel would; the pool
  // does not serve it, reports 0 and refuses the launch. Either way the call does what the
  // attribute says.
  CHECK(multiDevice == 0 || multiDevice == 1, "COOPERATIVE_MULTI_DEVICE_LAUNCH is %d", multiDevice);
  CUDA_LAUNCH_PARAMS launch{};
  launch.function = f;
  launch.gridDimX = kBlocks;
  launch.gridDimY = launch.gridDimZ = 1;
  launch.blockDimX = kThreads;
  launch.blockDimY = launch.blockDimZ = 1;
  launch.hStream = stream;
  launch.kernelParams = params;
  CHECK_CU(cuMemsetD32Async(counts, 0, kRounds, stream));
  CHECK_CU(cuMemsetD32Async(errors, 0, 1, stream));
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  // deprecated is what it tests
  const CUresult multi = cuLaunchCooperativeKernelMultiDevice(&launch, 1, 0);
#pragma GCC diagnostic pop
  if (multiDevice) {
    CHECK(multi == CUDA_SUCCESS, "cuLaunchCooperativeKernelMultiDevice returned %s",
          cuErrorName(multi));
    CHECK_CU(cuStreamSynchronize(stream));
    checkRun(counts, errors, kRounds, kBlocks, "cuLaunchCooperativeKernelMultiDevice");
  } else {
    expectError(multi, CUDA_ERROR_NOT_SUPPORTED, "cuLaunchCooperativeKernelMultiDevice");
    std::printf("cuLaunchCooperativeKernelMultiDevice refused where the attribute is 0\n");
  }

  CHECK_CU(cuStreamDestroy(stream));
  CHECK_CU(cuMemFree(counts));
  CHECK_CU(cuMemFree(errors));
  return pass();
}
