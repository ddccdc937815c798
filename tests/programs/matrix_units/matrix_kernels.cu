// Device code of matrix_mma_driver, compiled by nvcc to PTX (-arch=sm_80) at build time and
// loaded by the program with cuModuleLoadData: a wmma half -> float tile and an f64 mma.sync.
#include <mma.h>

using namespace nvcuda;

// D = A * B (16x16x16; A row-major, B column-major, D row-major), one warp.
extern "C" __global__ void wmmaHalf(const half* a, const half* b, float* d) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::mma_sync(acc, fa, fb, acc);
  wmma::store_matrix_sync(d, acc, 16, wmma::mem_row_major);
}

// D = A * B + C in f64 (8x8x4; A 8x4 and B 4x8 row-major, C and D 8x8 row-major), one warp;
// fragments placed as the PTX ISA's m8n8k4 .f64 figure says.
extern "C" __global__ void mmaF64(const double* a, const double* b, const double* c, double* d) {
  const unsigned lane = threadIdx.x, g = lane / 4, t = lane % 4;
  double d0 = c[g * 8 + 2 * t], d1 = c[g * 8 + 2 * t + 1];
  asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};"
               : "+d"(d0), "+d"(d1)
               : "d"(a[g * 4 + t]), "d"(b[t * 8 + g]));
  d[g * 8 + 2 * t] = d0;
  d[g * 8 + 2 * t + 1] = d1;
}
