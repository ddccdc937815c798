// Cooperative groups within a block: thread_block sync, tiled_partition<32> and <4> with shfl_down
// / shfl_xor / ballot / any, cg::reduce (redux.sync on sm_80+), and coalesced_threads() in a
// divergent branch.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>

#include <vector>

#include "self_check.h"

namespace cg = cooperative_groups;

struct TileResults {
  int sum32;  // tile of 32: shfl_down reduction
  int max4;   // tile of 4: shfl_xor butterfly max
  unsigned ballot4;
  int anyNegative4;
  int reduced;  // cg::reduce over the tile of 32
  int coalescedRank;
  int coalescedSize;
};

__global__ void tiles(const int* in, TileResults* out) {
  cg::thread_block block = cg::this_thread_block();
  const int t = block.thread_rank();
  const int v = in[blockIdx.x * blockDim.x + t];
  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
  cg::thread_block_tile<4> quad = cg::tiled_partition<4>(block);
  int sum = v;
  for (int offset = warp.size() / 2; offset > 0; offset /= 2) sum += warp.shfl_down(sum, offset);
  int maximum = v;
  for (int mask = 1; mask < 4; mask *= 2) {
    const int other = quad.shfl_xor(maximum, mask);
    maximum = other > maximum ? other : maximum;
  }
  TileResults r{};
  r.sum32 = warp.shfl(sum, 0);
  r.max4 = maximum;
  r.ballot4 = quad.ballot(v % 2 == 0);
  r.anyNegative4 = quad.any(v < 0);
  r.reduced = cg::reduce(warp, v, cg::plus<int>());
  block.sync();
  r.coalescedRank = -1;
  r.coalescedSize = -1;
  if (v % 3 == 0) {
    cg::coalesced_group active = cg::coalesced_threads();
    r.coalescedRank = active.thread_rank();
    r.coalescedSize = active.size();
  }
  out[blockIdx.x * blockDim.x + t] = r;
}

int main() {
  const int blocks = 2, threads = 96;
  const int n = blocks * threads;
  std::vector<int> in(n);
  for (int i = 0; i < n; ++i) in[i] = (i * 29) % 61 - 20;
  int* din;
  TileResults* dout;
  CHECK_CUDA(cudaMalloc(&din, n * sizeof(int)));
  CHECK_CUDA(cudaMalloc(&dout, n * sizeof(TileResults)));
  CHECK_CUDA(cudaMemcpy(din, in.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  tiles<<<blocks, threads>>>(din, dout);
  CHECK_CUDA(cudaGetLastError());
  std::vector<TileResults> out(n);
  CHECK_CUDA(cudaMemcpy(out.data(), dout, n * sizeof(TileResults), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) {
    const int warpBase = i / 32 * 32, quadBase = i / 4 * 4;
    int sum = 0, maximum = -1000, anyNegative = 0;
    unsigned ballot = 0;
    for (int l = 0; l < 32; ++l) sum += in[warpBase + l];
    for (int l = 0; l < 4; ++l) {
      const int v = in[quadBase + l];
      maximum = v > maximum ? v : maximum;
      if (v % 2 == 0) ballot |= 1u << l;
      anyNegative |= v < 0;
    }
    // Rank among the lanes of the same warp that took the branch (v % 3 == 0).
    int rank = -1, size = -1;
    if (in[i] % 3 == 0) {
      rank = 0;
      size = 0;
      for (int l = 0; l < 32; ++l) {
        if (in[warpBase + l] % 3 == 0) {
          if (warpBase + l < i) ++rank;
          ++size;
        }
      }
    }
    const TileResults& r = out[i];
    CHECK(r.sum32 == sum && r.reduced == sum, "thread %d: tile sums %d / %d, expected %d", i,
          r.sum32, r.reduced, sum);
    CHECK(r.max4 == maximum, "thread %d: quad max %d, expected %d", i, r.max4, maximum);
    CHECK(r.ballot4 == ballot && (r.anyNegative4 != 0) == (anyNegative != 0),
          "thread %d: quad ballot %x any %d, expected %x %d", i, r.ballot4, r.anyNegative4, ballot,
          anyNegative);
    CHECK(r.coalescedRank == rank && r.coalescedSize == size,
          "thread %d: coalesced rank %d of %d, expected %d of %d", i, r.coalescedRank,
          r.coalescedSize, rank, size);
  }
  std::printf("cooperative groups tiles ok\n");
  CHECK_CUDA(cudaFree(din));
  CHECK_CUDA(cudaFree(dout));
  return pass();
}
