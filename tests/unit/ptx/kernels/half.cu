#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cuda_fp16.h>
namespace cg = cooperative_groups;

extern "C" __global__ void halfArith(const float* a, const float* b, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  __half ha = __float2half(a[i]), hb = __float2half(b[i]);
  __half2 h2 = __halves2half2(ha, hb);
  __half2 sq = __hmul2(h2, h2);
  __half sum = __hadd(ha, hb);
  __half prod = __hmul(ha, hb);
  __half f = __hfma(ha, hb, sum);
  out[5 * i + 0] = __half2float(sum);
  out[5 * i + 1] = __half2float(prod);
  out[5 * i + 2] = __half2float(f);
  out[5 * i + 3] = __low2float(sq);
  out[5 * i + 4] = __high2float(sq);
}

// Cooperative groups: tiles of 4, shuffles inside the tile, cg::reduce.
extern "C" __global__ void tiles(const int* in, int* out) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<4> tile = cg::tiled_partition<4>(block);
  int v = in[block.thread_rank()];
  int s = v;
  for (int o = tile.size() / 2; o > 0; o /= 2) s += tile.shfl_down(s, o);
  int r = cg::reduce(tile, v, cg::plus<int>());
  out[2 * block.thread_rank()] = tile.shfl(s, 0);
  out[2 * block.thread_rank() + 1] = r;
}
