// Thread-block clusters through the driver API, as the device offers them:
// - on a device that reports CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH (Hopper and later, and the emu
//   device at compute capability 9.0): a kernel of sm_90 PTX launched with cuLaunchKernelEx in
//   2x1x1 clusters sees clusters of two (%cluster_nctarank) and its rank in them
//   (%cluster_ctarank); a 4x1x1 cluster on a grid of 6 is refused with
//   CUDA_ERROR_INVALID_CLUSTER_SIZE; cuOccupancyMaxActiveClusters gives at least one cluster,
//   cuOccupancyMaxPotentialClusterSize at least 2 (8 is portable); a kernel node in 4x1x1 clusters
//   (cuGraphKernelNodeSetAttribute) runs in them as a graph, and 3x1x1 on its grid of 8 is refused
//   with CUDA_ERROR_INVALID_CLUSTER_SIZE; a preferred cluster of 4 beside the regular 2
//   (CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION, launch and kernel node) runs each block in a
//   cluster of 4 or of 2, as the driver chooses, numbered as if the grid held only that kind; a
//   preferred 3 (not a multiple of 2) is refused with CUDA_ERROR_INVALID_VALUE, a preferred 16 on
//   a grid of 8 with CUDA_ERROR_INVALID_CLUSTER_SIZE;
// - on a device without (the emu device below compute capability 9.0): a 2x1x1 cluster launch or
//   kernel node is refused with CUDA_ERROR_INVALID_VALUE and both occupancy calls with
//   CUDA_ERROR_NOT_SUPPORTED, while a 1x1x1 cluster is an ordinary launch, and so is a launch
//   with a preferred cluster but no regular one (the attribute then has no effect).
#include <cuda.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "driver_check.h"

namespace {

// Every thread of block b writes {cluster size, rank in the cluster} to out[b].
const char kClusterShapePtx[] = R"(
.version 7.8
.target sm_90
.address_size 64

.visible .entry clusterShape(.param .u64 out)
{
  .reg .b32 %r<4>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [out];
  cvta.to.global.u64 %rd1, %rd1;
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %cluster_nctarank;
  mov.u32 %r3, %cluster_ctarank;
  mul.wide.u32 %rd2, %r1, 8;
  add.s64 %rd3, %rd1, %rd2;
  st.global.v2.u32 [%rd3], {%r2, %r3};
  ret;
}
)";

// Any device: block b writes b + 1.
__global__ void markBlocks(unsigned* out) {
  if (threadIdx.x == 0) out[blockIdx.x] = blockIdx.x + 1;
}

// A kernel node of `blocks` blocks of 32 threads.
CUgraphNode addKernelNode(CUgraph graph, CUfunction f, unsigned blocks, void** params) {
  CUDA_KERNEL_NODE_PARAMS node{};
  node.func = f;
  node.gridDimX = blocks;
  node.gridDimY = node.gridDimZ = 1;
  node.blockDimX = 32;
  node.blockDimY = node.blockDimZ = 1;
  node.kernelParams = params;
  CUgraphNode kernel = nullptr;
  CHECK_CU(cuGraphAddKernelNode(&kernel, graph, nullptr, 0, &node));
  return kernel;
}

CUlaunchConfig configOf(unsigned blocks, CUlaunchAttribute* cluster, unsigned x) {
  CUlaunchConfig config{};
  config.gridDimX = blocks;
  config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = 32;
  config.blockDimY = config.blockDimZ = 1;
  *cluster = CUlaunchAttribute{};
  cluster->id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  cluster->value.clusterDim.x = x;
  cluster->value.clusterDim.y = cluster->value.clusterDim.z = 1;
  config.attrs = cluster;
  config.numAttrs = 1;
  return config;
}

// configOf's launch, with a preferred cluster of `x` blocks beside its regular one.
CUlaunchConfig preferringConfig(unsigned blocks, CUlaunchAttribute attributes[2], unsigned regular,
                                unsigned x) {
  CUlaunchConfig config = configOf(blocks, &attributes[0], regular);
  attributes[1] = CUlaunchAttribute{};
  attributes[1].id = CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION;
  attributes[1].value.preferredClusterDim.x = x;
  attributes[1].value.preferredClusterDim.y = attributes[1].value.preferredClusterDim.z = 1;
  config.numAttrs = 2;
  return config;
}

