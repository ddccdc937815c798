// Instruction-level edge cases, one tiny PTX snippet each. Expected values follow the PTX ISA
// text (clamped shifts, saturating cvt with NaN -> 0, ties-to-even, ftz, fused fma, carry flags).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>

#include "ptx_snippet.h"

namespace gpupool::ptx::testing {
namespace {

uint32_t f2u(float f) { return std::bit_cast<uint32_t>(f); }
uint64_t d2u(double d) { return std::bit_cast<uint64_t>(d); }
float u2f(uint64_t u) { return std::bit_cast<float>(static_cast<uint32_t>(u)); }
double u2d(uint64_t u) { return std::bit_cast<double>(u); }

SnippetResult ok(const std::string& decls, const std::string& body, std::vector<uint64_t> in = {},
                 uint32_t threads = 1) {
  return runPassingSnippet(decls, body, std::move(in), threads);
}

TEST(Instruction, IntegerDivisionNeverTraps) {
  auto r = ok(".reg .b32 %a, %b, %q, %m; .reg .b64 %x, %y, %z;",
              "mov.b32 %a, 0x80000000; mov.b32 %b, -1; div.s32 %q, %a, %b; rem.s32 %m, %a, %b;"
              "st.global.u32 [%out], %q; st.global.u32 [%out+8], %m;"
              "mov.b32 %b, 0; div.u32 %q, %a, %b; div.s32 %q, %a, %b; rem.u32 %m, %a, %b;"
              "st.global.u32 [%out+16], %m;"
              "mov.b64 %x, 0x8000000000000000; mov.b64 %y, -1; div.s64 %z, %x, %y; st.global.u64 "
              "[%out+24], %z;");
  EXPECT_EQ(r.out[0], 0x80000000u);  // wraps
  EXPECT_EQ(r.out[1], 0u);
  EXPECT_EQ(r.out[2], 0x80000000u);  // x % 0 leaves x
  EXPECT_EQ(r.out[3], 0x8000000000000000ull);
}

TEST(Instruction, ShiftAmountsClampToWidth) {
  auto r = ok(".reg .b32 %a, %n, %d; .reg .b64 %x, %y;",
              "mov.b32 %a, -8; mov.b32 %n, 32; shl.b32 %d, %a, %n; st.global.u32 [%out], %d;"
              "mov.b32 %n, 100; shr.s32 %d, %a, %n; st.global.u32 [%out+8], %d;"
              "shr.u32 %d, %a, %n; st.global.u32 [%out+16], %d;"
              "mov.b32 %n, 31; shr.u32 %d, %a, %n; st.global.u32 [%out+24], %d;"
              "mov.b64 %x, 1; mov.b32 %n, 64; shl.b64 %y, %x, %n; st.global.u64 [%out+32], %y;"
              "mov.b32 %n, 63; shl.b64 %y, %x, %n; st.global.u64 [%out+40], %y;");
  EXPECT_EQ(r.out[0], 0u);
  EXPECT_EQ(r.out[1], 0xffffffffu);
  EXPECT_EQ(r.out[2], 0u);
  EXPECT_EQ(r.out[3], 1u);
  EXPECT_EQ(r.out[4], 0u);
  EXPECT_EQ(r.out[5], 0x8000000000000000ull);
}

TEST(Instruction, CvtFloatToIntSaturatesAndMapsNanToZero) {
  std::vector<uint64_t> in = {f2u(NAN),  f2u(3e9f),  f2u(-3e9f), f2u(2.5f),
                              f2u(3.5f), f2u(-2.5f), f2u(-0.7f), f2u(1e10f)};
  auto r = ok(".reg .b32 %f, %i; .reg .b64 %a, %p, %q;",
              "mul.wide.u32 %a, %tid, 8; add.s64 %p, %in, %a; add.s64 %q, %out, %a;"
              "ld.global.b32 %f, [%p];"
              "cvt.rzi.s32.f32 %i, %f; st.global.u32 [%q], %i;"
              "cvt.rni.s32.f32 %i, %f; st.global.u32 [%q+64], %i;"
              "cvt.rzi.u32.f32 %i, %f; st.global.u32 [%q+128], %i;",
              in, 8);
  const int32_t rz[] = {0, INT32_MAX, INT32_MIN, 2, 3, -2, 0, INT32_MAX};
  const int32_t rn[] = {0, INT32_MAX, INT32_MIN, 2, 4, -2, -1, INT32_MAX};
  const uint32_t ru[] = {0, 3000000000u, 0, 2, 3, 0, 0, UINT32_MAX};
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(static_cast<int32_t>(r.out[i]), rz[i]) << i;
    EXPECT_EQ(static_cast<int32_t>(r.out[8 + i]), rn[i]) << i;
    EXPECT_EQ(static_cast<uint32_t>(r.out[16 + i]), ru[i]) << i;
  }
}

TEST(Instruction, CvtIntegerSaturationAndExtension) {
  auto r =
      ok(".reg .b32 %a, %d; .reg .b16 %h; .reg .b64 %x;",
         "mov.b32 %a, 300; cvt.sat.u8.s32 %d, %a; st.global.u32 [%out], %d;"
         "mov.b32 %a, -5; cvt.sat.u8.s32 %d, %a; st.global.u32 [%out+8], %d;"
         "cvt.sat.s8.s32 %d, %a; st.global.u32 [%out+16], %d;"
         "mov.b32 %a, 0x1ff80; cvt.u16.u32 %h, %a; cvt.s64.s16 %x, %h; st.global.u64 [%out+24], %x;"
         "cvt.u64.u16 %x, %h; st.global.u64 [%out+32], %x;");
  EXPECT_EQ(r.out[0], 255u);
  EXPECT_EQ(r.out[1], 0u);
  EXPECT_EQ(static_cast<uint8_t>(r.out[2]), static_cast<uint8_t>(-5));
  EXPECT_EQ(r.out[3], 0xffffffffffffff80ull);
  EXPECT_EQ(r.out[4], 0xff80u);
}

TEST(Instruction, FloatMinMaxNanAndSignedZero) {
  auto r = ok(".reg .f32 %a, %b, %d;",
              "mov.f32 %a, 0f7FC00000; mov.f32 %b, 0f3F800000; min.f32 %d, %a, %b; st.global.f32 "
              "[%out], %d;"
              "max.f32 %d, %b, %a; st.global.f32 [%out+8], %d;"
              "max.f32 %d, %a, %a; st.global.f32 [%out+16], %d;"
              "mov.f32 %a, 0f80000000; mov.f32 %b, 0f00000000; min.f32 %d, %b, %a; st.global.f32 "
              "[%out+24], %d;"
              "max.f32 %d, %a, %b; st.global.f32 [%out+32], %d;");
  EXPECT_EQ(u2f(r.out[0]), 1.0f);
  EXPECT_EQ(u2f(r.out[1]), 1.0f);
  EXPECT_EQ(static_cast<uint32_t>(r.out[2]), 0x7fffffffu);  // canonical NaN
  EXPECT_EQ(static_cast<uint32_t>(r.out[3]), 0x80000000u);  // -0 < +0
  EXPECT_EQ(static_cast<uint32_t>(r.out[4]), 0u);
}

TEST(Instruction, FtzSatAndDirectedRounding) {
  auto r = ok(".reg .f32 %a, %b, %d;",
              "mov.f32 %a, 0f00000001; mov.f32 %b, 0f00000000;"
              "add.ftz.f32 %d, %a, %b; st.global.f32 [%out], %d;"
              "add.f32 %d, %a, %b; st.global.f32 [%out+8], %d;"
              "mov.f32 %a, 0f40000000; add.sat.f32 %d, %a, %b; st.global.f32 [%out+16], %d;"
              "mov.f32 %a, 0fBF800000; add.sat.f32 %d, %a, %b; st.global.f32 [%out+24], %d;"
              "mov.f32 %a, 0f7FC00000; add.sat.f32 %d, %a, %b; st.global.f32 [%out+32], %d;"
              "mov.f32 %a, 0f3F800000; mov.f32 %b, 0f30800000;"  // 1 + 2^-30
              "add.rn.f32 %d, %a, %b; st.global.f32 [%out+40], %d;"
              "add.rp.f32 %d, %a, %b; st.global.f32 [%out+48], %d;"
              "add.rm.f32 %d, %a, %b; st.global.f32 [%out+56], %d;"
              "neg.f32 %b, %b; add.rz.f32 %d, %a, %b; st.global.f32 [%out+64], %d;"
              "add.rm.f32 %d, %a, %b; st.global.f32 [%out+72], %d;");
  EXPECT_EQ(static_cast<uint32_t>(r.out[0]), 0u);
  EXPECT_EQ(static_cast<uint32_t>(r.out[1]), 1u);
  EXPECT_EQ(u2f(r.out[2]), 1.0f);
  EXPECT_EQ(u2f(r.out[3]), 0.0f);
  EXPECT_EQ(u2f(r.out[4]), 0.0f);  // .sat maps NaN to 0
  EXPECT_EQ(u2f(r.out[5]), 1.0f);
  EXPECT_EQ(u2f(r.out[6]), std::nextafter(1.0f, 2.0f));
  EXPECT_EQ(u2f(r.out[7]), 1.0f);
  EXPECT_EQ(u2f(r.out[8]), std::nextafter(1.0f, 0.0f));
  EXPECT_EQ(u2f(r.out[9]), std::nextafter(1.0f, 0.0f));
}

TEST(Instruction, FmaIsFused) {
  // (1+2^-23)(1-2^-23) - 1 = -2^-46 exactly; an unfused multiply rounds the product to 1.
  auto r = ok(".reg .f32 %a, %b, %c, %d; .reg .f64 %x, %y, %z, %w;",
              "mov.f32 %a, 0f3F800001; mov.f32 %b, 0f3F7FFFFE; mov.f32 %c, 0fBF800000;"
              "fma.rn.f32 %d, %a, %b, %c; st.global.f32 [%out], %d;"
              "mul.rn.f32 %d, %a, %b; add.rn.f32 %d, %d, %c; st.global.f32 [%out+8], %d;"
              "mov.f64 %x, 0d3FF0000000000001; mov.f64 %y, 0d3FEFFFFFFFFFFFFE; mov.f64 %z, "
              "0dBFF0000000000000;"
              "fma.rn.f64 %w, %x, %y, %z; st.global.f64 [%out+16], %w;");
  EXPECT_EQ(u2f(r.out[0]), -std::ldexp(1.0f, -46));
  EXPECT_EQ(u2f(r.out[1]), 0.0f);
  EXPECT_EQ(u2d(r.out[2]), -std::ldexp(1.0, -104));
}

TEST(Instruction, HexFloatLiteralsAreBitPatterns) {
  auto r = ok(".reg .f64 %x; .reg .b32 %r;",
              "st.global.f64 [%out], 0d3FF0000000000000;"
              "mov.f64 %x, 0d4009000000000000; st.global.f64 [%out+8], %x;"
              "mov.b32 %r, 0f3FC00000; st.global.u32 [%out+16], %r;");
  EXPECT_EQ(u2d(r.out[0]), 1.0);
  EXPECT_EQ(u2d(r.out[1]), 3.125);
  EXPECT_EQ(r.out[2], f2u(1.5f));
}

TEST(Instruction, SetpOrderedUnorderedAndCombine) {
  auto r =
      ok(".reg .f32 %n, %one; .reg .pred %p, %q, %t; .reg .b32 %v;",
         "mov.f32 %n, 0f7FC00000; mov.f32 %one, 0f3F800000;"
         "setp.lt.f32 %p, %n, %one; selp.u32 %v, 1, 0, %p; st.global.u32 [%out], %v;"
         "setp.ltu.f32 %p, %n, %one; selp.u32 %v, 1, 0, %p; st.global.u32 [%out+8], %v;"
         "setp.ne.f32 %p, %n, %one; selp.u32 %v, 1, 0, %p; st.global.u32 [%out+16], %v;"
         "setp.neu.f32 %p, %n, %one; selp.u32 %v, 1, 0, %p; st.global.u32 [%out+24], %v;"
         "setp.nan.f32 %p, %n, %one; selp.u32 %v, 1, 0, %p; st.global.u32 [%out+32], %v;"
         "setp.num.f32 %p, %one, %one; selp.u32 %v, 1, 0, %p; st.global.u32 [%out+40], %v;"
         "setp.eq.s32 %t, 1, 1;"
         "setp.gt.and.f32 %p|%q, %one, %n, %t; selp.u32 %v, 1, 0, %p; st.global.u32 [%out+48], %v;"
         "selp.u32 %v, 1, 0, %q; st.global.u32 [%out+56], %v;"
         "setp.lo.u32 %p, 1, 0xffffffff; selp.u32 %v, 1, 0, %p; st.global.u32 [%out+64], %v;"
         "setp.lt.s32 %p, 1, 0xffffffff; selp.u32 %v, 1, 0, %p; st.global.u32 [%out+72], %v;"
         "not.pred %p, %p; @%p st.global.u32 [%out+80], 7; @!%p st.global.u32 [%out+80], 9;");
  const uint64_t expect[] = {0, 1, 0, 1, 1, 1, 0, 1, 1, 0, 7};
  for (int i = 0; i < 11; ++i) EXPECT_EQ(r.out[i], expect[i]) << i;
}

TEST(Instruction, CarryChains) {
  auto r =
      ok(".reg .b32 %a, %b, %d, %e;",
         "mov.b32 %a, 0xffffffff; mov.b32 %b, 1;"
         "add.cc.u32 %d, %a, %b; addc.u32 %e, 0, 0; st.global.u32 [%out], %d; st.global.u32 "
         "[%out+8], %e;"
         "mov.b32 %a, 0; sub.cc.u32 %d, %a, %b; subc.u32 %e, 5, 0; st.global.u32 [%out+16], %d;"
         "st.global.u32 [%out+24], %e;"
         "mov.b32 %a, 0x80000000; mov.b32 %b, 4;"  // a*b = 2^33: lo 0, hi 2
         "mad.lo.cc.u32 %d, %a, %b, 0xffffffff; madc.hi.u32 %e, %a, %b, 10;"
         "st.global.u32 [%out+32], %d; st.global.u32 [%out+40], %e;"
         "add.cc.u32 %d, 1, 1; addc.cc.u32 %d, 0xffffffff, 1; addc.u32 %e, 0, 0; st.global.u32 "
         "[%out+48], %e;");
  EXPECT_EQ(r.out[0], 0u);
  EXPECT_EQ(r.out[1], 1u);
  EXPECT_EQ(r.out[2], 0xffffffffu);
  EXPECT_EQ(r.out[3], 4u);  // 5 - 0 - borrow
  EXPECT_EQ(r.out[4], 0xffffffffu);
  EXPECT_EQ(r.out[5], 12u);  // 2 + 10 + carry 0
  EXPECT_EQ(r.out[6], 1u);
}

TEST(Instruction, WideAndHighMultiplies) {
  auto r = ok(".reg .b32 %a, %b; .reg .b64 %x, %y, %d;",
              "mov.b32 %a, -3; mov.b32 %b, 5; mul.wide.s32 %d, %a, %b; st.global.u64 [%out], %d;"
              "mul.wide.u32 %d, %a, %b; st.global.u64 [%out+8], %d;"
              "mad.wide.u32 %d, %a, %b, 7; st.global.u64 [%out+16], %d;"
              "mov.b64 %x, 0xffffffffffffffff; mov.b64 %y, 3; mul.hi.u64 %d, %x, %y; st.global.u64 "
              "[%out+24], %d;"
              "mul.hi.s64 %d, %x, %y; st.global.u64 [%out+32], %d;"
              "mul.hi.s32 %a, %a, %b; st.global.u32 [%out+40], %a;");
  EXPECT_EQ(r.out[0], static_cast<uint64_t>(-15ll));
  EXPECT_EQ(r.out[1], 0xfffffffdull * 5);
  EXPECT_EQ(r.out[2], 0xfffffffdull * 5 + 7);
  EXPECT_EQ(r.out[3], 2u);
  EXPECT_EQ(r.out[4], 0xffffffffffffffffull);  // -1 * 3 = -3: high word all ones
  EXPECT_EQ(r.out[5], 0xffffffffu);
}

TEST(Instruction, BitManipulation) {
  auto r = ok(".reg .b32 %a, %d; .reg .b64 %x;",
              "mov.b32 %a, 0x80000000; bfe.s32 %d, %a, 28, 4; st.global.u32 [%out], %d;"
              "bfe.u32 %d, %a, 28, 4; st.global.u32 [%out+8], %d;"
              "bfe.u32 %d, %a, 40, 4; st.global.u32 [%out+16], %d;"
              "bfi.b32 %d, 0xf, 0x12345678, 8, 4; st.global.u32 [%out+24], %d;"
              "bfind.u32 %d, 0; st.global.u32 [%out+32], %d;"
              "bfind.s32 %d, -1; st.global.u32 [%out+40], %d;"
              "bfind.shiftamt.u32 %d, 1; st.global.u32 [%out+48], %d;"
              "clz.b32 %d, 0; st.global.u32 [%out+56], %d;"
              "mov.b64 %x, 0xf0000000000000ff; popc.b64 %d, %x; st.global.u32 [%out+64], %d;"
              "clz.b64 %d, %x; st.global.u32 [%out+72], %d;"
              "brev.b32 %d, 1; st.global.u32 [%out+80], %d;"
              "prmt.b32 %d, 0x44332211, 0x88776655, 0x0123; st.global.u32 [%out+88], %d;"
              "prmt.b32 %d, 0x44332211, 0x88776655, 0x8f74; st.global.u32 [%out+96], %d;"
              "shf.l.wrap.b32 %d, 0x80000001, 0x00000003, 36; st.global.u32 [%out+104], %d;"
              "shf.r.clamp.b32 %d, 0x80000001, 0x00000003, 40; st.global.u32 [%out+112], %d;"
              "shf.r.wrap.b32 %d, 0x80000001, 0x00000003, 1; st.global.u32 [%out+120], %d;");
  EXPECT_EQ(r.out[0], 0xfffffff8u);
  EXPECT_EQ(r.out[1], 8u);
  EXPECT_EQ(r.out[2], 0u);
  EXPECT_EQ(r.out[3], 0x12345f78u);
  EXPECT_EQ(r.out[4], 0xffffffffu);
  EXPECT_EQ(r.out[5], 0xffffffffu);
  EXPECT_EQ(r.out[6], 31u);
  EXPECT_EQ(r.out[7], 32u);
  EXPECT_EQ(r.out[8], 12u);
  EXPECT_EQ(r.out[9], 0u);
  EXPECT_EQ(r.out[10], 0x80000000u);
  EXPECT_EQ(r.out[11], 0x11223344u);
  // selectors 4 -> 0x55, 7 -> 0x88, f -> sign of byte 7 (0x88) = ff, 8 -> sign of byte 0 (0x11) =
  // 00
  EXPECT_EQ(r.out[12], 0x00ff8855u);
  EXPECT_EQ(r.out[13], 0x00000038u);  // (b:a) << 4, high word
  EXPECT_EQ(r.out[14], 0x00000003u);  // clamped to 32: b
  EXPECT_EQ(r.out[15], 0xc0000000u);
}

// bmsk (emitted by CUB's BlockRadixSort): expected values from the PTX ISA's semantics
// pseudocode for bmsk.
TEST(Instruction, BitMaskClampAndWrap) {
  auto r =
      ok(".reg .b32 %d, %a, %b;",
         "bmsk.wrap.b32 %d, 1, 2; st.global.u32 [%out], %d;"
         "bmsk.clamp.b32 %d, 4, 8; st.global.u32 [%out+8], %d;"
         "bmsk.clamp.b32 %d, 28, 8; st.global.u32 [%out+16], %d;"
         "bmsk.clamp.b32 %d, 32, 4; st.global.u32 [%out+24], %d;"
         "bmsk.clamp.b32 %d, 8, 40; st.global.u32 [%out+32], %d;"
         "bmsk.wrap.b32 %d, 33, 34; st.global.u32 [%out+40], %d;"
         "bmsk.wrap.b32 %d, 5, 32; st.global.u32 [%out+48], %d;"
         "mov.b32 %a, 0; mov.b32 %b, 31; bmsk.clamp.b32 %d, %a, %b; st.global.u32 [%out+56], %d;");
  EXPECT_EQ(r.out[0], 0x00000006u);  // the ISA's own example
  EXPECT_EQ(r.out[1], 0x00000ff0u);
  EXPECT_EQ(r.out[2], 0xf0000000u);  // a + b >= 32: every bit from a up
  EXPECT_EQ(r.out[3], 0x00000000u);  // start past the word
  EXPECT_EQ(r.out[4], 0xffffff00u);  // width clamped: every bit from a up
  EXPECT_EQ(r.out[5], 0x00000006u);  // wrapped to start 1, width 2
  EXPECT_EQ(r.out[6], 0x00000000u);  // width wraps to 0
  EXPECT_EQ(r.out[7], 0x7fffffffu);
}

TEST(Instruction, TestpAndCopysign) {
  std::vector<uint64_t> in = {f2u(1.0f), f2u(INFINITY), f2u(NAN), 0x00000001u, 0};
  auto r = ok(
      ".reg .f32 %f; .reg .pred %p; .reg .b32 %v, %bits; .reg .b64 %a, %q;",
      "mul.wide.u32 %a, %tid, 8; add.s64 %q, %in, %a; ld.global.f32 %f, [%q]; add.s64 %q, %out, %a;"
      "mov.b32 %bits, 0;"
      "testp.finite.f32 %p, %f; selp.u32 %v, 1, 0, %p; or.b32 %bits, %bits, %v;"
      "testp.infinite.f32 %p, %f; selp.u32 %v, 2, 0, %p; or.b32 %bits, %bits, %v;"
      "testp.notanumber.f32 %p, %f; selp.u32 %v, 4, 0, %p; or.b32 %bits, %bits, %v;"
      "testp.normal.f32 %p, %f; selp.u32 %v, 8, 0, %p; or.b32 %bits, %bits, %v;"
      "testp.subnormal.f32 %p, %f; selp.u32 %v, 16, 0, %p; or.b32 %bits, %bits, %v;"
      "testp.number.f32 %p, %f; selp.u32 %v, 32, 0, %p; or.b32 %bits, %bits, %v;"
      "st.global.u32 [%q], %bits;"
      "copysign.f32 %f, 0fBF800000, 0f40400000; st.global.f32 [%q+64], %f;",
      in, 5);
  EXPECT_EQ(r.out[0], 1u | 8 | 32);
  EXPECT_EQ(r.out[1], 2u | 32);
  EXPECT_EQ(r.out[2], 4u);
  EXPECT_EQ(r.out[3], 1u | 16 | 32);
  EXPECT_EQ(r.out[4], 1u | 32);  // zero: finite, neither normal nor subnormal
  EXPECT_EQ(u2f(r.out[8]), -3.0f);
}

TEST(Instruction, HalfConversionsRoundToNearestEven) {
  auto r = ok(".reg .f32 %f; .reg .b16 %h; .reg .b32 %x;",
              "mov.f32 %f, 0f477FF000; cvt.rn.f16.f32 %h, %f; cvt.u32.u16 %x, %h; st.global.u32 "
              "[%out], %x;"  // 65520
              "mov.f32 %f, 0f477FEF00; cvt.rn.f16.f32 %h, %f; cvt.u32.u16 %x, %h; st.global.u32 "
              "[%out+8], %x;"
              "mov.f32 %f, 0f33800000; cvt.rn.f16.f32 %h, %f; cvt.u32.u16 %x, %h; st.global.u32 "
              "[%out+16], %x;"  // 2^-24
              "mov.f32 %f, 0f33000000; cvt.rn.f16.f32 %h, %f; cvt.u32.u16 %x, %h; st.global.u32 "
              "[%out+24], %x;"  // 2^-25 tie
              "mov.b16 %h, 0x3c01; cvt.f32.f16 %f, %h; st.global.f32 [%out+32], %f;"
              "cvt.rn.f16x2.f32 %x, 0f3F800000, 0fC0000000; st.global.u32 [%out+40], %x;");
  EXPECT_EQ(r.out[0], 0x7c00u);  // overflow to inf
  EXPECT_EQ(r.out[1], 0x7bffu);  // 65519 -> max finite
  EXPECT_EQ(r.out[2], 0x0001u);  // smallest subnormal
  EXPECT_EQ(r.out[3], 0x0000u);  // tie rounds to even (zero)
  EXPECT_EQ(u2f(r.out[4]), 1.0f + std::ldexp(1.0f, -10));
  EXPECT_EQ(r.out[5], 0x3c00c000u);  // a in the upper half
}

TEST(Instruction, ScopedRegistersShadowOuterOnes) {
  auto r = ok(".reg .b32 %r1, %r2;",
              "mov.b32 %r1, 11;"
              "{ .reg .b32 %r1; mov.b32 %r1, 22; mov.b32 %r2, %r1; }"
              "st.global.u32 [%out], %r1; st.global.u32 [%out+8], %r2;");
  EXPECT_EQ(r.out[0], 11u);
  EXPECT_EQ(r.out[1], 22u);
}

TEST(Instruction, VectorOperandsAndSink) {
  auto r = ok(".reg .b32 %a, %b; .reg .b64 %x; .reg .f32 %f<4>;",
              "mov.b64 %x, 0x1111111122222222; mov.b64 {%a, _}, %x; st.global.u32 [%out], %a;"
              "mov.b64 {_, %b}, %x; st.global.u32 [%out+8], %b;"
              "mov.b64 %x, {%b, %a}; st.global.u64 [%out+16], %x;"
              "st.global.v2.u32 [%out+24], {%a, %b};"
              "ld.global.v4.f32 {%f0, %f1, %f2, %f3}, [%in]; st.global.v4.f32 [%out+32], {%f3, "
              "%f2, %f1, %f0};",
              {d2u(0), d2u(0)});
  EXPECT_EQ(r.out[0], 0x22222222u);
  EXPECT_EQ(r.out[1], 0x11111111u);
  EXPECT_EQ(r.out[2], 0x2222222211111111ull);
  EXPECT_EQ(r.out[3], 0x1111111122222222ull);
}

// The 256-bit forms: eight 32-bit elements in one ld or st; .v8 of other element sizes is refused
// by name.
TEST(Instruction, EightElementLoadsAndStores) {
  auto r = ok(
      ".reg .b32 %r<8>;",
      "ld.global.v8.b32 {%r0, %r1, %r2, %r3, %r4, %r5, %r6, %r7}, [%in];"
      "st.global.v8.b32 [%out], {%r7, %r6, %r5, %r4, %r3, %r2, %r1, %r0};",
      {0x0000000200000001ull, 0x0000000400000003ull, 0x0000000600000005ull, 0x0000000800000007ull});
  EXPECT_EQ(r.out[0], 0x0000000700000008ull);
  EXPECT_EQ(r.out[1], 0x0000000500000006ull);
  EXPECT_EQ(r.out[2], 0x0000000300000004ull);
  EXPECT_EQ(r.out[3], 0x0000000100000002ull);
  SnippetResult wide = runSnippet(
      ".reg .b16 %h<8>;", "ld.global.v8.b16 {%h0, %h1, %h2, %h3, %h4, %h5, %h6, %h7}, [%in];", {});
  EXPECT_EQ(wide.loadCode, CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_NE(wide.loadMessage.find(".v8"), std::string::npos) << wide.loadMessage;
}

// Scalar video shifts (PTX ISA, vshl/vshr): a sign- or zero-extended by its type, shifted at
// 64-bit precision by b (.clamp caps it at 32, .wrap takes it mod 32), then .add/.min/.max with c
// compared by the destination's signedness, and the low 32 bits kept.
TEST(Instruction, VideoShifts) {
  auto r =
      ok(".reg .b32 %a, %b, %c, %d;",
         "mov.b32 %a, 0x80000000; mov.b32 %b, 4; mov.b32 %c, 1;"
         "vshr.u32.u32.u32.clamp.add %d, %a, %b, %c; st.global.u32 [%out], %d;"
         "mov.b32 %b, 40; vshr.u32.u32.u32.clamp.add %d, %a, %b, %c; st.global.u32 [%out+8], %d;"
         "vshr.s32.s32.u32.clamp %d, %a, %b; st.global.u32 [%out+16], %d;"
         "mov.b32 %a, 0x100; mov.b32 %b, 36; vshr.u32.u32.u32.wrap %d, %a, %b;"
         "st.global.u32 [%out+24], %d;"
         "mov.b32 %a, 1; mov.b32 %b, 32; vshl.u32.u32.u32.clamp %d, %a, %b;"
         "st.global.u32 [%out+32], %d;"
         "mov.b32 %b, 33; vshl.u32.u32.u32.wrap %d, %a, %b; st.global.u32 [%out+40], %d;"
         "mov.b32 %b, 31; mov.b32 %c, 5; vshl.s32.s32.u32.clamp.max %d, %a, %b, %c;"
         "st.global.u32 [%out+48], %d;"
         "vshl.s32.s32.u32.clamp.min %d, %a, %b, %c; st.global.u32 [%out+56], %d;");
  EXPECT_EQ(r.out[0], 0x08000001u);
  EXPECT_EQ(r.out[1], 1u);           // shifted out entirely, plus c
  EXPECT_EQ(r.out[2], 0xffffffffu);  // signed: the sign fills
  EXPECT_EQ(r.out[3], 0x10u);        // 36 wraps to 4
  EXPECT_EQ(r.out[4], 0u);
  EXPECT_EQ(r.out[5], 2u);
  EXPECT_EQ(r.out[6], 0x80000000u);  // 2^31 at 64-bit precision is above 5
  EXPECT_EQ(r.out[7], 5u);
  SnippetResult saturating =
      runSnippet(".reg .b32 %a, %d;", "mov.b32 %a, 1; vshl.u32.u32.u32.sat.clamp %d, %a, %a;", {});
  EXPECT_EQ(saturating.loadCode, CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_NE(saturating.loadMessage.find(".sat"), std::string::npos) << saturating.loadMessage;
}

TEST(Instruction, GenericAddressingOfSharedAndLocal) {
  SnippetResult r = runSnippet(
      ".reg .b64 %s, %g, %l; .reg .b32 %v; .local .align 4 .b8 depot[16];",
      "mov.u64 %s, buf; cvta.shared.u64 %g, %s; st.u32 [%g+4], 77; ld.shared.u32 %v, [buf+4];"
      "st.global.u32 [%out], %v;"
      "mov.u64 %l, depot; cvta.local.u64 %g, %l; st.u32 [%g+8], 88; ld.local.u32 %v, [depot+8];"
      "st.global.u32 [%out+8], %v;"
      "cvta.to.shared.u64 %l, %g; st.global.u64 [%out+16], %s;",
      {}, 1);
  // `buf` is declared by the module below, so this first attempt must fail to load.
  EXPECT_EQ(r.loadCode, CUDA_ERROR_INVALID_PTX);
  EXPECT_NE(r.loadMessage.find("buf"), std::string::npos) << r.loadMessage;

  std::string text = snippetModule(
      ".reg .b64 %s, %g, %l; .reg .b32 %v; .local .align 4 .b8 depot[16];",
      "mov.u64 %s, buf; cvta.shared.u64 %g, %s; st.u32 [%g+4], 77; ld.shared.u32 %v, [buf+4];"
      "st.global.u32 [%out], %v;"
      "mov.u64 %l, depot; cvta.local.u64 %g, %l; st.u32 [%g+8], 88; ld.local.u32 %v, [depot+8];"
      "st.global.u32 [%out+8], %v;");
  text.insert(text.find(".visible"), ".shared .align 4 .b8 buf[64];\n");
  auto m = loadOrFail(text);
  ASSERT_TRUE(m);
  HostDeviceMemory memory;
  uint64_t out = memory.allocate(64 * 8), in = memory.allocate(64 * 8);
  const KernelInfo& k = m->kernels()[0];
  EXPECT_EQ(k.staticSharedBytes, 64u);
  EXPECT_EQ(k.localBytesPerThread, 16u);
  LaunchConfig c;
  auto res =
      launch(*m, k, c, ParamBlock(k).set(0, out).set(1, in).data(), memory, LaunchServices{});
  ASSERT_EQ(res.status.code, CUDA_SUCCESS) << res.status.message;
  auto o = memory.download<uint32_t>(out, 4);
  EXPECT_EQ(o[0], 77u);
  EXPECT_EQ(o[2], 88u);
}

TEST(Instruction, ShuffleClampAndSegmentMasks) {
  auto r = ok(".reg .b32 %v, %d; .reg .pred %p; .reg .b64 %a, %q;",
              "mul.wide.u32 %a, %tid, 8; add.s64 %q, %out, %a; mul.lo.u32 %v, %tid, 10;"
              "shfl.sync.up.b32 %d|%p, %v, 3, 0, 0xffffffff; st.global.u32 [%q], %d;"
              "selp.u32 %d, 1, 0, %p; st.global.u32 [%q+4], %d;"
              // width 8 segments: c = ((32-8) << 8) | 0x1f
              "shfl.sync.down.b32 %d|%p, %v, 5, 0x181f, 0xffffffff; st.global.u32 [%q+256], %d;"
              "selp.u32 %d, 1, 0, %p; st.global.u32 [%q+260], %d;",
              {}, 32);
  for (uint32_t lane = 0; lane < 32; ++lane) {
    uint64_t up = r.out[lane], down = r.out[32 + lane];
    EXPECT_EQ(static_cast<uint32_t>(up), (lane < 3 ? lane : lane - 3) * 10) << lane;
    EXPECT_EQ(up >> 32, lane >= 3 ? 1u : 0u) << lane;
    bool inSegment = (lane % 8) + 5 < 8;
    EXPECT_EQ(static_cast<uint32_t>(down), (inSegment ? lane + 5 : lane) * 10) << lane;
    EXPECT_EQ(down >> 32, inSegment ? 1u : 0u) << lane;
  }
}

TEST(Instruction, VoteAndReduxIgnoreExitedLanes) {
  auto r = ok(
      ".reg .b32 %v, %d, %mask; .reg .pred %p, %big; .reg .b64 %a, %q;",
      "setp.ge.u32 %big, %tid, 10; @%big exit;"
      "mul.wide.u32 %a, %tid, 8; add.s64 %q, %out, %a;"
      "setp.lt.u32 %p, %tid, 100; vote.sync.all.pred %p, %p, 0xffffffff;"
      "selp.u32 %d, 1, 0, %p; st.global.u32 [%q], %d;"
      "setp.eq.u32 %p, %tid, 3; vote.sync.ballot.b32 %d, %p, 0xffffffff; st.global.u32 [%q+4], %d;"
      "redux.sync.add.s32 %d, %tid, 0xffffffff; st.global.u32 [%q+128], %d;"
      "redux.sync.min.s32 %d, %tid, 0xffffffff; st.global.u32 [%q+132], %d;"
      "activemask.b32 %mask; st.global.u32 [%q+256], %mask;"
      "setp.lt.u32 %p, %tid, 4; @%p bra LOW; activemask.b32 %mask; bra.uni JOIN;"
      "LOW: activemask.b32 %mask; JOIN: st.global.u32 [%q+260], %mask;",
      {}, 32);
  for (uint32_t l = 0; l < 10; ++l) {
    EXPECT_EQ(r.out[l], (uint64_t{8} << 32) | 1) << l;
    EXPECT_EQ(r.out[16 + l], 45u) << l;  // 0+...+9, min 0
    EXPECT_EQ(static_cast<uint32_t>(r.out[32 + l]), 0x3ffu) << l;
    EXPECT_EQ(r.out[32 + l] >> 32, l < 4 ? 0xfu : 0x3f0u) << l;
  }
  for (uint32_t l = 10; l < 16; ++l) EXPECT_EQ(r.out[l], 0u);
}

TEST(Instruction, SharedAtomicsIncDecCas) {
  std::string text = snippetModule(
      ".reg .b32 %old, %v; .reg .b64 %q;",
      "mov.u64 %q, %out;"  // every thread stores the same final values
      "atom.shared.inc.u32 %old, [cnt], 4; atom.shared.dec.u32 %old, [cnt+4], 3;"
      "atom.shared.max.s32 %old, [cnt+8], %tid; atom.shared.cas.b32 %old, [cnt+12], %tid, 100;"
      "atom.shared.add.f32 %old, [cnt+16], 0f3F000000;"
      "bar.sync 0;"
      "ld.shared.u32 %v, [cnt]; st.global.u32 [%q], %v; ld.shared.u32 %v, [cnt+4]; st.global.u32 "
      "[%q+4], %v;"
      "ld.shared.u32 %v, [cnt+8]; st.global.u32 [%q+256], %v; ld.shared.u32 %v, [cnt+12]; "
      "st.global.u32 [%q+260], %v;"
      "ld.shared.f32 %v, [cnt+16]; st.global.u32 [%q+384], %v;");
  text.insert(text.find(".visible"), ".shared .align 4 .b8 cnt[20];\n");
  auto m = loadOrFail(text);
  ASSERT_TRUE(m);
  HostDeviceMemory memory;
  uint64_t out = memory.allocate(64 * 8), in = memory.allocate(64 * 8);
  const KernelInfo& k = m->kernels()[0];
  LaunchConfig c;
  c.block[0] = 64;
  auto res =
      launch(*m, k, c, ParamBlock(k).set(0, out).set(1, in).data(), memory, LaunchServices{});
  ASSERT_EQ(res.status.code, CUDA_SUCCESS) << res.status.message;
  auto o = memory.download<uint64_t>(out, 64);
  // 64 incs wrapping at 4: 64 % 5 = 4. decs from 0 with limit 3: 0->3->2->1->0->3... 64 steps -> 0.
  EXPECT_EQ(static_cast<uint32_t>(o[0]), 64u % 5);
  EXPECT_EQ(o[0] >> 32, 0u);
  EXPECT_EQ(static_cast<uint32_t>(o[32]), 63u);
  EXPECT_EQ(o[32] >> 32, 100u);  // only tid 0 saw 0
  EXPECT_EQ(u2f(o[48]), 32.0f);
}

TEST(Instruction, SpecialRegisters) {
  // Slot t: low word %lanemask_lt, high word (%warpid << 16) | (WARP_SZ << 8) | %laneid;
  // slot 40 + t: %lanemask_ge. Thread 0 also checks that %clock64 does not go backwards.
  auto r = ok(
      ".reg .b32 %v, %w; .reg .b64 %a, %q, %c0, %c1; .reg .pred %p1;",
      "mul.wide.u32 %a, %tid, 8; add.s64 %q, %out, %a;"
      "mov.u32 %v, %lanemask_lt; st.global.u32 [%q], %v;"
      "mov.u32 %v, %warpid; shl.b32 %v, %v, 16; mov.u32 %w, WARP_SZ; shl.b32 %w, %w, 8; or.b32 %v, "
      "%v, %w;"
      "mov.u32 %w, %laneid; or.b32 %v, %v, %w; st.global.u32 [%q+4], %v;"
      "setp.lt.u32 %p1, %tid, 24; @%p1 mov.u32 %v, %lanemask_ge; @%p1 st.global.u32 [%q+320], %v;"
      "mov.u64 %c0, %clock64; mov.u64 %c1, %clock64; setp.ge.u64 %p1, %c1, %c0; selp.u32 %v, 1, 0, "
      "%p1;"
      "setp.eq.u32 %p1, %tid, 0; @%p1 st.global.u32 [%out+324], %v;",
      {}, 40);
  for (uint32_t t = 0; t < 40; ++t) {
    uint32_t lane = t % 32;
    EXPECT_EQ(static_cast<uint32_t>(r.out[t]), (1u << lane) - 1) << t;
    EXPECT_EQ(r.out[t] >> 32, ((t / 32) << 16) | (32u << 8) | lane) << t;
    if (t < 24) {
      EXPECT_EQ(static_cast<uint32_t>(r.out[40 + t]), ~((1u << lane) - 1)) << t;
    }
  }
  EXPECT_EQ(r.out[40] >> 32, 1u);
}

// cuBLAS's PTX uses the .L2::cache_hint forms, whose extra operand is a cache policy (a hint).
TEST(Instruction, CacheHintOperandIsAcceptedAndIgnored) {
  auto r = ok(".reg .b64 %v, %policy;",
              "mov.b64 %policy, 0x10000000; ld.global.L2::cache_hint.u64 %v, [%in+8], %policy;"
              "st.global.L2::cache_hint.u64 [%out+16], %v, %policy;",
              {11, 22, 33});
  EXPECT_EQ(r.out[2], 22u);
}

TEST(Instruction, CpAsyncCopiesSynchronously) {
  std::string text =
      snippetModule(".reg .b32 %v; .reg .b64 %s;",
                    "cp.async.ca.shared.global [buf], [%in], 16; cp.async.cg.shared.global "
                    "[buf+16], [%in+16], 16, 4;"
                    "cp.async.commit_group; cp.async.wait_group 0; cp.async.wait_all;"
                    "ld.shared.u32 %v, [buf+12]; st.global.u32 [%out], %v; ld.shared.u32 %v, "
                    "[buf+16]; st.global.u32 [%out+8], %v;"
                    "ld.shared.u32 %v, [buf+20]; st.global.u32 [%out+16], %v;");
  text.insert(text.find(".visible"), ".shared .align 16 .b8 buf[32];\n");
  auto m = loadOrFail(text);
  ASSERT_TRUE(m);
  HostDeviceMemory memory;
  uint64_t out = memory.allocate(64 * 8),
           in = memory.upload(std::vector<uint32_t>{1, 2, 3, 4, 5, 6, 7, 8});
  const KernelInfo& k = m->kernels()[0];
  auto res = launch(*m, k, LaunchConfig{}, ParamBlock(k).set(0, out).set(1, in).data(), memory,
                    LaunchServices{});
  ASSERT_EQ(res.status.code, CUDA_SUCCESS) << res.status.message;
  auto o = memory.download<uint64_t>(out, 3);
  EXPECT_EQ(o[0], 4u);
  EXPECT_EQ(o[1], 5u);
  EXPECT_EQ(o[2], 0u);  // beyond src-size: zero-filled
}

TEST(Instruction, Bfloat16AndHalf2Arithmetic) {
  auto r =
      ok(".reg .b16 %h, %g; .reg .b32 %x, %y; .reg .f32 %f;",
         "cvt.rn.bf16.f32 %h, 0f3F808000; cvt.u32.u16 %x, %h; st.global.u32 [%out], %x;"  // tie ->
                                                                                          // even
         "cvt.rn.bf16.f32 %g, 0f40000000; fma.rn.bf16 %h, %h, %g, %g; cvt.f32.bf16 %f, %h;"
         "st.global.f32 [%out+8], %f;"
         "mov.b32 %x, 0x40003c00; mov.b32 %y, 0xc4003800; add.rn.f16x2 %x, %x, %y; st.global.u32 "
         "[%out+16], %x;"
         "mul.rn.f16x2 %x, %x, %y; st.global.u32 [%out+24], %x;"
         "mov.b16 %h, 0x7bff; add.rn.f16 %h, %h, %h; cvt.u32.u16 %x, %h; st.global.u32 [%out+32], "
         "%x;");
  EXPECT_EQ(r.out[0], 0x3f80u);
  EXPECT_EQ(u2f(r.out[1]), 4.0f);    // 1*2+2
  EXPECT_EQ(r.out[2], 0xc0003e00u);  // {2 + -4, 1 + 0.5} = {-2, 1.5}
  EXPECT_EQ(r.out[3], 0x48003a00u);  // {-2 * -4, 1.5 * 0.5} = {8, 0.75}
  EXPECT_EQ(r.out[4], 0x7c00u);      // overflow to +inf
}

}  // namespace
}  // namespace gpupool::ptx::testing
