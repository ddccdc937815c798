// Thread-block clusters as the CUDA programming guide uses them (compute capability 9.0):
// - a histogram whose bins are spread over the shared memory of a cluster's blocks (distributed
//   shared memory: cluster.map_shared_rank and atomicAdd on another block's memory, cluster.sync),
//   launched with cudaLaunchKernelEx and a cluster dimension attribute;
// - a kernel with __cluster_dims__ launched with <<<>>>: each block sees its cluster's size and its
//   rank, and reads the value the next block of its cluster left in shared memory;
// - a cluster launch captured into a graph and launched twice;
// - cudaOccupancyMaxActiveClusters and cudaOccupancyMaxPotentialClusterSize, and a cluster shape
//   that does not divide the grid refused with cudaErrorInvalidClusterSize.
// On a device below 9.0 (no cudaDevAttrClusterLaunch), or with kernels built for an older target
// (the suite's flavours other than sm90), a cluster launch is refused and the rest is skipped.
#include <cooperative_groups.h>

#include <cstdio>
#include <vector>

#include "self_check.h"

namespace cg = cooperative_groups;

namespace {

constexpr int kBins = 64;
constexpr int kThreads = 128;

// Block b of each cluster holds bins [b * binsPerBlock, (b + 1) * binsPerBlock) in its shared
// memory; every thread adds its elements to whichever block holds their bin, then each block
// adds its bins to the global histogram.
__global__ void clusterHistogram(const int* values, size_t count, int* bins, int binsPerBlock) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ int local[];
  cg::cluster_group cluster = cg::this_cluster();
  for (int i = threadIdx.x; i < binsPerBlock; i += blockDim.x) local[i] = 0;
  cluster.sync();  // every block's bins are zero before anyone adds
  const size_t stride = size_t{blockDim.x} * gridDim.x;
  for (size_t i = size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < count; i += stride) {
    const int bin = values[i];
    int* owner = cluster.map_shared_rank(local, bin / binsPerBlock);
    atomicAdd(owner + bin % binsPerBlock, 1);
  }
  cluster.sync();  // no block leaves while others may still add to its bins
  int* mine = bins + cluster.block_rank() * binsPerBlock;
  for (int i = threadIdx.x; i < binsPerBlock; i += blockDim.x) atomicAdd(mine + i, local[i]);
#else
  (void)values, (void)count, (void)bins, (void)binsPerBlock;
#endif
}

// out[block] = {cluster size, rank, what the next block of the cluster stored, its rank}.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__global__ void __cluster_dims__(2, 1, 1) neighbours(int4* out) {
  __shared__ int mark;
  cg::cluster_group cluster = cg::this_cluster();
  if (threadIdx.x == 0) mark = 1000 + blockIdx.x;
  cluster.sync();
  const unsigned next = (cluster.block_rank() + 1) % cluster.num_blocks();
  const int* theirs = cluster.map_shared_rank(&mark, next);
  const int seen = *theirs;
  const int theirRank = static_cast<int>(cluster.query_shared_rank(theirs));
  cluster.sync();
  if (threadIdx.x == 0)
    out[blockIdx.x] = make_int4(static_cast<int>(cluster.num_blocks()),
                                static_cast<int>(cluster.block_rank()), seen, theirRank);
}
#else
__global__ void neighbours(int4* out) { (void)out; }
#endif

cudaLaunchConfig_t clusterLaunch(unsigned blocks, unsigned clusterX, size_t shared,
                                 cudaLaunchAttribute* attribute, cudaStream_t stream = nullptr) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(blocks);
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = shared;
  config.stream = stream;
  attribute->id = cudaLaunchAttributeClusterDimension;
  attribute->val.clusterDim.x = clusterX;
  attribute->val.clusterDim.y = 1;
  attribute->val.clusterDim.z = 1;
  config.attrs = attribute;
  config.numAttrs = 1;
  return config;
}

std::vector<int> expectedHistogram(const std::vector<int>& values) {
  std::vector<int> h(kBins, 0);
  for (int v : values) ++h[v];
  return h;
}