// What clusterShape wrote with a regular cluster of 2 and a preferred one of 4: every block in a
// cluster of 2 or of 4, ranked as if the grid held only that kind of cluster, and every block of
// one cluster seeing the same size.
void expectRegularOrPreferred(const uint32_t (*seen)[2], unsigned blocks, const char* what) {
  for (unsigned b = 0; b < blocks; ++b) {
    const uint32_t size = seen[b][0];
    CHECK((size == 2 || size == 4) && seen[b][1] == b % size,
          "%s: block %u saw a cluster of %u and rank %u, expected 2 or 4 and its rank in it", what,
          b, size, seen[b][1]);
    const unsigned first = b - b % size;
    for (unsigned other = first; other < first + size; ++other) {
      CHECK(seen[other][0] == size, "%s: blocks %u and %u of one cluster saw sizes %u and %u", what,
            b, other, size, seen[other][0]);
    }
  }
}

void withoutClusters(CUdeviceptr out) {
  cudaFunction_t found = nullptr;
  CHECK_CUDA(cudaGetFuncBySymbol(&found, reinterpret_cast<const void*>(markBlocks)));
  auto mark = reinterpret_cast<CUfunction>(found);
  CUlaunchAttribute cluster;
  void* params[] = {&out};
  CUlaunchConfig two = configOf(4, &cluster, 2);
  expectError(cuLaunchKernelEx(&two, mark, params, nullptr), CUDA_ERROR_INVALID_VALUE,
              "a 2x1x1 cluster on a device without cluster launch");
  int value = -1;
  expectError(cuOccupancyMaxActiveClusters(&value, mark, &two), CUDA_ERROR_NOT_SUPPORTED,
              "cuOccupancyMaxActiveClusters without cluster launch");
  expectError(cuOccupancyMaxPotentialClusterSize(&value, mark, &two), CUDA_ERROR_NOT_SUPPORTED,
              "cuOccupancyMaxPotentialClusterSize without cluster launch");
  CUlaunchConfig one = configOf(4, &cluster, 1);
  CHECK_CU(cuLaunchKernelEx(&one, mark, params, nullptr));
  unsigned marks[4] = {};
  CHECK_CU(cuMemcpyDtoH(marks, out, sizeof marks));
  for (unsigned b = 0; b < 4; ++b) {
    CHECK(marks[b] == b + 1, "a 1x1x1 cluster launch: block %u wrote %u", b, marks[b]);
  }
  // A preferred cluster without a regular one has no effect: an ordinary launch.
  CUlaunchAttribute attributes[2];
  CUlaunchConfig preferredOnly = preferringConfig(4, attributes, 1, 2);
  preferredOnly.attrs = &attributes[1];
  preferredOnly.numAttrs = 1;
  CHECK_CU(cuMemsetD32(out, 0, 4));
  CHECK_CU(cuLaunchKernelEx(&preferredOnly, mark, params, nullptr));
  CHECK_CU(cuMemcpyDtoH(marks, out, sizeof marks));
  for (unsigned b = 0; b < 4; ++b) {
    CHECK(marks[b] == b + 1, "a preferred cluster alone: block %u wrote %u", b, marks[b]);
  }
  // A kernel node takes no cluster larger than 1x1x1 either.
  CUgraph graph = nullptr;
  CHECK_CU(cuGraphCreate(&graph, 0));
  CUgraphNode kernel = addKernelNode(graph, mark, 4, params);
  CUkernelNodeAttrValue pair{};
  pair.clusterDim.x = 2;
  pair.clusterDim.y = pair.clusterDim.z = 1;
  expectError(cuGraphKernelNodeSetAttribute(kernel, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, &pair),
              CUDA_ERROR_INVALID_VALUE, "a 2x1x1 kernel node on a device without cluster launch");
  CHECK_CU(cuGraphDestroy(graph));
  std::printf("no thread-block clusters on this device: refused; 1x1x1 runs as a plain launch\n");
}

