// One vector store and one vector load move their elements together. CUB's decoupled look-back
// (thrust::stable_partition, DeviceSelect, DeviceScan) packs a tile's status and its value into
// one `st.relaxed.gpu.v2.u32` and reads both back with one `ld.relaxed.gpu.v2.u32` from another
// block: a reader must never see the new status with the old value. Here block 0 rewrites
// 8-byte and 16-byte records over and over, each with one vector store, while the other blocks
// of the same cooperative launch (all resident at once) read them with one vector load each and
// count the records whose parts come from different stores.
#include <cstdio>

#include "self_check.h"

constexpr int kBlocks = 4, kThreads = 32, kRewrites = 20000;

// The record of rewrite i, in each of its three shapes.
__device__ int2 intPair(int i) { return make_int2(i, 3 * i + 1); }
__device__ int4 intQuad(int i) { return make_int4(i, 5 * i + 2, ~i, i ^ 0x5a5a); }
__device__ longlong2 longPair(int i) { return make_longlong2(i, -7ll * i); }

// Each access is one PTX vector instruction, written out so that no compiler splits it.
__device__ void storeRelaxed(int2* p, int2 v) {
  asm volatile("st.relaxed.gpu.global.v2.u32 [%0], {%1, %2};" ::"l"(p), "r"(v.x), "r"(v.y)
               : "memory");
}
__device__ int2 loadRelaxed(const int2* p) {
  int2 v;
  asm volatile("ld.relaxed.gpu.global.v2.u32 {%0, %1}, [%2];"
               : "=r"(v.x), "=r"(v.y)
               : "l"(p)
               : "memory");
  return v;
}
__device__ void storeVolatile(int4* p, int4 v) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y),
               "r"(v.z), "r"(v.w)
               : "memory");
}
__device__ int4 loadVolatile(const int4* p) {
  int4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}
__device__ void storeRelaxed(longlong2* p, longlong2 v) {
  asm volatile("st.relaxed.gpu.global.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(v.x), "l"(v.y)
               : "memory");
}
__device__ longlong2 loadRelaxed(const longlong2* p) {
  longlong2 v;
  asm volatile("ld.relaxed.gpu.global.v2.u64 {%0, %1}, [%2];"
               : "=l"(v.x), "=l"(v.y)
               : "l"(p)
               : "memory");
  return v;
}

// torn[0..2]: records whose parts did not come from one store (int2, int4, longlong2);
// reads[block]: how many records that block read.
__global__ void rewriteAndRead(int2* pair, int4* quad, longlong2* wide, int* torn,
                               unsigned long long* reads) {
  if (blockIdx.x == 0) {
    if (threadIdx.x != 0) return;
    for (int i = 1; i <= kRewrites; ++i) {
      storeRelaxed(pair, intPair(i));
      storeVolatile(quad, intQuad(i));
      storeRelaxed(wide, longPair(i));
    }
    return;
  }
  unsigned long long count = 0;
  int badPair = 0, badQuad = 0, badWide = 0;
  for (bool done = false; !done;) {
    const int2 p = loadRelaxed(pair);
    const int4 q = loadVolatile(quad);
    const longlong2 w = loadRelaxed(wide);
    const int2 ep = intPair(p.x);
    const int4 eq = intQuad(q.x);
    const longlong2 ew = longPair(static_cast<int>(w.x));
    badPair += p.y != ep.y;
    badQuad += q.y != eq.y || q.z != eq.z || q.w != eq.w;
    badWide += w.y != ew.y;
    count += 3;
    // The writer stores the last record to `wide` last.
    done = w.x == kRewrites;
  }
  atomicAdd(&torn[0], badPair);
  atomicAdd(&torn[1], badQuad);
  atomicAdd(&torn[2], badWide);
  atomicAdd(&reads[blockIdx.x], count);
}

int main() {
  int cooperative = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, 0));
  // The readers spin until the writer is done: every block must be resident at once.
  CHECK(cooperative == 1, "the device offers no cooperative launch (%d)", cooperative);

  int2* pair;
  int4* quad;
  longlong2* wide;
  int* torn;
  unsigned long long* reads;
  CHECK_CUDA(cudaMalloc(&pair, sizeof(int2)));
  CHECK_CUDA(cudaMalloc(&quad, sizeof(int4)));
  CHECK_CUDA(cudaMalloc(&wide, sizeof(longlong2)));
  CHECK_CUDA(cudaMalloc(&torn, 3 * sizeof(int)));
  CHECK_CUDA(cudaMalloc(&reads, kBlocks * sizeof(unsigned long long)));
  // Record 0 in all three shapes.
  const int2 pair0{0, 1};
  const int4 quad0{0, 2, ~0, 0x5a5a};
  const longlong2 wide0{0, 0};
  CHECK_CUDA(cudaMemcpy(pair, &pair0, sizeof(pair0), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(quad, &quad0, sizeof(quad0), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(wide, &wide0, sizeof(wide0), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(torn, 0, 3 * sizeof(int)));
  CHECK_CUDA(cudaMemset(reads, 0, kBlocks * sizeof(unsigned long long)));

  void* args[] = {&pair, &quad, &wide, &torn, &reads};
  CHECK_CUDA(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(rewriteAndRead), dim3(kBlocks),
                                         dim3(kThreads), args, 0, nullptr));
  CHECK_CUDA(cudaDeviceSynchronize());

  int hostTorn[3];
  unsigned long long hostReads[kBlocks];
  CHECK_CUDA(cudaMemcpy(hostTorn, torn, sizeof(hostTorn), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(hostReads, reads, sizeof(hostReads), cudaMemcpyDeviceToHost));
  unsigned long long total = 0;
  for (int b = 1; b < kBlocks; ++b) total += hostReads[b];
  std::printf("%llu records read while %d were rewritten; torn: %d int2, %d int4, %d longlong2\n",
              total, kRewrites, hostTorn[0], hostTorn[1], hostTorn[2]);
  CHECK(total >= static_cast<unsigned long long>(3 * kThreads * (kBlocks - 1)),
        "the readers read %llu records", total);
  CHECK(hostTorn[0] == 0 && hostTorn[1] == 0 && hostTorn[2] == 0,
        "a vector load saw parts of different vector stores");
  CHECK_CUDA(cudaFree(pair));
  CHECK_CUDA(cudaFree(quad));
  CHECK_CUDA(cudaFree(wide));
  CHECK_CUDA(cudaFree(torn));
  CHECK_CUDA(cudaFree(reads));
  std::printf("PASS\n");
  return 0;
}