void checkHistogram(const int* deviceBins, const std::vector<int>& expected, int launches,
                    const char* what) {
  std::vector<int> got(kBins);
  CHECK_CUDA(cudaMemcpy(got.data(), deviceBins, kBins * sizeof(int), cudaMemcpyDeviceToHost));
  for (int b = 0; b < kBins; ++b)
    CHECK(got[b] == launches * expected[b], "%s: bin %d holds %d, expected %d", what, b, got[b],
          launches * expected[b]);
}

}  // namespace

int main() {
  int device = 0, major = 0, clusters = 0;
  CHECK_CUDA(cudaGetDevice(&device));
  CHECK_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  CHECK_CUDA(cudaDeviceGetAttribute(&clusters, cudaDevAttrClusterLaunch, device));
  CHECK((major >= 9) == (clusters == 1), "compute capability %d.x reports CLUSTER_LAUNCH %d", major,
        clusters);

  std::vector<int> values(50000);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<int>((i * 7919 + i / 3) % kBins);
  const std::vector<int> expected = expectedHistogram(values);
  int *deviceValues = nullptr, *bins = nullptr;
  CHECK_CUDA(cudaMalloc(&deviceValues, values.size() * sizeof(int)));
  CHECK_CUDA(cudaMalloc(&bins, kBins * sizeof(int)));
  CHECK_CUDA(
      cudaMemcpy(deviceValues, values.data(), values.size() * sizeof(int), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(bins, 0, kBins * sizeof(int)));

  cudaFuncAttributes kernel;
  CHECK_CUDA(cudaFuncGetAttributes(&kernel, clusterHistogram));
  cudaLaunchAttribute attribute;
  if (!clusters || kernel.ptxVersion < 90) {
    cudaLaunchConfig_t config = clusterLaunch(8, 2, 32 * sizeof(int), &attribute);
    const cudaError_t refused = cudaLaunchKernelEx(
        &config, clusterHistogram, static_cast<const int*>(deviceValues), values.size(), bins, 32);
    if (!clusters) {
      CHECK(refused != cudaSuccess, "a cluster launch succeeded on a device without clusters");
      std::printf("cluster launch refused (%s) on compute capability %d.x\n",
                  cudaGetErrorName(refused), major);
      cudaGetLastError();
    } else {
      CHECK_CUDA(refused);  // clusters of an older target's kernel: no cluster code to run
      CHECK_CUDA(cudaDeviceSynchronize());
    }
    std::printf("cluster kernels skipped: compute capability %d.x, kernel built for %d\n", major,
                kernel.ptxVersion);
    return pass();
  }

  // The histogram in clusters of 2, 4 and 8 blocks: the bins spread over more shared memories.
  int launches = 0;
  for (unsigned clusterX : {2u, 4u, 8u}) {
    const int binsPerBlock = kBins / static_cast<int>(clusterX);
    cudaLaunchConfig_t config = clusterLaunch(16, clusterX, binsPerBlock * sizeof(int), &attribute);
    CHECK_CUDA(cudaLaunchKernelEx(&config, clusterHistogram, static_cast<const int*>(deviceValues),
                                  values.size(), bins, binsPerBlock));
    CHECK_CUDA(cudaDeviceSynchronize());
    ++launches;
    checkHistogram(bins, expected, launches, "cudaLaunchKernelEx");
  }
  std::printf("distributed shared memory histogram in clusters of 2, 4 and 8: ok\n");

  // __cluster_dims__(2, 1, 1) with <<<>>>.
  int4* out = nullptr;
  CHECK_CUDA(cudaMalloc(&out, 6 * sizeof(int4)));
  neighbours<<<6, 64>>>(out);
  CHECK_CUDA(cudaGetLastError());
  int4 seen[6];
  CHECK_CUDA(cudaMemcpy(seen, out, sizeof seen, cudaMemcpyDeviceToHost));
  for (int b = 0; b < 6; ++b) {
    const int next = b ^ 1;
    CHECK(seen[b].x == 2 && seen[b].y == b % 2 && seen[b].z == 1000 + next && seen[b].w == next % 2,
          "block %d of a __cluster_dims__(2,1,1) kernel saw {%d, %d, %d, %d}", b, seen[b].x,
          seen[b].y, seen[b].z, seen[b].w);
  }
  cudaFuncAttributes fixed;
  CHECK_CUDA(cudaFuncGetAttributes(&fixed, neighbours));
  CHECK(fixed.requiredClusterWidth == 2 && fixed.requiredClusterHeight == 1 &&
            fixed.requiredClusterDepth == 1 && fixed.clusterDimMustBeSet == 1,
        "__cluster_dims__(2,1,1) reads as %dx%dx%d (must be set: %d)", fixed.requiredClusterWidth,
        fixed.requiredClusterHeight, fixed.requiredClusterDepth, fixed.clusterDimMustBeSet);
  std::printf("__cluster_dims__(2,1,1) with <<<>>>: ranks and neighbours ok\n");

  // A captured cluster launch, replayed twice.
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  {
    cudaLaunchConfig_t config = clusterLaunch(8, 4, 16 * sizeof(int), &attribute, stream);
    CHECK_CUDA(cudaLaunchKernelEx(&config, clusterHistogram, static_cast<const int*>(deviceValues),
                                  values.size(), bins, 16));
  }
  cudaGraph_t graph;
  CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
  size_t nodeCount = 0;
  CHECK_CUDA(cudaGraphGetNodes(graph, nullptr, &nodeCount));
  CHECK(nodeCount == 1, "the capture made %zu nodes", nodeCount);
  cudaGraphNode_t node;
  CHECK_CUDA(cudaGraphGetNodes(graph, &node, &nodeCount));
  cudaLaunchAttributeValue value{};
  CHECK_CUDA(cudaGraphKernelNodeGetAttribute(node, cudaLaunchAttributeClusterDimension, &value));
  CHECK(value.clusterDim.x == 4 && value.clusterDim.y == 1 && value.clusterDim.z == 1,
        "the captured node's cluster is %ux%ux%u", value.clusterDim.x, value.clusterDim.y,
        value.clusterDim.z);
  cudaGraphExec_t exec;
  CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  CHECK_CUDA(cudaGraphLaunch(exec, stream));
  CHECK_CUDA(cudaGraphLaunch(exec, stream));
  CHECK_CUDA(cudaStreamSynchronize(stream));
  launches += 2;
  checkHistogram(bins, expected, launches, "captured cluster launch");
  CHECK_CUDA(cudaGraphExecDestroy(exec));
  CHECK_CUDA(cudaGraphDestroy(graph));
  std::printf("captured cluster launch, launched twice: ok\n");

  // Occupancy, and a shape the grid does not divide.
  {
    cudaLaunchConfig_t config = clusterLaunch(16, 4, 16 * sizeof(int), &attribute);
    int active = 0, potential = 0;
    CHECK_CUDA(cudaOccupancyMaxActiveClusters(&active, clusterHistogram, &config));
    CHECK_CUDA(cudaOccupancyMaxPotentialClusterSize(&potential, clusterHistogram, &config));
    CHECK(active >= 1 && potential >= 2, "max active clusters %d, potential cluster size %d",
          active, potential);
    std::printf("occupancy: %d clusters of 4 at once, clusters of up to %d\n", active, potential);
    cudaLaunchConfig_t uneven = clusterLaunch(6, 4, 16 * sizeof(int), &attribute);
    EXPECT_CUDA_ERROR(
        cudaLaunchKernelEx(&uneven, clusterHistogram, static_cast<const int*>(deviceValues),
                           values.size(), bins, 16),
        cudaErrorInvalidClusterSize);
    cudaGetLastError();
  }
  CHECK_CUDA(cudaStreamDestroy(stream));
  CHECK_CUDA(cudaFree(out));
  CHECK_CUDA(cudaFree(bins));
  CHECK_CUDA(cudaFree(deviceValues));
  return pass();
}
