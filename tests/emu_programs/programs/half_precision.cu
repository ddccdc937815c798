// Half precision (__half, __half2) and bfloat16: conversions (bit-exact against the host versions
// in cuda_fp16.h/cuda_bf16.h, including subnormals, overflow and rounding ties), scalar and paired
// arithmetic, comparisons, and __half2 atomics.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "self_check.h"

namespace {

unsigned short bits(__half h) {
  unsigned short b;
  std::memcpy(&b, &h, sizeof(b));
  return b;
}
unsigned short bits(__nv_bfloat16 h) {
  unsigned short b;
  std::memcpy(&b, &h, sizeof(b));
  return b;
}

}  // namespace

__global__ void convert(const float* in, __half* halves, __nv_bfloat16* bfloats, float* back,
                        int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    halves[i] = __float2half_rn(in[i]);
    bfloats[i] = __float2bfloat16_rn(in[i]);
    back[2 * i] = __half2float(halves[i]);
    back[2 * i + 1] = __bfloat162float(bfloats[i]);
  }
}

// Scalar and paired arithmetic on halves; out gets 6 halves per element.
// v + v*v rounded once to half: exact in double, then rounded to odd into float (which has more
// than two bits beyond half's), so that the float-to-half rounding is the correct one.
__half fusedHalf(float v) {
  const double exact = static_cast<double>(v) + static_cast<double>(v) * v;
  float f = static_cast<float>(exact);
  if (static_cast<double>(f) != exact) {
    if (std::fabs(static_cast<double>(f)) > std::fabs(exact)) f = std::nextafter(f, 0.0f);
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    u |= 1;
    std::memcpy(&f, &u, sizeof f);
  }
  return __float2half_rn(f);
}

__global__ void arithmetic(const __half* a, const __half* b, __half* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const __half x = a[i], y = b[i];
  out[6 * i + 0] = __hadd(x, y);
  out[6 * i + 1] = __hmul(x, y);
  out[6 * i + 2] = __hsub(x, y);
  out[6 * i + 3] = __hlt(x, y) ? x : y;
  const __half2 pair = __halves2half2(x, y);
  const __half2 sum = __hadd2(pair, __hmul2(pair, pair));  // (x + x*x, y + y*y)
  out[6 * i + 4] = __low2half(sum);
  out[6 * i + 5] = __high2half(sum);
}

__global__ void bfloatArithmetic(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* out,
                                 int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    out[2 * i] = __hadd(a[i], b[i]);
    out[2 * i + 1] = __hmul(a[i], b[i]);
  }
}

__global__ void accumulateHalf2(__half2* total, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(total, __floats2half2_rn(1.0f, static_cast<float>(i % 4) * 0.25f));
}

