// nvcuda::wmma (<mma.h>), as a tensor-core GEMM is usually written: a 64x48x32 half product with
// four warps per block, each warp owning 16x16 output tiles, A and B staged through shared
// memory; one version accumulates in float, one in half; a third multiplies u8 by u8 into s32.
// Checked exactly against the host (small integer inputs: every product and sum is exact).
#include <cuda_fp16.h>
#include <mma.h>

#include <cstdio>
#include <vector>

#include "self_check.h"

using namespace nvcuda;

constexpr int kM = 64, kN = 48, kK = 32;

// A row-major kM x kK, B row-major kK x kN, D row-major kM x kN. Block: 4 warps, a 32x32 area.
template <class Acc>
__global__ void gemm(const half* a, const half* b, Acc* d) {
  __shared__ half sa[32 * kK];
  __shared__ half sb[kK * 32];
  const int row0 = blockIdx.y * 32, col0 = blockIdx.x * 32, warp = threadIdx.x / 32;
  for (int i = threadIdx.x; i < 32 * kK; i += blockDim.x) {
    sa[i] = a[(row0 + i / kK) * kK + i % kK];
    const int k = i / 32, c = i % 32;
    sb[i] = col0 + c < kN ? b[k * kN + col0 + c] : __float2half(0.0f);
  }
  __syncthreads();
  const int tr = (warp / 2) * 16, tc = (warp % 2) * 16;
  if (col0 + tc >= kN) return;  // the whole warp leaves together
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, Acc> acc;
  wmma::fill_fragment(acc, static_cast<Acc>(1.0f));
  for (int k = 0; k < kK; k += 16) {
    wmma::load_matrix_sync(fa, sa + tr * kK + k, kK);
    wmma::load_matrix_sync(fb, sb + k * 32 + tc, 32);
    wmma::mma_sync(acc, fa, fb, acc);
  }
  wmma::store_matrix_sync(d + (row0 + tr) * kN + col0 + tc, acc, kN, wmma::mem_row_major);
}

// 16x16x16 u8 x u8 -> s32 (B column-major), D column-major.
__global__ void int8Tile(const unsigned char* a, const unsigned char* b, int* d) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, unsigned char, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, unsigned char, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, int> acc;
  wmma::fill_fragment(acc, 3);
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::mma_sync(acc, fa, fb, acc);
  wmma::store_matrix_sync(d, acc, 16, wmma::mem_col_major);
}

int main() {
  std::vector<float> fa(kM * kK), fb(kK * kN);
  std::vector<half> ha(fa.size()), hb(fb.size());
  for (size_t i = 0; i < fa.size(); ++i) ha[i] = __float2half(fa[i] = float(int(i * 5 % 7) - 3));
  for (size_t i = 0; i < fb.size(); ++i) hb[i] = __float2half(fb[i] = float(int(i * 3 % 5) - 2));
  half *da, *db, *dh;
  float* df;
  CHECK_CUDA(cudaMalloc(&da, ha.size() * sizeof(half)));
  CHECK_CUDA(cudaMalloc(&db, hb.size() * sizeof(half)));
  CHECK_CUDA(cudaMalloc(&df, kM * kN * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&dh, kM * kN * sizeof(half)));
  CHECK_CUDA(cudaMemcpy(da, ha.data(), ha.size() * sizeof(half), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(db, hb.data(), hb.size() * sizeof(half), cudaMemcpyHostToDevice));
  const dim3 grid((kN + 31) / 32, kM / 32);
  gemm<float><<<grid, 128>>>(da, db, df);
  gemm<half><<<grid, 128>>>(da, db, dh);
  CHECK_CUDA(cudaGetLastError());
  std::vector<float> d(kM * kN);
  std::vector<half> dhalf(kM * kN);
  CHECK_CUDA(cudaMemcpy(d.data(), df, d.size() * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(dhalf.data(), dh, dhalf.size() * sizeof(half), cudaMemcpyDeviceToHost));
  for (int i = 0; i < kM; ++i)
    for (int j = 0; j < kN; ++j) {
      float want = 1.0f;
      for (int k = 0; k < kK; ++k) want += fa[i * kK + k] * fb[k * kN + j];
      if (d[i * kN + j] != want)
        FAIL("float D[%d][%d] = %g, expected %g", i, j, d[i * kN + j], want);
      const float h = __half2float(dhalf[i * kN + j]);
      if (h != want) FAIL("half D[%d][%d] = %g, expected %g", i, j, h, want);
    }
  std::printf("wmma 64x48x32 half gemm, float and half accumulators: exact\n");

  std::vector<unsigned char> a8(256);
  std::vector<unsigned char> b8(256);
  for (int i = 0; i < 256; ++i) {
    a8[i] = static_cast<unsigned char>(i * 29 % 256);
    b8[i] = static_cast<unsigned char>(i * 53 % 256);
  }
  unsigned char* da8;
  unsigned char* db8;
  int* dd8;
  CHECK_CUDA(cudaMalloc(&da8, 256));
  CHECK_CUDA(cudaMalloc(&db8, 256));
  CHECK_CUDA(cudaMalloc(&dd8, 256 * sizeof(int)));
  CHECK_CUDA(cudaMemcpy(da8, a8.data(), 256, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(db8, b8.data(), 256, cudaMemcpyHostToDevice));
  int8Tile<<<1, 32>>>(da8, db8, dd8);
  CHECK_CUDA(cudaGetLastError());
  std::vector<int> d8(256);
  CHECK_CUDA(cudaMemcpy(d8.data(), dd8, 256 * sizeof(int), cudaMemcpyDeviceToHost));
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      int want = 3;
      for (int k = 0; k < 16; ++k) want += a8[i * 16 + k] * b8[j * 16 + k];
      if (d8[j * 16 + i] != want)
        FAIL("s8 D[%d][%d] = %d, expected %d", i, j, d8[j * 16 + i], want);
    }
  std::printf("wmma 16x16x16 u8 x u8 -> s32: exact\n");
  for (void* p : {static_cast<void*>(da), static_cast<void*>(db), static_cast<void*>(df),
                  static_cast<void*>(dh), static_cast<void*>(da8), static_cast<void*>(db8),
                  static_cast<void*>(dd8)})
    CHECK_CUDA(cudaFree(p));
  std::printf("PASS\n");
  return 0;
}
