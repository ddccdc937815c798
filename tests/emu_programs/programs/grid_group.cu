// Cooperative groups' grid group. A module holding a grid.sync() kernel loads and its other
// kernels run; in an ordinary launch before any cooperative one this_grid() is not valid (no grid
// workspace; after one, NVIDIA's driver gives ordinary launches a workspace too) while its rank
// and size still are. The grid.sync() kernel runs only where the device offers cooperative
// launches (cudaDevAttrCooperativeLaunch); elsewhere cudaLaunchCooperativeKernel must fail
// rather than run the kernel without a grid-wide barrier.
#include <cooperative_groups.h>

#include <vector>

#include "self_check.h"

namespace cg = cooperative_groups;

constexpr int kBlocks = 4, kThreads = 64;

// Each thread writes its rank, waits for the whole grid, then reads its neighbour's slot, which
// another block wrote.
__global__ void rotateAcrossGrid(int* data, int* out) {
  cg::grid_group grid = cg::this_grid();
  const unsigned long long rank = grid.thread_rank();
  data[rank] = static_cast<int>(rank) * 3;
  grid.sync();
  out[rank] = data[(rank + 1) % grid.size()];
}

// No grid-wide barrier: rank, size and validity only.
__global__ void describeGrid(int* ranks, int* sizes, int* valid) {
  cg::grid_group grid = cg::this_grid();
  const unsigned long long rank = grid.thread_rank();
  ranks[rank] = static_cast<int>(rank);
  sizes[rank] = static_cast<int>(grid.size());
  if (rank == 0) *valid = grid.is_valid() ? 1 : 0;
}

int main() {
  const int n = kBlocks * kThreads;
  int *ranks, *sizes, *valid, *data, *out;
  CHECK_CUDA(cudaMalloc(&ranks, n * sizeof(int)));
  CHECK_CUDA(cudaMalloc(&sizes, n * sizeof(int)));
  CHECK_CUDA(cudaMalloc(&valid, sizeof(int)));
  CHECK_CUDA(cudaMalloc(&data, n * sizeof(int)));
  CHECK_CUDA(cudaMalloc(&out, n * sizeof(int)));
  describeGrid<<<kBlocks, kThreads>>>(ranks, sizes, valid);
  CHECK_CUDA(cudaGetLastError());
  std::vector<int> hostRanks(n), hostSizes(n);
  int hostValid = -1;
  CHECK_CUDA(cudaMemcpy(hostRanks.data(), ranks, n * sizeof(int), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(hostSizes.data(), sizes, n * sizeof(int), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(&hostValid, valid, sizeof(int), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i)
    CHECK(hostRanks[i] == i && hostSizes[i] == n, "thread %d: rank %d size %d", i, hostRanks[i],
          hostSizes[i]);
  CHECK(hostValid == 0, "this_grid().is_valid() is %d in an ordinary launch", hostValid);
  std::printf("grid rank and size ok\n");

  int cooperative = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, 0));
  void* args[] = {&data, &out};
  const cudaError_t launched = cudaLaunchCooperativeKernel(
      reinterpret_cast<void*>(rotateAcrossGrid), dim3(kBlocks), dim3(kThreads), args, 0, nullptr);
  if (!cooperative) {
    CHECK(launched != cudaSuccess, "cooperative launch succeeded on a device without them");
    cudaGetLastError();  // the refusal is not sticky
    std::printf("cooperative launch refused: %s\n", cudaGetErrorName(launched));
  } else {
    CHECK_CUDA(launched);
    std::vector<int> rotated(n);
    CHECK_CUDA(cudaMemcpy(rotated.data(), out, n * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; ++i)
      CHECK(rotated[i] == ((i + 1) % n) * 3, "rotated[%d] = %d", i, rotated[i]);
    std::printf("grid.sync ok\n");
  }
  // The context still works after the refusal.
  describeGrid<<<1, kThreads>>>(ranks, sizes, valid);
  CHECK_CUDA(cudaDeviceSynchronize());
  for (int* p : {ranks, sizes, valid, data, out}) CHECK_CUDA(cudaFree(p));
  return pass();
}
