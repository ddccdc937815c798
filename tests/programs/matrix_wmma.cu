// Tensor-core matrix products through nvcuda::wmma (<mma.h>): a 32x32x32 half -> float product
// tiled 16x16x16 (one warp per output tile, C loaded and scaled element-wise in the fragment), a
// bf16 -> float and a tf32 -> float tile, and an s8 -> s32 tile, each checked against a host
// reference. Inputs are small integers or short fractions, so every product and sum is exact and
// the checks compare exactly whatever order a GPU sums in.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "self_check.h"

using namespace nvcuda;

constexpr int kN = 32;  // the half product: kN x kN x kN

// D = A * B + 2 * C; A row-major, B column-major, C and D row-major; one warp per 16x16 tile.
__global__ void halfProduct(const half* a, const half* b, const float* c, float* d) {
  const int tileRow = blockIdx.y * 16, tileCol = blockIdx.x * 16;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::load_matrix_sync(acc, c + tileRow * kN + tileCol, kN, wmma::mem_row_major);
  for (int i = 0; i < acc.num_elements; ++i) acc.x[i] *= 2.0f;
  for (int k = 0; k < kN; k += 16) {
    wmma::load_matrix_sync(fa, a + tileRow * kN + k, kN);
    wmma::load_matrix_sync(fb, b + tileCol * kN + k, kN);
    wmma::mma_sync(acc, fa, fb, acc);
  }
  wmma::store_matrix_sync(d + tileRow * kN + tileCol, acc, kN, wmma::mem_row_major);
}

// One 16x16x16 bf16 tile and one 16x16x8 tf32 tile (B row-major in both), D = A * B.
__global__ void bf16Product(const __nv_bfloat16* a, const __nv_bfloat16* b, float* d) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::mma_sync(acc, fa, fb, acc);
  wmma::store_matrix_sync(d, acc, 16, wmma::mem_row_major);
}

__global__ void tf32Product(const float* a, const float* b, float* d) {
  wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc;
  wmma::fill_fragment(acc, 1.0f);
  wmma::load_matrix_sync(fa, a, 8);
  wmma::load_matrix_sync(fb, b, 16);
  for (int i = 0; i < fa.num_elements; ++i) fa.x[i] = wmma::__float_to_tf32(fa.x[i]);
  for (int i = 0; i < fb.num_elements; ++i) fb.x[i] = wmma::__float_to_tf32(fb.x[i]);
  wmma::mma_sync(acc, fa, fb, acc);
  wmma::store_matrix_sync(d, acc, 16, wmma::mem_col_major);
}

// 16x16x16 s8 -> s32, D stored column-major.
__global__ void int8Product(const signed char* a, const signed char* b, int* d) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, signed char, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, signed char, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, int> acc;
  wmma::fill_fragment(acc, -7);
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::mma_sync(acc, fa, fb, acc);
  wmma::store_matrix_sync(d, acc, 16, wmma::mem_col_major);
}

