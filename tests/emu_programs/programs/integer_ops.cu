// Integer and bit operations with their edge cases: 32/64-bit signed and unsigned division and
// remainder (negative operands; the result of LLONG_MIN / -1, undefined in C++, is not checked),
// __mulhi / __umul64hi, __popc/__clz/__ffs/__brev (32 and 64 bit), funnel shifts, __byte_perm,
// __sad/__usad/__hadd, shifts by variable amounts, and saturating float->int conversions.
#include <climits>
#include <cstdint>
#include <vector>

#include "self_check.h"

constexpr int kResults = 24;

__global__ void integerKernel(const long long* in, unsigned long long* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const long long a = in[2 * i], b = in[2 * i + 1];
  const int a32 = static_cast<int>(a), b32 = static_cast<int>(b);
  const unsigned ua = static_cast<unsigned>(a), ub = static_cast<unsigned>(b);
  unsigned long long* o = out + i * kResults;
  o[0] = b32 != 0 ? static_cast<unsigned long long>(a32 / b32) : 0;
  o[1] = b32 != 0 ? static_cast<unsigned long long>(a32 % b32) : 0;
  o[2] = ub != 0 ? ua / ub : 0;
  o[3] = ub != 0 ? ua % ub : 0;
  o[4] = b != 0 ? static_cast<unsigned long long>(a / b) : 0;
  o[5] = b != 0 ? static_cast<unsigned long long>(a % b) : 0;
  o[6] = b != 0 ? static_cast<unsigned long long>(a) / static_cast<unsigned long long>(b) : 0;
  o[7] = static_cast<unsigned>(__mulhi(a32, b32));
  o[8] = __umul64hi(static_cast<unsigned long long>(a), static_cast<unsigned long long>(b));
  o[9] = __popc(ua) + 100 * __popcll(static_cast<unsigned long long>(a));
  o[10] = __clz(a32) + 100 * __clzll(a);
  o[11] = __ffs(a32) + 100 * __ffsll(a);
  o[12] = __brev(ua);
  o[13] = __brevll(static_cast<unsigned long long>(a));
  o[14] = __funnelshift_l(ua, ub, static_cast<unsigned>(a >> 40) & 63);
  o[15] = __funnelshift_rc(ua, ub, static_cast<unsigned>(b >> 40) & 63);
  o[16] = __byte_perm(ua, ub, static_cast<unsigned>(a >> 32) & 0x7777);
  o[17] = __sad(a32, b32, 5u);
  o[18] = static_cast<unsigned>(a32 >> (ub & 31)) ^ (ua >> (ub & 31));
  o[19] = (static_cast<unsigned long long>(a) << (ub & 63)) ^
          (static_cast<unsigned long long>(a) >> (ua & 63));
  o[20] = static_cast<unsigned>(__float2int_rn(static_cast<float>(a) * 1e-9f));
  o[21] = static_cast<unsigned>(__float2uint_rz(static_cast<float>(b) * 3e-10f));
  o[22] = static_cast<unsigned long long>(__double2ll_rd(static_cast<double>(a) * 0.75));
  o[23] = static_cast<unsigned>(__usad(ua & 0xffff, ub & 0xffff, 1u)) +
          (static_cast<unsigned long long>(__hadd(a32, b32)) << 32);
}

