// Warp-level primitives: shuffles (down, up, xor, idx, with a width), votes (ballot, any, all),
// __activemask, __match_any_sync and a warp-shuffle reduction that uses an early-exit guard so
// that exited lanes must not block the shuffle.
#include <vector>

#include "self_check.h"

struct LaneResults {
  int down, up, xorred, idx, width8;
  unsigned ballot;
  int any, all;
  unsigned active;
  unsigned match;
};

__global__ void warpOps(const int* in, LaneResults* out) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  const int lane = threadIdx.x % 32;
  const int v = in[t];
  LaneResults r;
  r.down = __shfl_down_sync(0xffffffffu, v, 3);
  r.up = __shfl_up_sync(0xffffffffu, v, 5);
  r.xorred = __shfl_xor_sync(0xffffffffu, v, 9);
  r.idx = __shfl_sync(0xffffffffu, v, (lane * 7) % 32);
  r.width8 = __shfl_sync(0xffffffffu, v, 2, 8);
  r.ballot = __ballot_sync(0xffffffffu, v % 3 == 0);
  r.any = __any_sync(0xffffffffu, v > 90);
  r.all = __all_sync(0xffffffffu, v >= 0);
  r.active = 0;
  if (lane % 4 == 1) r.active = __activemask();
  r.match = __match_any_sync(0xffffffffu, v % 5);
  out[t] = r;
}

// Sum of in[0..n) by warp shuffles plus one atomic per warp. Threads past n return early.
__global__ void shuffleSum(const int* in, int n, int* total) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const unsigned mask = __ballot_sync(__activemask(), true);
  int v = in[i];
  for (int offset = 16; offset > 0; offset /= 2) {
    const int other = __shfl_down_sync(mask, v, offset);
    if ((threadIdx.x % 32) + offset < 32 && ((mask >> ((threadIdx.x % 32) + offset)) & 1)) {
      v += other;
    }
  }
  if (threadIdx.x % 32 == 0) atomicAdd(total, v);
}

int main() {
  const int threads = 64;
  std::vector<int> in(threads);
  for (int i = 0; i < threads; ++i) in[i] = (i * 37 + 11) % 101;
  int* din;
  LaneResults* dout;
  CHECK_CUDA(cudaMalloc(&din, threads * sizeof(int)));
  CHECK_CUDA(cudaMalloc(&dout, threads * sizeof(LaneResults)));
  CHECK_CUDA(cudaMemcpy(din, in.data(), threads * sizeof(int), cudaMemcpyHostToDevice));
  warpOps<<<1, threads>>>(din, dout);
  CHECK_CUDA(cudaGetLastError());
  std::vector<LaneResults> out(threads);
  CHECK_CUDA(cudaMemcpy(out.data(), dout, threads * sizeof(LaneResults), cudaMemcpyDeviceToHost));
  for (int t = 0; t < threads; ++t) {
    const int warp = t / 32 * 32;
    const int lane = t % 32;
    const LaneResults& r = out[t];
    const int down = lane + 3 < 32 ? in[t + 3] : in[t];
    const int up = lane >= 5 ? in[t - 5] : in[t];
    CHECK(r.down == down, "lane %d: shfl_down %d, expected %d", t, r.down, down);
    CHECK(r.up == up, "lane %d: shfl_up %d, expected %d", t, r.up, up);
    CHECK(r.xorred == in[warp + (lane ^ 9)], "lane %d: shfl_xor %d", t, r.xorred);
    CHECK(r.idx == in[warp + (lane * 7) % 32], "lane %d: shfl idx %d", t, r.idx);
    CHECK(r.width8 == in[warp + lane / 8 * 8 + 2], "lane %d: shfl width 8 gave %d", t, r.width8);
    unsigned ballot = 0, match = 0;
    bool any = false, all = true;
    for (int l = 0; l < 32; ++l) {
      if (in[warp + l] % 3 == 0) ballot |= 1u << l;
      if (in[warp + l] % 5 == in[t] % 5) match |= 1u << l;
      any = any || in[warp + l] > 90;
      all = all && in[warp + l] >= 0;
    }
    CHECK(r.ballot == ballot, "lane %d: ballot %08x, expected %08x", t, r.ballot, ballot);
    CHECK((r.any != 0) == any && (r.all != 0) == all, "lane %d: any/all %d/%d", t, r.any, r.all);
    CHECK(r.match == match, "lane %d: match_any %08x, expected %08x", t, r.match, match);
    if (lane % 4 == 1) {
      CHECK(r.active == 0x22222222u, "lane %d: activemask %08x, expected 22222222", t, r.active);
    }
  }
  std::printf("warp ops on %d lanes ok\n", threads);

  const int n = 1000;  // not a multiple of 32: the last warp is partial
  std::vector<int> values(n);
  int expected = 0;
  for (int i = 0; i < n; ++i) {
    values[i] = i % 17 - 8 + i / 100;
    expected += values[i];
  }
  int *dvalues, *dtotal;
  CHECK_CUDA(cudaMalloc(&dvalues, n * sizeof(int)));
  CHECK_CUDA(cudaMalloc(&dtotal, sizeof(int)));
  CHECK_CUDA(cudaMemcpy(dvalues, values.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(dtotal, 0, sizeof(int)));
  shuffleSum<<<(n + 127) / 128, 128>>>(dvalues, n, dtotal);
  CHECK_CUDA(cudaGetLastError());
  int total = 0;
  CHECK_CUDA(cudaMemcpy(&total, dtotal, sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(total == expected, "shuffle sum %d, expected %d", total, expected);
  std::printf("shuffle sum ok\n");
  CHECK_CUDA(cudaFree(din));
  CHECK_CUDA(cudaFree(dout));
  CHECK_CUDA(cudaFree(dvalues));
  CHECK_CUDA(cudaFree(dtotal));
  return pass();
}