template <class T>
T* toDevice(const std::vector<T>& host) {
  T* p = nullptr;
  CHECK_CUDA(cudaMalloc(&p, host.size() * sizeof(T)));
  CHECK_CUDA(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return p;
}
template <class T>
std::vector<T> toHost(const T* p, size_t n) {
  std::vector<T> host(n);
  CHECK_CUDA(cudaMemcpy(host.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
  return host;
}

void checkHalf() {
  std::vector<float> fa(kN * kN), fb(kN * kN), c(kN * kN);
  std::vector<half> a(kN * kN), b(kN * kN);
  for (int i = 0; i < kN * kN; ++i) {
    fa[i] = static_cast<float>((i * 7) % 13 - 6);
    fb[i] = static_cast<float>((i * 3) % 11 - 5) * 0.5f;
    c[i] = static_cast<float>(i % 17);
    a[i] = __float2half(fa[i]);
    b[i] = __float2half(fb[i]);  // column-major: element (k, j) at j * kN + k
  }
  half *da = toDevice(a), *db = toDevice(b);
  float *dc = toDevice(c), *dd = nullptr;
  CHECK_CUDA(cudaMalloc(&dd, kN * kN * sizeof(float)));
  halfProduct<<<dim3(kN / 16, kN / 16), 32>>>(da, db, dc, dd);
  CHECK_CUDA(cudaGetLastError());
  const std::vector<float> d = toHost(dd, kN * kN);
  for (int i = 0; i < kN; ++i)
    for (int j = 0; j < kN; ++j) {
      float want = 2.0f * c[i * kN + j];
      for (int k = 0; k < kN; ++k) want += fa[i * kN + k] * fb[j * kN + k];
      if (d[i * kN + j] != want)
        FAIL("half D[%d][%d] = %g, expected %g", i, j, d[i * kN + j], want);
    }
  for (void* p : {static_cast<void*>(da), static_cast<void*>(db), static_cast<void*>(dc),
                  static_cast<void*>(dd)})
    CHECK_CUDA(cudaFree(p));
  std::printf("wmma 32x32x32 half -> float (16x16x16 tiles): exact\n");
}

void checkBf16AndTf32() {
  std::vector<float> fa(256), fb(256);
  std::vector<__nv_bfloat16> a(256), b(256);
  for (int i = 0; i < 256; ++i) {
    fa[i] = static_cast<float>(i % 9 - 4) * 0.25f;
    fb[i] = static_cast<float>((i * 5) % 7 - 3);
    a[i] = __float2bfloat16(fa[i]);
    b[i] = __float2bfloat16(fb[i]);
  }
  __nv_bfloat16 *da = toDevice(a), *db = toDevice(b);
  float* dd = nullptr;
  CHECK_CUDA(cudaMalloc(&dd, 256 * sizeof(float)));
  bf16Product<<<1, 32>>>(da, db, dd);
  CHECK_CUDA(cudaGetLastError());
  std::vector<float> d = toHost(dd, 256);
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      float want = 0.0f;
      for (int k = 0; k < 16; ++k) want += fa[i * 16 + k] * fb[k * 16 + j];
      if (d[i * 16 + j] != want)
        FAIL("bf16 D[%d][%d] = %g, expected %g", i, j, d[i * 16 + j], want);
    }
  // tf32: A is 16x8, B 8x16 (both row-major); D column-major.
  float *ta = toDevice(std::vector<float>(fa.begin(), fa.begin() + 128)),
        *tb = toDevice(std::vector<float>(fb.begin(), fb.begin() + 128));
  tf32Product<<<1, 32>>>(ta, tb, dd);
  CHECK_CUDA(cudaGetLastError());
  d = toHost(dd, 256);
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      float want = 1.0f;
      for (int k = 0; k < 8; ++k) want += fa[i * 8 + k] * fb[k * 16 + j];
      if (d[j * 16 + i] != want)
        FAIL("tf32 D[%d][%d] = %g, expected %g", i, j, d[j * 16 + i], want);
    }
  for (void* p : {static_cast<void*>(da), static_cast<void*>(db), static_cast<void*>(dd),
                  static_cast<void*>(ta), static_cast<void*>(tb)})
    CHECK_CUDA(cudaFree(p));
  std::printf("wmma 16x16x16 bf16 -> float and 16x16x8 tf32 -> float: exact\n");
}

void checkInt8() {
  std::vector<signed char> a(256), b(256);
  for (int i = 0; i < 256; ++i) {
    a[i] = static_cast<signed char>((i * 37) % 256 - 128);
    b[i] = static_cast<signed char>((i * 91) % 256 - 128);
  }
  signed char *da = toDevice(a), *db = toDevice(b);
  int* dd = nullptr;
  CHECK_CUDA(cudaMalloc(&dd, 256 * sizeof(int)));
  int8Product<<<1, 32>>>(da, db, dd);
  CHECK_CUDA(cudaGetLastError());
  const std::vector<int> d = toHost(dd, 256);
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      int want = -7;
      for (int k = 0; k < 16; ++k) want += a[i * 16 + k] * b[j * 16 + k];
      if (d[j * 16 + i] != want) FAIL("s8 D[%d][%d] = %d, expected %d", i, j, d[j * 16 + i], want);
    }
  CHECK_CUDA(cudaFree(da));
  CHECK_CUDA(cudaFree(db));
  CHECK_CUDA(cudaFree(dd));
  std::printf("wmma 16x16x16 s8 -> s32: exact\n");
}

int main() {
  checkHalf();
  checkBf16AndTf32();
  checkInt8();
  std::printf("PASS\n");
  return 0;
}