namespace {

unsigned popc32(uint32_t x) { return static_cast<unsigned>(__builtin_popcount(x)); }
unsigned popc64(uint64_t x) { return static_cast<unsigned>(__builtin_popcountll(x)); }
int clz32(uint32_t x) { return x == 0 ? 32 : __builtin_clz(x); }
int clz64(uint64_t x) { return x == 0 ? 64 : __builtin_clzll(x); }
int ffs32(uint32_t x) { return x == 0 ? 0 : __builtin_ctz(x) + 1; }
int ffs64(uint64_t x) { return x == 0 ? 0 : __builtin_ctzll(x) + 1; }
uint32_t brev32(uint32_t x) {
  uint32_t r = 0;
  for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
  return r;
}
uint64_t brev64(uint64_t x) {
  uint64_t r = 0;
  for (int i = 0; i < 64; ++i) r |= ((x >> i) & 1ull) << (63 - i);
  return r;
}
// __funnelshift_l(lo, hi, shift): the high 32 bits of (hi:lo) << (shift & 31).
uint32_t funnelLeft(uint32_t lo, uint32_t hi, unsigned shift) {
  const uint64_t joined = (static_cast<uint64_t>(hi) << 32) | lo;
  return static_cast<uint32_t>((joined << (shift & 31)) >> 32);
}
// __funnelshift_rc: the low 32 bits of (hi:lo) >> min(shift, 32).
uint32_t funnelRightClamp(uint32_t lo, uint32_t hi, unsigned shift) {
  const uint64_t joined = (static_cast<uint64_t>(hi) << 32) | lo;
  return static_cast<uint32_t>(joined >> (shift > 32 ? 32 : shift));
}
uint32_t bytePerm(uint32_t x, uint32_t y, uint32_t s) {
  const uint64_t bytes = (static_cast<uint64_t>(y) << 32) | x;
  uint32_t r = 0;
  for (int k = 0; k < 4; ++k) {
    const unsigned selector = (s >> (4 * k)) & 7;
    r |= static_cast<uint32_t>((bytes >> (8 * selector)) & 0xff) << (8 * k);
  }
  return r;
}
int roundToInt(float f) {  // round half to even, saturating
  if (f != f) return 0;
  if (f >= 2147483648.0f) return INT_MAX;
  if (f < -2147483648.0f) return INT_MIN;
  return static_cast<int>(__builtin_rintf(f));
}
unsigned truncToUnsigned(float f) {
  if (!(f > 0.0f)) return 0;
  if (f >= 4294967296.0f) return UINT_MAX;
  return static_cast<unsigned>(f);
}
long long floorToInt64(double d) {
  if (d >= 9223372036854775808.0) return LLONG_MAX;
  if (d < -9223372036854775808.0) return LLONG_MIN;
  return static_cast<long long>(__builtin_floor(d));
}

}  // namespace

