// SIMD-within-a-word intrinsics and dot products against a plain host reference: __vadd2,
// __vsub2, __vmins2, __vmaxu2, __vabsdiffu4, __vabsdiffs4, __vsadu4 (vabsdiff4 on sm_75, packed
// halfword add/min/max on sm_90), __dp4a and __dp2a_lo/_hi (signed and unsigned), and __fns.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "self_check.h"

constexpr int kResults = 12;

__global__ void simdKernel(const unsigned* in, unsigned* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const unsigned a = in[2 * i], b = in[2 * i + 1];
  unsigned* o = out + i * kResults;
  o[0] = __vadd2(a, b);
  o[1] = __vsub2(a, b);
  o[2] = __vmins2(a, b);
  o[3] = __vmaxu2(a, b);
  o[4] = __vabsdiffu4(a, b);
  o[5] = __vabsdiffs4(a, b);
  o[6] = __vsadu4(a, b);
  o[7] = __dp4a(a, b, 17u);
  o[8] = static_cast<unsigned>(__dp4a(static_cast<int>(a), static_cast<int>(b), -5));
  o[9] = __dp2a_lo(a, b, 3u);
  o[10] = static_cast<unsigned>(__dp2a_hi(static_cast<int>(a), static_cast<int>(b), 7));
  o[11] = __fns(a, b & 31, static_cast<int>(b >> 27) - 16);
}

int64_t part(unsigned word, int k, int bits, bool isSigned) {
  const uint32_t v = (word >> (k * bits)) & ((1u << bits) - 1);
  return isSigned && (v >> (bits - 1)) ? static_cast<int64_t>(v) - (int64_t{1} << bits) : v;
}

template <typename F>
unsigned perPart(unsigned a, unsigned b, int bits, bool isSigned, F f) {
  unsigned r = 0;
  for (int k = 0; k < 32 / bits; ++k) {
    const int64_t v = f(part(a, k, bits, isSigned), part(b, k, bits, isSigned));
    r |= (static_cast<unsigned>(v) & ((1u << bits) - 1)) << (k * bits);
  }
  return r;
}

unsigned hostFns(unsigned mask, unsigned base, int offset) {
  if (offset == 0) return (mask >> base) & 1 ? base : 0xffffffffu;
  int count = std::abs(offset) - 1;
  for (int pos = static_cast<int>(base); pos >= 0 && pos<32; pos += offset> 0 ? 1 : -1)
    if ((mask >> pos) & 1) {
      if (count == 0) return static_cast<unsigned>(pos);
      --count;
    }
  return 0xffffffffu;
}

std::vector<unsigned> reference(unsigned a, unsigned b) {
  auto absdiff = [](int64_t x, int64_t y) { return x > y ? x - y : y - x; };
  std::vector<unsigned> r(kResults);
  r[0] = perPart(a, b, 16, false, [](int64_t x, int64_t y) { return x + y; });
  r[1] = perPart(a, b, 16, false, [](int64_t x, int64_t y) { return x - y; });
  r[2] = perPart(a, b, 16, true, [](int64_t x, int64_t y) { return x < y ? x : y; });
  r[3] = perPart(a, b, 16, false, [](int64_t x, int64_t y) { return x > y ? x : y; });
  r[4] = perPart(a, b, 8, false, absdiff);
  r[5] = perPart(a, b, 8, true, absdiff);
  int64_t sad = 0, dpu = 17, dps = -5;
  for (int k = 0; k < 4; ++k) {
    sad += absdiff(part(a, k, 8, false), part(b, k, 8, false));
    dpu += part(a, k, 8, false) * part(b, k, 8, false);
    dps += part(a, k, 8, true) * part(b, k, 8, true);
  }
  r[6] = static_cast<unsigned>(sad);
  r[7] = static_cast<unsigned>(dpu);
  r[8] = static_cast<unsigned>(dps);
  r[9] = static_cast<unsigned>(3 + part(a, 0, 16, false) * part(b, 0, 8, false) +
                               part(a, 1, 16, false) * part(b, 1, 8, false));
  r[10] = static_cast<unsigned>(7 + part(a, 0, 16, true) * part(b, 2, 8, true) +
                                part(a, 1, 16, true) * part(b, 3, 8, true));
  r[11] = hostFns(a, b & 31, static_cast<int>(b >> 27) - 16);
  return r;
}

int main() {
  std::vector<unsigned> in = {0u,          0u,          0xffffffffu, 1u,
                              0x80008000u, 0x7fff7fffu, 0x807f01ffu, 0x7f80ff01u,
                              0x12345678u, 0x9abcdef0u, 0xffff0000u, 0x0000ffffu};
  unsigned state = 5;
  while (in.size() < 2 * 256) {
    state = state * 1103515245u + 12345u;
    in.push_back(state ^ (state << 7));
  }
  const int n = static_cast<int>(in.size() / 2);
  unsigned *din, *dout;
  CHECK_CUDA(cudaMalloc(&din, in.size() * sizeof(unsigned)));
  CHECK_CUDA(cudaMalloc(&dout, n * kResults * sizeof(unsigned)));
  CHECK_CUDA(cudaMemcpy(din, in.data(), in.size() * sizeof(unsigned), cudaMemcpyHostToDevice));
  simdKernel<<<(n + 63) / 64, 64>>>(din, dout, n);
  CHECK_CUDA(cudaGetLastError());
  std::vector<unsigned> out(n * kResults);
  CHECK_CUDA(cudaMemcpy(out.data(), dout, out.size() * sizeof(unsigned), cudaMemcpyDeviceToHost));
  const char* names[kResults] = {"__vadd2",      "__vsub2",      "__vmins2",  "__vmaxu2",
                                 "__vabsdiffu4", "__vabsdiffs4", "__vsadu4",  "__dp4a u",
                                 "__dp4a s",     "__dp2a_lo",    "__dp2a_hi", "__fns"};
  for (int i = 0; i < n; ++i) {
    const std::vector<unsigned> expected = reference(in[2 * i], in[2 * i + 1]);
    for (int k = 0; k < kResults; ++k)
      CHECK(out[i * kResults + k] == expected[k], "%s(0x%08x, 0x%08x) = 0x%08x, expected 0x%08x",
            names[k], in[2 * i], in[2 * i + 1], out[i * kResults + k], expected[k]);
  }
  CHECK_CUDA(cudaFree(din));
  CHECK_CUDA(cudaFree(dout));
  return pass();
}
