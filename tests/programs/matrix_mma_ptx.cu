// Warp-level matrix instructions as hand-written kernels use them (inline PTX): ldmatrix.x4 loads
// A's 16x16 f16 tile from shared memory, ldmatrix.x2.trans loads the row-major B tile as mma's
// column fragment, mma.sync.aligned.m16n8k16 (f16 -> f32, and bf16 -> f32) multiplies, and each
// lane stores its D elements where the PTX ISA's fragment figure puts them. movmatrix transposes
// one 8x8 fragment. Checked against a host product; all values are small integers, so exact.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "self_check.h"

// a: 16x16 row-major, b: 16x8 row-major (k x n), c, d: 16x8 row-major. bf16 selects the input type
// (the bits are moved the same way; only the mma differs). transposed: lane l's movmatrix result.
__global__ void mmaTile(const uint16_t* a, const uint16_t* b, const float* c, float* d, bool bf16,
                        uint32_t* transposed) {
  __shared__ __align__(16) uint16_t sa[16 * 16];
  __shared__ __align__(16) uint16_t sb[16 * 8];
  const unsigned lane = threadIdx.x;
  for (unsigned i = lane; i < 256; i += 32) sa[i] = a[i];
  for (unsigned i = lane; i < 128; i += 32) sb[i] = b[i];
  __syncwarp();
  // ldmatrix.x4: lanes 8j..8j+7 address the rows of 8x8 matrix j; matrices 0..3 are A's quadrants
  // (rows 0-7 | 8-15) x (columns 0-7 | 8-15) in the order a0a1, a2a3, a4a5, a6a7 need.
  const unsigned j = lane / 8, r = lane % 8;
  const unsigned aRow = r + 8 * (j & 1), aCol = 8 * (j >> 1);
  const unsigned aAddr = static_cast<unsigned>(__cvta_generic_to_shared(&sa[aRow * 16 + aCol]));
  uint32_t a0, a1, a2, a3, b0, b1;
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3)
               : "r"(aAddr));
  // B rows k = 0..15 (lanes 0..15); .trans hands each lane B[2t+i][g], the col fragment.
  const unsigned bAddr = static_cast<unsigned>(__cvta_generic_to_shared(&sb[(lane % 16) * 8]));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];"
               : "=r"(b0), "=r"(b1)
               : "r"(bAddr));
  const unsigned g = lane / 4, t = lane % 4;
  float c0 = c[g * 8 + 2 * t], c1 = c[g * 8 + 2 * t + 1];
  float c2 = c[(g + 8) * 8 + 2 * t], c3 = c[(g + 8) * 8 + 2 * t + 1];
  if (bf16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
  d[g * 8 + 2 * t] = c0;
  d[g * 8 + 2 * t + 1] = c1;
  d[(g + 8) * 8 + 2 * t] = c2;
  d[(g + 8) * 8 + 2 * t + 1] = c3;
  uint32_t moved;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(moved) : "r"(a0));
  transposed[lane] = moved;
}

template <class T>
T* toDevice(const std::vector<T>& host) {
  T* p = nullptr;
  CHECK_CUDA(cudaMalloc(&p, host.size() * sizeof(T)));
  CHECK_CUDA(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return p;
}

void check(bool bf16) {
  std::vector<float> fa(256), fb(128), c(128);
  std::vector<uint16_t> a(256), b(128);
  for (int i = 0; i < 256; ++i) fa[i] = static_cast<float>((i * 7) % 15 - 7);
  for (int i = 0; i < 128; ++i) fb[i] = static_cast<float>((i * 5) % 9 - 4);
  for (int i = 0; i < 128; ++i) c[i] = static_cast<float>(i) * 0.5f;
  for (int i = 0; i < 256; ++i)
    a[i] = bf16 ? __bfloat16_as_ushort(__float2bfloat16(fa[i]))
                : __half_as_ushort(__float2half(fa[i]));
  for (int i = 0; i < 128; ++i)
    b[i] = bf16 ? __bfloat16_as_ushort(__float2bfloat16(fb[i]))
                : __half_as_ushort(__float2half(fb[i]));
  uint16_t *da = toDevice(a), *db = toDevice(b);
  float *dc = toDevice(c), *dd = nullptr;
  uint32_t* dt = nullptr;
  CHECK_CUDA(cudaMalloc(&dd, 128 * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&dt, 32 * sizeof(uint32_t)));
  mmaTile<<<1, 32>>>(da, db, dc, dd, bf16, dt);
  CHECK_CUDA(cudaGetLastError());
  std::vector<float> d(128);
  std::vector<uint32_t> moved(32);
  CHECK_CUDA(cudaMemcpy(d.data(), dd, 128 * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(moved.data(), dt, 32 * sizeof(uint32_t), cudaMemcpyDeviceToHost));
  for (int i = 0; i < 16; ++i)
    for (int n = 0; n < 8; ++n) {
      float want = c[i * 8 + n];
      for (int k = 0; k < 16; ++k) want += fa[i * 16 + k] * fb[k * 8 + n];
      if (d[i * 8 + n] != want)
        FAIL("%s D[%d][%d] = %g, expected %g", bf16 ? "bf16" : "f16", i, n, d[i * 8 + n], want);
    }
  // movmatrix of a0a1 (A's top-left 8x8): lane l holds A[2(l%4)+h][l/4] in half h.
  for (unsigned lane = 0; lane < 32; ++lane)
    for (unsigned h = 0; h < 2; ++h) {
      const unsigned got = (moved[lane] >> (16 * h)) & 0xffff;
      const unsigned want = a[(2 * (lane % 4) + h) * 16 + lane / 4];
      if (got != want)
        FAIL("movmatrix lane %u half %u = 0x%04x, expected 0x%04x", lane, h, got, want);
    }
  for (void* p : {static_cast<void*>(da), static_cast<void*>(db), static_cast<void*>(dc),
                  static_cast<void*>(dd), static_cast<void*>(dt)})
    CHECK_CUDA(cudaFree(p));
  std::printf("ldmatrix.x4 + ldmatrix.x2.trans + mma.sync.m16n8k16 %s -> f32, movmatrix: exact\n",
              bf16 ? "bf16" : "f16");
}

int main() {
  check(false);
  check(true);
  std::printf("PASS\n");
  return 0;
}