int main() {
  std::vector<long long> pairs = {100,
                                  7,
                                  -100,
                                  7,
                                  100,
                                  -7,
                                  -100,
                                  -7,
                                  INT_MAX,
                                  -1,
                                  INT_MIN + 1,
                                  3,
                                  0,
                                  5,
                                  5,
                                  0,
                                  LLONG_MAX,
                                  2,
                                  LLONG_MIN + 5,
                                  -3,
                                  0x123456789abcdefll,
                                  0x7edcba987654321ll,
                                  -0x123456789abcdefll,
                                  0x1000000000ll,
                                  0xffffffffll,
                                  0xffffffffll,
                                  1,
                                  1ll << 62,
                                  LLONG_MIN,
                                  -1,
                                  0x00ff00ff00ff00ffll,
                                  0x5555aaaa5555aaaall,
                                  3000000000ll,
                                  4000000000ll,
                                  -3000000000ll,
                                  1500000000ll,
                                  0x7fffffff00000001ll,
                                  0x400000007fffffffll,
                                  42,
                                  42};
  for (int k = 0; k < 40; ++k) {
    pairs.push_back(static_cast<long long>(0x9e3779b97f4a7c15ull * (k + 1)));
    pairs.push_back(static_cast<long long>(0xbf58476d1ce4e5b9ull * (k + 3)) >> (k % 50));
  }
  const int n = static_cast<int>(pairs.size() / 2);
  long long* din;
  unsigned long long* dout;
  CHECK_CUDA(cudaMalloc(&din, pairs.size() * sizeof(long long)));
  CHECK_CUDA(cudaMalloc(&dout, n * kResults * sizeof(unsigned long long)));
  CHECK_CUDA(
      cudaMemcpy(din, pairs.data(), pairs.size() * sizeof(long long), cudaMemcpyHostToDevice));
  integerKernel<<<(n + 31) / 32, 32>>>(din, dout, n);
  CHECK_CUDA(cudaGetLastError());
  std::vector<unsigned long long> out(n * kResults);
  CHECK_CUDA(cudaMemcpy(out.data(), dout, out.size() * sizeof(unsigned long long),
                        cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) {
    const long long a = pairs[2 * i], b = pairs[2 * i + 1];
    const int a32 = static_cast<int>(a), b32 = static_cast<int>(b);
    const unsigned ua = static_cast<unsigned>(a), ub = static_cast<unsigned>(b);
    const bool int32Overflow = a32 == INT_MIN && b32 == -1;
    const bool int64Overflow = a == LLONG_MIN && b == -1;
    unsigned long long want[kResults];
    want[0] = b32 != 0 && !int32Overflow ? static_cast<unsigned long long>(a32 / b32) : 0;
    want[1] = b32 != 0 && !int32Overflow ? static_cast<unsigned long long>(a32 % b32) : 0;
    want[2] = ub != 0 ? ua / ub : 0;
    want[3] = ub != 0 ? ua % ub : 0;
    want[4] = b != 0 && !int64Overflow ? static_cast<unsigned long long>(a / b) : 0;
    want[5] = b != 0 && !int64Overflow ? static_cast<unsigned long long>(a % b) : 0;
    want[6] = b != 0 ? static_cast<unsigned long long>(a) / static_cast<unsigned long long>(b) : 0;
    want[7] = static_cast<unsigned>(static_cast<int>((static_cast<long long>(a32) * b32) >> 32));
    want[8] = static_cast<unsigned long long>(
        (static_cast<unsigned __int128>(static_cast<unsigned long long>(a)) *
         static_cast<unsigned long long>(b)) >>
        64);
    want[9] = popc32(ua) + 100 * popc64(static_cast<uint64_t>(a));
    want[10] = clz32(ua) + 100 * clz64(static_cast<uint64_t>(a));
    want[11] = ffs32(ua) + 100 * ffs64(static_cast<uint64_t>(a));
    want[12] = brev32(ua);
    want[13] = brev64(static_cast<uint64_t>(a));
    want[14] = funnelLeft(ua, ub, static_cast<unsigned>(a >> 40) & 63);
    want[15] = funnelRightClamp(ua, ub, static_cast<unsigned>(b >> 40) & 63);
    want[16] = bytePerm(ua, ub, static_cast<unsigned>(a >> 32) & 0x7777);
    want[17] = static_cast<unsigned>(
        (a32 > b32 ? static_cast<long long>(a32) - b32 : static_cast<long long>(b32) - a32) + 5);
    want[18] = static_cast<unsigned>(a32 >> (ub & 31)) ^ (ua >> (ub & 31));
    want[19] = (static_cast<unsigned long long>(a) << (ub & 63)) ^
               (static_cast<unsigned long long>(a) >> (ua & 63));
    want[20] = static_cast<unsigned>(roundToInt(static_cast<float>(a) * 1e-9f));
    want[21] = truncToUnsigned(static_cast<float>(b) * 3e-10f);
    want[22] = static_cast<unsigned long long>(floorToInt64(static_cast<double>(a) * 0.75));
    const unsigned x16 = ua & 0xffff, y16 = ub & 0xffff;
    want[23] = (x16 > y16 ? x16 - y16 : y16 - x16) + 1u +
               (static_cast<unsigned long long>(static_cast<unsigned>(
                    static_cast<int>((static_cast<long long>(a32) + b32) >> 1)))
                << 32);
    for (int r = 0; r < kResults; ++r) {
      if ((r == 0 || r == 1) && int32Overflow) continue;  // undefined in C++
      if ((r == 4 || r == 5) && int64Overflow) continue;
      CHECK(out[i * kResults + r] == want[r],
            "result %d for (%lld, %lld) = 0x%llx, expected 0x%llx", r, a, b, out[i * kResults + r],
            want[r]);
    }
  }
  std::printf("%d integer operations x %d operand pairs ok\n", kResults, n);
  CHECK_CUDA(cudaFree(din));
  CHECK_CUDA(cudaFree(dout));
  return pass();
}