int main() {
  std::vector<float> in = {0.0f,           -0.0f,          1.0f,           -2.5f,
                           65504.0f,       65520.0f,       1e6f,           -1e6f,
                           6.1035156e-05f, 5.9604645e-08f, 2.9802322e-08f, 1.0009766f,
                           1.00048828125f, 1.00146484375f, 3.14159265f,    -1.0e-3f,
                           3.0e38f,        1.17549435e-38f};
  const float inf = std::numeric_limits<float>::infinity();
  in.push_back(inf);
  in.push_back(-inf);
  for (int i = 0; i < 200; ++i) in.push_back(static_cast<float>(i * i) * 0.0137f - 100.0f);
  const int n = static_cast<int>(in.size());
  float *din, *dback;
  __half* dhalves;
  __nv_bfloat16* dbfloats;
  CHECK_CUDA(cudaMalloc(&din, n * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&dback, 2 * n * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&dhalves, n * sizeof(__half)));
  CHECK_CUDA(cudaMalloc(&dbfloats, n * sizeof(__nv_bfloat16)));
  CHECK_CUDA(cudaMemcpy(din, in.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  convert<<<(n + 63) / 64, 64>>>(din, dhalves, dbfloats, dback, n);
  CHECK_CUDA(cudaGetLastError());
  std::vector<__half> halves(n);
  std::vector<__nv_bfloat16> bfloats(n);
  std::vector<float> back(2 * n);
  CHECK_CUDA(cudaMemcpy(halves.data(), dhalves, n * sizeof(__half), cudaMemcpyDeviceToHost));
  CHECK_CUDA(
      cudaMemcpy(bfloats.data(), dbfloats, n * sizeof(__nv_bfloat16), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(back.data(), dback, 2 * n * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) {
    const __half h = __float2half_rn(in[i]);
    const __nv_bfloat16 bf = __float2bfloat16_rn(in[i]);
    CHECK(bits(halves[i]) == bits(h), "half(%g) = 0x%04x, expected 0x%04x", in[i], bits(halves[i]),
          bits(h));
    CHECK(bits(bfloats[i]) == bits(bf), "bf16(%g) = 0x%04x, expected 0x%04x", in[i],
          bits(bfloats[i]), bits(bf));
    const float hf = __half2float(h), bff = __bfloat162float(bf);
    CHECK(std::memcmp(&back[2 * i], &hf, 4) == 0 && std::memcmp(&back[2 * i + 1], &bff, 4) == 0,
          "back to float from %g: %g / %g, expected %g / %g", in[i], back[2 * i], back[2 * i + 1],
          hf, bff);
  }
  std::printf("%d conversions ok\n", n);

  // Operands that are halves; the host reference rounds the float result once to half, which is
  // the correctly rounded half result for + - * (float has more than 2*11+2 bits).
  const int m = 300;
  std::vector<__half> a(m), b(m);
  for (int i = 0; i < m; ++i) {
    a[i] = __float2half_rn(static_cast<float>(i) * 0.37f - 40.0f);
    b[i] = __float2half_rn(static_cast<float>((i * 7) % 50) * 0.11f - 2.0f);
  }
  __half *da, *db, *dout;
  CHECK_CUDA(cudaMalloc(&da, m * sizeof(__half)));
  CHECK_CUDA(cudaMalloc(&db, m * sizeof(__half)));
  CHECK_CUDA(cudaMalloc(&dout, 6 * m * sizeof(__half)));
  CHECK_CUDA(cudaMemcpy(da, a.data(), m * sizeof(__half), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(db, b.data(), m * sizeof(__half), cudaMemcpyHostToDevice));
  arithmetic<<<(m + 127) / 128, 128>>>(da, db, dout, m);
  CHECK_CUDA(cudaGetLastError());
  std::vector<__half> out(6 * m);
  CHECK_CUDA(cudaMemcpy(out.data(), dout, out.size() * sizeof(__half), cudaMemcpyDeviceToHost));
  for (int i = 0; i < m; ++i) {
    const float x = __half2float(a[i]), y = __half2float(b[i]);
    const __half xx = __float2half_rn(x * x), yy = __float2half_rn(y * y);
    const __half want[6] = {__float2half_rn(x + y),
                            __float2half_rn(x * y),
                            __float2half_rn(x - y),
                            x < y ? a[i] : b[i],
                            __float2half_rn(x + __half2float(xx)),
                            __float2half_rn(y + __half2float(yy))};
    // Ops 4 and 5 are a mul.f16x2 and an add.f16x2 without rounding modifiers, which ptxas may
    // contract into one fma.rn.f16x2 (it did on an H200, driver 580.159.04: 0x65fb where rounding
    // twice gives 0x65fa). So they may also be the fused result, rounded once.
    const __half fused[6] = {want[0], want[1], want[2], want[3], fusedHalf(x), fusedHalf(y)};
    for (int k = 0; k < 6; ++k) {
      CHECK(bits(out[6 * i + k]) == bits(want[k]) || bits(out[6 * i + k]) == bits(fused[k]),
            "half op %d of (%g, %g) = 0x%04x, expected 0x%04x (or fused 0x%04x)", k, x, y,
            bits(out[6 * i + k]), bits(want[k]), bits(fused[k]));
    }
  }
  std::printf("half arithmetic ok\n");

  std::vector<__nv_bfloat16> ba(m), bb(m);
  for (int i = 0; i < m; ++i) {
    ba[i] = __float2bfloat16_rn(static_cast<float>(i) * 1.37f - 200.0f);
    bb[i] = __float2bfloat16_rn(static_cast<float>((i * 13) % 70) * 0.3f - 10.0f);
  }
  __nv_bfloat16 *dba, *dbb, *dbout;
  CHECK_CUDA(cudaMalloc(&dba, m * sizeof(__nv_bfloat16)));
  CHECK_CUDA(cudaMalloc(&dbb, m * sizeof(__nv_bfloat16)));
  CHECK_CUDA(cudaMalloc(&dbout, 2 * m * sizeof(__nv_bfloat16)));
  CHECK_CUDA(cudaMemcpy(dba, ba.data(), m * sizeof(__nv_bfloat16), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dbb, bb.data(), m * sizeof(__nv_bfloat16), cudaMemcpyHostToDevice));
  bfloatArithmetic<<<(m + 63) / 64, 64>>>(dba, dbb, dbout, m);
  CHECK_CUDA(cudaGetLastError());
  std::vector<__nv_bfloat16> bout(2 * m);
  CHECK_CUDA(
      cudaMemcpy(bout.data(), dbout, bout.size() * sizeof(__nv_bfloat16), cudaMemcpyDeviceToHost));
  for (int i = 0; i < m; ++i) {
    const float x = __bfloat162float(ba[i]), y = __bfloat162float(bb[i]);
    // bf16 has 8 significant bits: one float rounding then one bf16 rounding is exact here too.
    const __nv_bfloat16 sum = __float2bfloat16_rn(x + y), product = __float2bfloat16_rn(x * y);
    CHECK(bits(bout[2 * i]) == bits(sum) && bits(bout[2 * i + 1]) == bits(product),
          "bf16 (%g, %g): sum 0x%04x product 0x%04x, expected 0x%04x 0x%04x", x, y,
          bits(bout[2 * i]), bits(bout[2 * i + 1]), bits(sum), bits(product));
  }
  std::printf("bfloat16 arithmetic ok\n");

  __half2* dtotal;
  CHECK_CUDA(cudaMalloc(&dtotal, sizeof(__half2)));
  CHECK_CUDA(cudaMemset(dtotal, 0, sizeof(__half2)));
  const int adds = 1000;
  accumulateHalf2<<<(adds + 255) / 256, 256>>>(dtotal, adds);
  CHECK_CUDA(cudaGetLastError());
  __half2 total;
  CHECK_CUDA(cudaMemcpy(&total, dtotal, sizeof(total), cudaMemcpyDeviceToHost));
  // 1000 ones and 250 each of 0, .25, .5, .75 (sum 375): all partial sums are exact in half.
  CHECK(__half2float(__low2half(total)) == 1000.0f && __half2float(__high2half(total)) == 375.0f,
        "half2 atomicAdd total (%g, %g), expected (1000, 375)", __half2float(__low2half(total)),
        __half2float(__high2half(total)));
  std::printf("half2 atomicAdd ok\n");
  CHECK_CUDA(cudaFree(din));
  CHECK_CUDA(cudaFree(dback));
  CHECK_CUDA(cudaFree(dhalves));
  CHECK_CUDA(cudaFree(dbfloats));
  CHECK_CUDA(cudaFree(da));
  CHECK_CUDA(cudaFree(db));
  CHECK_CUDA(cudaFree(dout));
  CHECK_CUDA(cudaFree(dba));
  CHECK_CUDA(cudaFree(dbb));
  CHECK_CUDA(cudaFree(dbout));
  CHECK_CUDA(cudaFree(dtotal));
  return pass();
}