void withClusters(CUdeviceptr out) {
  CUmodule module = nullptr;
  CHECK_CU(cuModuleLoadData(&module, kClusterShapePtx));
  CUfunction shape = nullptr;
  CHECK_CU(cuModuleGetFunction(&shape, module, "clusterShape"));
  constexpr unsigned kBlocks = 8;
  CUlaunchAttribute cluster;
  void* params[] = {&out};
  CUlaunchConfig pairs = configOf(kBlocks, &cluster, 2);
  CHECK_CU(cuLaunchKernelEx(&pairs, shape, params, nullptr));
  uint32_t seen[kBlocks][2] = {};
  CHECK_CU(cuMemcpyDtoH(seen, out, sizeof seen));
  for (unsigned b = 0; b < kBlocks; ++b) {
    CHECK(seen[b][0] == 2 && seen[b][1] == b % 2,
          "block %u saw a cluster of %u and rank %u, expected 2 and %u", b, seen[b][0], seen[b][1],
          b % 2);
  }
  CUlaunchConfig uneven = configOf(6, &cluster, 4);
  expectError(cuLaunchKernelEx(&uneven, shape, params, nullptr), CUDA_ERROR_INVALID_CLUSTER_SIZE,
              "a grid of 6 in clusters of 4");
  int active = 0, size = 0;
  CHECK_CU(cuOccupancyMaxActiveClusters(&active, shape, &pairs));
  CHECK(active >= 1, "cuOccupancyMaxActiveClusters: %d clusters of 2", active);
  CHECK_CU(cuOccupancyMaxPotentialClusterSize(&size, shape, &pairs));
  CHECK(size >= 2, "cuOccupancyMaxPotentialClusterSize: %d", size);
  std::printf(
      "clusters of 2: every block saw its cluster; %d clusters fit at once, at most %d "
      "blocks in one\n",
      active, size);

  // Clusters of 2 that would rather be 4 (best effort: either may run).
  CUlaunchAttribute attributes[2];
  CUlaunchConfig preferring = preferringConfig(kBlocks, attributes, 2, 4);
  CHECK_CU(cuMemsetD32(out, 0, 2 * kBlocks));
  CHECK_CU(cuLaunchKernelEx(&preferring, shape, params, nullptr));
  CHECK_CU(cuMemcpyDtoH(seen, out, sizeof seen));
  expectRegularOrPreferred(seen, kBlocks, "preferred clusters of 4");
  CUlaunchConfig notMultiple = preferringConfig(kBlocks, attributes, 2, 3);
  expectError(cuLaunchKernelEx(&notMultiple, shape, params, nullptr), CUDA_ERROR_INVALID_VALUE,
              "a preferred cluster of 3 beside clusters of 2");
  CUlaunchConfig tooLarge = preferringConfig(kBlocks, attributes, 2, 16);
  expectError(cuLaunchKernelEx(&tooLarge, shape, params, nullptr), CUDA_ERROR_INVALID_CLUSTER_SIZE,
              "a preferred cluster of 16 on a grid of 8");
  std::printf("preferred clusters of 4 beside clusters of 2: every block saw one of them\n");

  // A kernel node in clusters of 4 (cuGraphKernelNodeSetAttribute), launched as a graph; a shape
  // that does not divide the node's grid is refused.
  CHECK_CU(cuMemsetD32(out, 0, 2 * kBlocks));
  CUgraph graph = nullptr;
  CHECK_CU(cuGraphCreate(&graph, 0));
  CUgraphNode kernel = addKernelNode(graph, shape, kBlocks, params);
  CUkernelNodeAttrValue value{};
  value.clusterDim.x = 3;
  value.clusterDim.y = value.clusterDim.z = 1;
  expectError(cuGraphKernelNodeSetAttribute(kernel, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, &value),
              CUDA_ERROR_INVALID_CLUSTER_SIZE, "a kernel node of 8 blocks in clusters of 3");
  value.clusterDim.x = 4;
  CHECK_CU(cuGraphKernelNodeSetAttribute(kernel, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, &value));
  CUkernelNodeAttrValue read{};
  CHECK_CU(cuGraphKernelNodeGetAttribute(kernel, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, &read));
  CHECK(read.clusterDim.x == 4 && read.clusterDim.y == 1 && read.clusterDim.z == 1,
        "the node's cluster reads as %ux%ux%u", read.clusterDim.x, read.clusterDim.y,
        read.clusterDim.z);
  CUgraphExec exec = nullptr;
  CHECK_CU(cuGraphInstantiate(&exec, graph, 0));
  CHECK_CU(cuGraphLaunch(exec, nullptr));
  CHECK_CU(cuCtxSynchronize());
  CHECK_CU(cuMemcpyDtoH(seen, out, sizeof seen));
  for (unsigned b = 0; b < kBlocks; ++b) {
    CHECK(seen[b][0] == 4 && seen[b][1] == b % 4,
          "graph: block %u saw a cluster of %u and rank %u, expected 4 and %u", b, seen[b][0],
          seen[b][1], b % 4);
  }
  std::printf("a kernel node in clusters of 4: every block saw its cluster\n");

  // cuGraphExecUpdate to the same node in clusters of 2: the exec runs in the new clusters.
  CUgraph pairsGraph = nullptr;
  CHECK_CU(cuGraphCreate(&pairsGraph, 0));
  CUgraphNode pairsNode = addKernelNode(pairsGraph, shape, kBlocks, params);
  value.clusterDim.x = 2;
  CHECK_CU(cuGraphKernelNodeSetAttribute(pairsNode, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, &value));
  CUgraphExecUpdateResultInfo info{};
  CHECK_CU(cuGraphExecUpdate(exec, pairsGraph, &info));
  CHECK_CU(cuMemsetD32(out, 0, 2 * kBlocks));
  CHECK_CU(cuGraphLaunch(exec, nullptr));
  CHECK_CU(cuCtxSynchronize());
  CHECK_CU(cuMemcpyDtoH(seen, out, sizeof seen));
  for (unsigned b = 0; b < kBlocks; ++b) {
    CHECK(seen[b][0] == 2 && seen[b][1] == b % 2,
          "updated graph: block %u saw a cluster of %u and rank %u, expected 2 and %u", b,
          seen[b][0], seen[b][1], b % 2);
  }
  CHECK_CU(cuGraphExecDestroy(exec));

  // A kernel node in clusters of 2 that would rather be 4.
  CUgraph preferringGraph = nullptr;
  CHECK_CU(cuGraphCreate(&preferringGraph, 0));
  CUgraphNode preferringNode = addKernelNode(preferringGraph, shape, kBlocks, params);
  CHECK_CU(
      cuGraphKernelNodeSetAttribute(preferringNode, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, &value));
  CUkernelNodeAttrValue preferredValue{};
  preferredValue.preferredClusterDim.x = 4;
  preferredValue.preferredClusterDim.y = preferredValue.preferredClusterDim.z = 1;
  CHECK_CU(cuGraphKernelNodeSetAttribute(
      preferringNode, CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION, &preferredValue));
  CHECK_CU(cuGraphKernelNodeGetAttribute(preferringNode,
                                         CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION, &read));
  CHECK(read.preferredClusterDim.x == 4 && read.preferredClusterDim.y == 1 &&
            read.preferredClusterDim.z == 1,
        "the node's preferred cluster reads as %ux%ux%u", read.preferredClusterDim.x,
        read.preferredClusterDim.y, read.preferredClusterDim.z);
  CHECK_CU(cuGraphInstantiate(&exec, preferringGraph, 0));
  CHECK_CU(cuMemsetD32(out, 0, 2 * kBlocks));
  CHECK_CU(cuGraphLaunch(exec, nullptr));
  CHECK_CU(cuCtxSynchronize());
  CHECK_CU(cuMemcpyDtoH(seen, out, sizeof seen));
  expectRegularOrPreferred(seen, kBlocks, "graph with preferred clusters of 4");
  CHECK_CU(cuGraphExecDestroy(exec));
  CHECK_CU(cuGraphDestroy(preferringGraph));
  std::printf("a kernel node preferring clusters of 4: every block saw one of them\n");
  CHECK_CU(cuGraphDestroy(pairsGraph));
  CHECK_CU(cuGraphDestroy(graph));
  CHECK_CU(cuModuleUnload(module));
  std::printf("updated by cuGraphExecUpdate to clusters of 2: every block saw its cluster\n");
}

}  // namespace

int main() {
  const CUdevice device = usePrimaryContext();
  int clusterLaunch = 0;
  CHECK_CU(cuDeviceGetAttribute(&clusterLaunch, CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, device));
  CUdeviceptr out;
  CHECK_CU(cuMemAlloc(&out, 64 * sizeof(uint32_t)));
  if (clusterLaunch) {
    withClusters(out);
  } else {
    withoutClusters(out);
  }
  CHECK_CU(cuMemFree(out));
  return pass();
}
