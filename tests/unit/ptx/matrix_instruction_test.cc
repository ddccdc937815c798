// Warp-wide matrix instructions (mma.sync, wmma, ldmatrix, stmatrix, movmatrix) on one warp.
// Fragment layouts are checked against the PTX ISA's figures, written out here per shape
// ("Matrix Fragments for mma.m16n8k16" and friends), independently of matrix_layout.cc: inputs
// are placed by those figures, outputs are read back by them and compared with a host product.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <functional>
#include <random>

#include "half_float.h"
#include "host_device_memory.h"
#include "ptx_snippet.h"

namespace gpupool::ptx::testing {
namespace {

struct Position {
  unsigned row, col;
};
// lane, element index -> matrix position.
using Layout = std::function<Position(unsigned lane, unsigned element)>;

// The ISA's figures. g = groupID = lane / 4, t = threadID_in_group = lane % 4.
// A of m16n8k16 (.f16/.bf16): a0..a7; rows g (a0,a1,a4,a5) or g+8; columns 2t+(i&1), +8 for i>=4.
Position isaA_m16n8k16_f16(unsigned lane, unsigned i) {
  const unsigned g = lane / 4, t = lane % 4;
  const bool lowRow = i < 2 || (i >= 4 && i < 6);
  return {lowRow ? g : g + 8, t * 2 + (i & 1) + (i >= 4 ? 8 : 0)};
}
// B of m16n8k16: b0..b3; rows 2t+(i&1), +8 for i>=2; column g.
Position isaB_m16n8k16_f16(unsigned lane, unsigned i) {
  return {lane % 4 * 2 + (i & 1) + (i >= 2 ? 8 : 0), lane / 4};
}
// C/D of m16n8k*: c0..c3; row g (c0,c1) or g+8; column 2t+(i&1).
Position isaC_m16n8(unsigned lane, unsigned i) {
  return {lane / 4 + (i >= 2 ? 8 : 0), lane % 4 * 2 + (i & 1)};
}
// A of m16n8k8 (.f16/.bf16): a0..a3; rows g (a0,a1) or g+8; columns 2t+(i&1).
Position isaA_m16n8k8_f16(unsigned lane, unsigned i) {
  return {lane / 4 + (i >= 2 ? 8 : 0), lane % 4 * 2 + (i & 1)};
}
// B of m16n8k8 (.f16/.bf16): b0,b1; rows 2t+i; column g.
Position isaB_m16n8k8_f16(unsigned lane, unsigned i) { return {lane % 4 * 2 + i, lane / 4}; }
// A of m16n8k8 .tf32: a0..a3; rows g (a0,a2) or g+8 (a1,a3); columns t (a0,a1) or t+4.
Position isaA_m16n8k8_tf32(unsigned lane, unsigned i) {
  return {lane / 4 + (i % 2 ? 8 : 0), lane % 4 + (i >= 2 ? 4 : 0)};
}
// B of m16n8k8 .tf32: b0,b1; rows t, t+4; column g.
Position isaB_m16n8k8_tf32(unsigned lane, unsigned i) { return {lane % 4 + 4 * i, lane / 4}; }
// m8n8k4 .f64: A a0 at (g, t); B b0 at (t, g); C c0,c1 at (g, 2t+i).
Position isaA_m8n8k4_f64(unsigned lane, unsigned) { return {lane / 4, lane % 4}; }
Position isaB_m8n8k4_f64(unsigned lane, unsigned) { return {lane % 4, lane / 4}; }
Position isaC_m8n8(unsigned lane, unsigned i) { return {lane / 4, lane % 4 * 2 + i}; }
// m16n8k32 .s8/.u8: A a0..a15; rows g for a0..a3 and a8..a11, else g+8; columns 4t+(i&3), +16
// for i>=8. B b0..b7: rows 4t+(i&3), +16 for i>=4; column g.
Position isaA_m16n8k32_s8(unsigned lane, unsigned i) {
  const unsigned g = lane / 4, t = lane % 4;
  const bool lowRow = i < 4 || (i >= 8 && i < 12);
  return {lowRow ? g : g + 8, t * 4 + (i & 3) + (i >= 8 ? 16 : 0)};
}
Position isaB_m16n8k32_s8(unsigned lane, unsigned i) {
  return {lane % 4 * 4 + (i & 3) + (i >= 4 ? 16 : 0), lane / 4};
}
// m8n8k128 .b1: A a0..a31 at (g, 32t+i); B b0..b31 at (32t+i, g).
Position isaA_m8n8k128_b1(unsigned lane, unsigned i) { return {lane / 4, lane % 4 * 32 + i}; }
Position isaB_m8n8k128_b1(unsigned lane, unsigned i) { return {lane % 4 * 32 + i, lane / 4}; }

// m16n8k64 .s4/.u4: A a0..a31, rows g for a0..a7 and a16..a23, else g+8; columns 8t+(i&7), +32
// for i>=16. B b0..b15: rows 8t+(i&7), +32 for i>=8; column g.
Position isaA_m16n8k64_s4(unsigned lane, unsigned i) {
  const unsigned g = lane / 4, t = lane % 4;
  const bool lowRow = i < 8 || (i >= 16 && i < 24);
  return {lowRow ? g : g + 8, t * 8 + (i & 7) + (i >= 16 ? 32 : 0)};
}
Position isaB_m16n8k64_s4(unsigned lane, unsigned i) {
  return {lane % 4 * 8 + (i & 7) + (i >= 8 ? 32 : 0), lane / 4};
}
// m16n8k256 .b1: A a0..a127, rows g for a0..a31 and a64..a95, else g+8; columns 32t+(i&31),
// +128 for i>=64. B b0..b63: rows 32t+(i&31), +128 for i>=32; column g.
Position isaA_m16n8k256_b1(unsigned lane, unsigned i) {
  const unsigned g = lane / 4, t = lane % 4;
  const bool lowRow = i < 32 || (i >= 64 && i < 96);
  return {lowRow ? g : g + 8, t * 32 + (i & 31) + (i >= 64 ? 128 : 0)};
}
Position isaB_m16n8k256_b1(unsigned lane, unsigned i) {
  return {lane % 4 * 32 + (i & 31) + (i >= 32 ? 128 : 0), lane / 4};
}

struct Operand {
  unsigned rows, cols, registers, elementBits;
  Layout layout;
};

// Packs a row-major matrix of element bit patterns into per-lane registers by `layout`.
std::vector<uint64_t> pack(const Operand& o, const std::vector<uint64_t>& matrix) {
  const unsigned regBits = o.elementBits == 64 ? 64 : 32, perReg = regBits / o.elementBits;
  std::vector<uint64_t> regs(32 * o.registers, 0);
  for (unsigned lane = 0; lane < 32; ++lane)
    for (unsigned e = 0; e < o.registers * perReg; ++e) {
      const Position p = o.layout(lane, e);
      const uint64_t mask = o.elementBits == 64 ? ~0ull : (1ull << o.elementBits) - 1;
      regs[lane * o.registers + e / perReg] |= (matrix[p.row * o.cols + p.col] & mask)
                                               << (e % perReg * o.elementBits);
    }
  return regs;
}
std::vector<uint64_t> unpack(const Operand& o, const std::vector<uint64_t>& regs) {
  const unsigned regBits = o.elementBits == 64 ? 64 : 32, perReg = regBits / o.elementBits;
  std::vector<uint64_t> matrix(o.rows * o.cols, 0);
  for (unsigned lane = 0; lane < 32; ++lane)
    for (unsigned e = 0; e < o.registers * perReg; ++e) {
      const Position p = o.layout(lane, e);
      const uint64_t mask = o.elementBits == 64 ? ~0ull : (1ull << o.elementBits) - 1;
      matrix[p.row * o.cols + p.col] =
          (regs[lane * o.registers + e / perReg] >> (e % perReg * o.elementBits)) & mask;
    }
  return matrix;
}

struct WarpRun {
  CUresult loadCode = CUDA_SUCCESS;
  std::string loadMessage;
  LaunchResult launch;
  std::vector<uint64_t> out;
};

// A one-warp kernel: every lane loads `inRegs` registers from in[lane * inRegs ...] (64-bit
// slots), runs `body`, stores `outRegs` registers %o0.. to out[lane * outRegs ...]. Input
// registers are %i0..; `shared` bytes of .shared memory are available as `smem`.
WarpRun runWarp(const std::string& body, unsigned inRegs, unsigned outRegs,
                const std::vector<uint64_t>& in, bool wide = false, uint32_t threads = 32,
                const std::string& target = "sm_90") {
  const std::string t = wide ? ".b64" : ".b32";
  std::string decls = ".reg .b64 %pin, %pout, %off;\n.reg " + t + " %i<" +
                      std::to_string(std::max(inRegs, 1u)) + ">, %o<" +
                      std::to_string(std::max(outRegs, 1u)) + ">;\n.reg .b32 %s, %w;\n";
  std::string pre =
      "mul.wide.u32 %off, %tid, " + std::to_string(inRegs * 8) + "; add.s64 %pin, %in, %off;\n";
  for (unsigned r = 0; r < inRegs; ++r)
    pre +=
        "ld.global" + t + " %i" + std::to_string(r) + ", [%pin+" + std::to_string(r * 8) + "];\n";
  std::string post =
      "mul.wide.u32 %off, %tid, " + std::to_string(outRegs * 8) + "; add.s64 %pout, %out, %off;\n";
  for (unsigned r = 0; r < outRegs; ++r)
    post +=
        "st.global" + t + " [%pout+" + std::to_string(r * 8) + "], %o" + std::to_string(r) + ";\n";
  const std::string text =
      ".version 8.0\n.target " + target +
      "\n.address_size 64\n.shared .align 16 .b8 smem[4096];\n"
      ".visible .entry warp(.param .u64 out, .param .u64 in)\n{\n"
      ".reg .b64 %out, %in;\n.reg .b32 %tid;\n" +
      decls + "ld.param.u64 %out, [out];\nld.param.u64 %in, [in];\nmov.u32 %tid, %tid.x;\n" + pre +
      body + "\n" + post + "ret;\n}\n";
  WarpRun r;
  auto loaded = Module::load(text);
  r.loadCode = loaded.status().code;
  r.loadMessage = loaded.status().message;
  if (!loaded) return r;
  std::unique_ptr<Module> module = std::move(*loaded);
  HostDeviceMemory memory;
  memory.bindModuleGlobals(*module);
  std::vector<uint64_t> input = in;
  input.resize(std::max<size_t>(32u * std::max(inRegs, 1u), input.size()), 0);
  const uint64_t inAddr = memory.upload(input);
  // Past the registers' slots, 2 KiB the body may write (at %out + 256 * outRegs).
  const uint64_t outAddr = memory.allocate(32u * std::max(outRegs, 1u) * 8 + 2048);
  const KernelInfo& k = module->kernels().at(0);
  ParamBlock params(k);
  params.set(0, outAddr).set(1, inAddr);
  LaunchConfig config;
  config.block[0] = threads;
  LaunchServices services;
  services.workerThreads = 1;
  services.stepBudget = 1'000'000;
  r.launch = launch(*module, k, config, params.data(), memory, services);
  r.out = memory.download<uint64_t>(outAddr, 32u * std::max(outRegs, 1u) + 256);
  return r;
}

std::string registerList(const std::string& prefix, unsigned first, unsigned count) {
  std::string s = "{";
  for (unsigned i = 0; i < count; ++i) s += (i ? ", " : "") + prefix + std::to_string(first + i);
  return s + "}";
}

// Runs `opcode` d, a, b, c with the operands placed by the ISA layouts; returns D's matrix.
std::vector<uint64_t> runMma(const std::string& opcode, const Operand& a, const Operand& b,
                             const Operand& c, const Operand& d, const std::vector<uint64_t>& ma,
                             const std::vector<uint64_t>& mb, const std::vector<uint64_t>& mc,
                             bool wide = false) {
  const unsigned na = a.registers, nb = b.registers, nc = c.registers, nd = d.registers;
  const unsigned inRegs = na + nb + nc;
  std::vector<uint64_t> ra = pack(a, ma), rb = pack(b, mb), rc = pack(c, mc);
  std::vector<uint64_t> in(32 * inRegs);
  for (unsigned l = 0; l < 32; ++l) {
    for (unsigned r = 0; r < na; ++r) in[l * inRegs + r] = ra[l * na + r];
    for (unsigned r = 0; r < nb; ++r) in[l * inRegs + na + r] = rb[l * nb + r];
    for (unsigned r = 0; r < nc; ++r) in[l * inRegs + na + nb + r] = rc[l * nc + r];
  }
  const std::string body = opcode + " " + registerList("%o", 0, nd) + ", " +
                           registerList("%i", 0, na) + ", " + registerList("%i", na, nb) + ", " +
                           registerList("%i", na + nb, nc) + ";";
  WarpRun r = runWarp(body, inRegs, nd, in, wide);
  EXPECT_EQ(r.loadCode, CUDA_SUCCESS) << r.loadMessage;
  EXPECT_EQ(r.launch.status.code, CUDA_SUCCESS) << r.launch.status.message;
  if (r.loadCode != CUDA_SUCCESS) return {};
  return unpack(d, r.out);
}

uint64_t f32bits(float f) { return std::bit_cast<uint32_t>(f); }
float bitsF32(uint64_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b)); }

TEST(MatrixInstruction, MmaM16n8k16F16LayoutAndProduct) {
  // Small integers: every product and sum is exact, so D must match bit for bit.
  std::mt19937 rng(1);
  std::vector<uint64_t> a(16 * 16), b(16 * 8), c(16 * 8);
  std::vector<double> fa(a.size()), fb(b.size()), fc(c.size());
  for (size_t i = 0; i < a.size(); ++i) fa[i] = static_cast<int>(rng() % 17) - 8;
  for (size_t i = 0; i < b.size(); ++i) fb[i] = static_cast<int>(rng() % 9) - 4;
  for (size_t i = 0; i < c.size(); ++i) fc[i] = static_cast<double>(i);
  for (size_t i = 0; i < a.size(); ++i) a[i] = doubleToHalf(fa[i]);
  for (size_t i = 0; i < b.size(); ++i) b[i] = doubleToHalf(fb[i]);
  for (size_t i = 0; i < c.size(); ++i) c[i] = f32bits(static_cast<float>(fc[i]));
  const Operand A{16, 16, 4, 16, isaA_m16n8k16_f16}, B{16, 8, 2, 16, isaB_m16n8k16_f16},
      C{16, 8, 4, 32, isaC_m16n8};
  auto d = runMma("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", A, B, C, C, a, b, c);
  ASSERT_EQ(d.size(), 128u);
  for (unsigned i = 0; i < 16; ++i)
    for (unsigned j = 0; j < 8; ++j) {
      double want = fc[i * 8 + j];
      for (unsigned k = 0; k < 16; ++k) want += fa[i * 16 + k] * fb[k * 8 + j];
      EXPECT_EQ(bitsF32(d[i * 8 + j]), static_cast<float>(want)) << i << "," << j;
    }
}

TEST(MatrixInstruction, MmaLaneIndexPatternLandsWhereTheIsaSays) {
  // A holds, at each position, the number of the lane and element the ISA puts there; B is the
  // identity on its first 8 rows, so D = A[:, 0..7] names the lane and element of each A slot.
  const Operand A{16, 16, 4, 16, isaA_m16n8k16_f16}, B{16, 8, 2, 16, isaB_m16n8k16_f16},
      C{16, 8, 4, 32, isaC_m16n8};
  std::vector<uint64_t> a(256), b(128, 0), c(128, 0);
  for (unsigned lane = 0; lane < 32; ++lane)
    for (unsigned e = 0; e < 8; ++e) {
      const Position p = isaA_m16n8k16_f16(lane, e);
      a[p.row * 16 + p.col] = doubleToHalf(lane * 8 + e);
    }
  for (unsigned k = 0; k < 8; ++k) b[k * 8 + k] = doubleToHalf(1.0);
  for (uint64_t& x : c) x = f32bits(0.0f);
  // Run with the lane pattern as raw registers (no host-side packing of A), so the emu's layout
  // alone decides where lane l's element e goes.
  std::vector<uint64_t> in(32 * 10, 0);
  std::vector<uint64_t> rb = pack(B, b);
  for (unsigned l = 0; l < 32; ++l) {
    for (unsigned r = 0; r < 4; ++r)
      in[l * 10 + r] = doubleToHalf(l * 8 + 2 * r) | uint64_t{doubleToHalf(l * 8 + 2 * r + 1)}
                                                         << 16;
    for (unsigned r = 0; r < 2; ++r) in[l * 10 + 4 + r] = rb[l * 2 + r];
  }
  WarpRun r = runWarp(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%o0, %o1, %o2, %o3}, {%i0, %i1, %i2, "
      "%i3}, {%i4, %i5}, {%i6, %i7, %i8, %i9};",
      10, 4, in);
  ASSERT_EQ(r.launch.status.code, CUDA_SUCCESS) << r.loadMessage << r.launch.status.message;
  for (unsigned lane = 0; lane < 32; ++lane)
    for (unsigned e = 0; e < 4; ++e) {
      const Position p = isaC_m16n8(lane, e);
      EXPECT_EQ(bitsF32(r.out[lane * 4 + e]),
                static_cast<float>(halfToDouble(static_cast<uint16_t>(a[p.row * 16 + p.col]))))
          << "lane " << lane << " d" << e;
    }
}

TEST(MatrixInstruction, MmaF16SpecialValues) {
  // NaN, infinities and subnormal f16 inputs: subnormal products are exact in f32; inf * 0 and
  // NaN give NaN; inf + finite stays inf.
  const Operand A{16, 8, 2, 16, isaA_m16n8k8_f16}, B{8, 8, 1, 16, isaB_m16n8k8_f16},
      C{16, 8, 4, 32, isaC_m16n8};
  std::vector<uint64_t> a(128, 0), b(64, 0), c(128, f32bits(0.0f));
  a[0 * 8 + 0] = 0x0001;  // 2^-24, the smallest subnormal
  b[0 * 8 + 0] = 0x0001;
  a[1 * 8 + 0] = 0x7c00;  // +inf
  b[0 * 8 + 1] = doubleToHalf(2.0);
  a[2 * 8 + 0] = 0x7c00;  // inf * 0 (b[0][2] is 0)
  a[3 * 8 + 0] = 0x7e00;  // NaN
  b[0 * 8 + 3] = doubleToHalf(1.0);
  a[4 * 8 + 3] = 0x03ff;  // largest subnormal 1023 * 2^-24
  b[3 * 8 + 4] = doubleToHalf(-1.0);
  auto d = runMma("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32", A, B, C, C, a, b, c);
  ASSERT_EQ(d.size(), 128u);
  EXPECT_EQ(bitsF32(d[0 * 8 + 0]), std::ldexp(1.0f, -48));
  EXPECT_EQ(bitsF32(d[1 * 8 + 1]), INFINITY);
  EXPECT_TRUE(std::isnan(bitsF32(d[2 * 8 + 2])));
  EXPECT_TRUE(std::isnan(bitsF32(d[3 * 8 + 3])));
  EXPECT_EQ(bitsF32(d[4 * 8 + 4]), -1023.0f * std::ldexp(1.0f, -24));
  EXPECT_EQ(bitsF32(d[5 * 8 + 5]), 0.0f);
}

TEST(MatrixInstruction, MmaF16AccumulatorRoundsOnceToHalf) {
  const Operand A{16, 8, 2, 16, isaA_m16n8k8_f16}, B{8, 8, 1, 16, isaB_m16n8k8_f16};
  // f16 C/D: two .f16x2 registers, same element order as the f32 form.
  const Operand C{16, 8, 2, 16, isaC_m16n8};
  std::vector<uint64_t> a(128, 0), b(64, 0), c(128, 0);
  // Row 0: 2048 + 1 + 1. Rounded once, 2050 (representable); rounding after each step would
  // leave 2048. Column 1 sums 2048 + 1 = 2049, a tie that rounds to even 2048.
  a[0] = doubleToHalf(2048.0);
  a[1] = a[2] = doubleToHalf(1.0);
  b[0 * 8 + 0] = b[1 * 8 + 0] = b[2 * 8 + 0] = doubleToHalf(1.0);
  b[0 * 8 + 1] = b[1 * 8 + 1] = doubleToHalf(1.0);
  // Row 1: 60000 + 60000 overflows f16 to inf.
  a[8] = a[9] = doubleToHalf(60000.0);
  auto d = runMma("mma.sync.aligned.m16n8k8.row.col.f16.f16.f16.f16", A, B, C, C, a, b, c);
  ASSERT_EQ(d.size(), 128u);
  EXPECT_EQ(d[0], doubleToHalf(2050.0));
  EXPECT_EQ(d[1], doubleToHalf(2048.0));
  EXPECT_EQ(d[1 * 8 + 1], 0x7c00u);
}

TEST(MatrixInstruction, MmaBf16AndTf32) {
  std::vector<uint64_t> a(16 * 8), b(8 * 8), c(128, f32bits(0.5f));
  std::vector<double> fa(a.size()), fb(b.size());
  for (size_t i = 0; i < a.size(); ++i)
    fa[i] = static_cast<double>(static_cast<int>(i % 13) - 6) / 4;
  for (size_t i = 0; i < b.size(); ++i) fb[i] = static_cast<double>(static_cast<int>(i % 7) - 3);
  for (size_t i = 0; i < a.size(); ++i) a[i] = doubleToBfloat(fa[i]);
  for (size_t i = 0; i < b.size(); ++i) b[i] = doubleToBfloat(fb[i]);
  const Operand C{16, 8, 4, 32, isaC_m16n8};
  auto d = runMma("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32",
                  {16, 8, 2, 16, isaA_m16n8k8_f16}, {8, 8, 1, 16, isaB_m16n8k8_f16}, C, C, a, b, c);
  ASSERT_EQ(d.size(), 128u);
  for (unsigned i = 0; i < 16; ++i)
    for (unsigned j = 0; j < 8; ++j) {
      double want = 0.5;
      for (unsigned k = 0; k < 8; ++k) want += fa[i * 8 + k] * fb[k * 8 + j];
      EXPECT_EQ(bitsF32(d[i * 8 + j]), static_cast<float>(want)) << i << "," << j;
    }
  // tf32: the low 13 bits of each input are ignored.
  for (size_t i = 0; i < a.size(); ++i) a[i] = f32bits(static_cast<float>(fa[i])) | 0x1fff;
  for (size_t i = 0; i < b.size(); ++i) b[i] = f32bits(static_cast<float>(fb[i])) | 0x1fff;
  d = runMma("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32",
             {16, 8, 4, 32, isaA_m16n8k8_tf32}, {8, 8, 2, 32, isaB_m16n8k8_tf32}, C, C, a, b, c);
  ASSERT_EQ(d.size(), 128u);
  for (unsigned i = 0; i < 16; ++i)
    for (unsigned j = 0; j < 8; ++j) {
      double want = 0.5;
      for (unsigned k = 0; k < 8; ++k) {
        const float x = bitsF32(a[i * 8 + k] & ~0x1fffull), y = bitsF32(b[k * 8 + j] & ~0x1fffull);
        want += double{x} * y;
      }
      EXPECT_EQ(bitsF32(d[i * 8 + j]), static_cast<float>(want)) << i << "," << j;
    }
}

TEST(MatrixInstruction, MmaF64M8n8k4) {
  std::vector<uint64_t> a(32), b(32), c(64);
  std::vector<double> fa(32), fb(32), fc(64);
  for (unsigned i = 0; i < 32; ++i) fa[i] = 1.0 / (i + 1), fb[i] = std::sqrt(i + 2.0);
  for (unsigned i = 0; i < 64; ++i) fc[i] = i * 0.1;
  for (unsigned i = 0; i < 32; ++i) a[i] = std::bit_cast<uint64_t>(fa[i]);
  for (unsigned i = 0; i < 32; ++i) b[i] = std::bit_cast<uint64_t>(fb[i]);
  for (unsigned i = 0; i < 64; ++i) c[i] = std::bit_cast<uint64_t>(fc[i]);
  const Operand C{8, 8, 2, 64, isaC_m8n8};
  auto d = runMma("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64", {8, 4, 1, 64, isaA_m8n8k4_f64},
                  {4, 8, 1, 64, isaB_m8n8k4_f64}, C, C, a, b, c, true);
  ASSERT_EQ(d.size(), 64u);
  for (unsigned i = 0; i < 8; ++i)
    for (unsigned j = 0; j < 8; ++j) {
      double want = fc[i * 8 + j];
      for (unsigned k = 0; k < 4; ++k) want = std::fma(fa[i * 4 + k], fb[k * 8 + j], want);
      EXPECT_EQ(std::bit_cast<double>(d[i * 8 + j]), want) << i << "," << j;
    }
}

TEST(MatrixInstruction, MmaS8WrapsAndSatfiniteClamps) {
  const Operand A{16, 32, 4, 8, isaA_m16n8k32_s8}, B{32, 8, 2, 8, isaB_m16n8k32_s8},
      C{16, 8, 4, 32, isaC_m16n8};
  std::vector<uint64_t> a(16 * 32), b(32 * 8), c(128);
  std::mt19937 rng(7);
  for (auto& x : a) x = static_cast<uint8_t>(rng());
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  for (unsigned i = 0; i < 128; ++i)
    c[i] = static_cast<uint32_t>(i % 2 ? INT32_MAX - 100 : INT32_MIN + 100 + int32_t(i));
  for (bool sat : {false, true}) {
    auto d = runMma(std::string("mma.sync.aligned.m16n8k32.row.col") + (sat ? ".satfinite" : "") +
                        ".s32.s8.u8.s32",
                    A, B, C, C, a, b, c);
    ASSERT_EQ(d.size(), 128u);
    for (unsigned i = 0; i < 16; ++i)
      for (unsigned j = 0; j < 8; ++j) {
        int64_t want = static_cast<int32_t>(c[i * 8 + j]);
        for (unsigned k = 0; k < 32; ++k)
          want += int64_t{static_cast<int8_t>(a[i * 32 + k])} * static_cast<uint8_t>(b[k * 8 + j]);
        const int64_t expect = sat ? std::clamp<int64_t>(want, INT32_MIN, INT32_MAX)
                                   : static_cast<int32_t>(static_cast<uint32_t>(want));
        EXPECT_EQ(static_cast<int32_t>(d[i * 8 + j]), expect) << sat << " " << i << "," << j;
      }
  }
}

// fp8 (sm_89+, cuBLASLt's fp8 GEMMs): m16n8k32 with .e4m3 and .e5m2 A and B in either pairing,
// the .s8 fragment layout, f32 accumulators. Every fp8 value is exact in double, and small
// integers keep the sums exact, so the result must equal the reference bit for bit.
TEST(MatrixInstruction, MmaFp8M16n8k32) {
  const Operand A{16, 32, 4, 8, isaA_m16n8k32_s8}, B{32, 8, 2, 8, isaB_m16n8k32_s8},
      C{16, 8, 4, 32, isaC_m16n8};
  // e4m3: 0x38 = 1.0, 0x40 = 2.0, 0xC0 = -2.0, 0x30 = 0.5; e5m2: 0x3C = 1.0, 0xC0 = -2.0.
  const uint8_t e4m3[] = {0x38, 0x40, 0xC0, 0x30, 0x00};
  const double e4m3Value[] = {1.0, 2.0, -2.0, 0.5, 0.0};
  const uint8_t e5m2[] = {0x3C, 0xC0, 0x40, 0x00};
  const double e5m2Value[] = {1.0, -2.0, 2.0, 0.0};
  std::vector<uint64_t> a(16 * 32), b(32 * 8), c(128);
  std::vector<double> va(a.size()), vb(b.size());
  std::mt19937 rng(11);
  for (size_t i = 0; i < a.size(); ++i) {
    const unsigned pick = rng() % 5;
    a[i] = e4m3[pick];
    va[i] = e4m3Value[pick];
  }
  for (size_t i = 0; i < b.size(); ++i) {
    const unsigned pick = rng() % 4;
    b[i] = e5m2[pick];
    vb[i] = e5m2Value[pick];
  }
  for (unsigned i = 0; i < 128; ++i) c[i] = f32bits(static_cast<float>(i) - 64.0f);
  auto d = runMma("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32", A, B, C, C, a, b, c);
  ASSERT_EQ(d.size(), 128u);
  for (unsigned i = 0; i < 16; ++i)
    for (unsigned j = 0; j < 8; ++j) {
      double want = bitsF32(c[i * 8 + j]);
      for (unsigned k = 0; k < 32; ++k) want += va[i * 32 + k] * vb[k * 8 + j];
      EXPECT_EQ(bitsF32(d[i * 8 + j]), static_cast<float>(want)) << i << "," << j;
    }
}

TEST(MatrixInstruction, MmaB1XorAndPopc) {
  const Operand A{8, 128, 1, 1, isaA_m8n8k128_b1}, B{128, 8, 1, 1, isaB_m8n8k128_b1},
      C{8, 8, 2, 32, isaC_m8n8};
  std::vector<uint64_t> a(8 * 128), b(128 * 8), c(64);
  std::mt19937 rng(3);
  for (auto& x : a) x = rng() & 1;
  for (auto& x : b) x = rng() & 1;
  for (unsigned i = 0; i < 64; ++i) c[i] = i;
  for (bool isXor : {true, false}) {
    auto d = runMma(std::string("mma.sync.aligned.m8n8k128.row.col.s32.b1.b1.s32") +
                        (isXor ? ".xor.popc" : ".and.popc"),
                    A, B, C, C, a, b, c);
    ASSERT_EQ(d.size(), 64u);
    for (unsigned i = 0; i < 8; ++i)
      for (unsigned j = 0; j < 8; ++j) {
        uint64_t want = c[i * 8 + j];
        for (unsigned k = 0; k < 128; ++k)
          want += isXor ? a[i * 128 + k] ^ b[k * 8 + j] : a[i * 128 + k] & b[k * 8 + j];
        EXPECT_EQ(d[i * 8 + j], want) << isXor << " " << i << "," << j;
      }
  }
}

TEST(MatrixInstruction, MmaS4M16n8k64AndB1M16n8k256And) {
  const Operand C{16, 8, 4, 32, isaC_m16n8};
  std::mt19937 rng(11);
  std::vector<uint64_t> a(16 * 64), b(64 * 8), c(128);
  for (auto& x : a) x = rng() & 15;
  for (auto& x : b) x = rng() & 15;
  for (unsigned i = 0; i < 128; ++i) c[i] = i * 3;
  auto d = runMma("mma.sync.aligned.m16n8k64.row.col.s32.s4.u4.s32",
                  {16, 64, 4, 4, isaA_m16n8k64_s4}, {64, 8, 2, 4, isaB_m16n8k64_s4}, C, C, a, b, c);
  ASSERT_EQ(d.size(), 128u);
  for (unsigned i = 0; i < 16; ++i)
    for (unsigned j = 0; j < 8; ++j) {
      int64_t want = static_cast<int32_t>(c[i * 8 + j]);
      for (unsigned k = 0; k < 64; ++k) {
        const int64_t x = a[i * 64 + k] >= 8 ? int64_t(a[i * 64 + k]) - 16 : int64_t(a[i * 64 + k]);
        want += x * int64_t(b[k * 8 + j]);
      }
      EXPECT_EQ(static_cast<int32_t>(d[i * 8 + j]), want) << i << "," << j;
    }
  std::vector<uint64_t> a1(16 * 256), b1(256 * 8);
  for (auto& x : a1) x = rng() & 1;
  for (auto& x : b1) x = rng() & 1;
  d = runMma("mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.and.popc",
             {16, 256, 4, 1, isaA_m16n8k256_b1}, {256, 8, 2, 1, isaB_m16n8k256_b1}, C, C, a1, b1,
             c);
  ASSERT_EQ(d.size(), 128u);
  for (unsigned i = 0; i < 16; ++i)
    for (unsigned j = 0; j < 8; ++j) {
      uint64_t want = c[i * 8 + j];
      for (unsigned k = 0; k < 256; ++k) want += a1[i * 256 + k] & b1[k * 8 + j];
      EXPECT_EQ(d[i * 8 + j], want) << i << "," << j;
    }
}

// Shared memory holds an 8k x 8 pattern of b16 values (value = row * 8 + col + 1000 * matrix);
// lane l points at row l.
std::string fillSharedRows() {
  return "mov.u32 %s, smem; mul.lo.u32 %w, %tid, 16; add.u32 %s, %s, %w;\n"
         "{ .reg .b32 %v, %c; .reg .b16 %h; mov.u32 %c, 0;\n"
         "FILL: mul.lo.u32 %v, %tid, 8; add.u32 %v, %v, %c; cvt.u16.u32 %h, %v;\n"
         "{ .reg .b32 %at; mul.lo.u32 %at, %c, 2; add.u32 %at, %at, %s; st.shared.u16 [%at], %h; "
         "}\n"
         "add.u32 %c, %c, 1; setp.lt.u32 %p, %c, 8; @%p bra FILL; }\n"
         "bar.sync 0;\n";
}

TEST(MatrixInstruction, LdmatrixX4AndTransPlaceRowsByLane) {
  for (bool trans : {false, true}) {
    const std::string body = "{ .reg .pred %p; .reg .b64 %sa;\n" + fillSharedRows() +
                             "cvt.u64.u32 %sa, %s;\n"
                             "ldmatrix.sync.aligned.m8n8.x4" +
                             (trans ? std::string(".trans") : "") +
                             ".shared.b16 {%o0, %o1, %o2, %o3}, [%sa]; }";
    WarpRun r = runWarp(body, 0, 4, {});
    ASSERT_EQ(r.loadCode, CUDA_SUCCESS) << r.loadMessage;
    ASSERT_EQ(r.launch.status.code, CUDA_SUCCESS) << r.launch.status.message;
    // Rows 8j..8j+7 (lanes 8j..) form matrix j; element (row, col) of matrix j is 8(8j+row)+col.
    for (unsigned lane = 0; lane < 32; ++lane)
      for (unsigned j = 0; j < 4; ++j)
        for (unsigned h = 0; h < 2; ++h) {
          unsigned row = lane / 4, col = lane % 4 * 2 + h;
          if (trans) std::swap(row, col);
          const unsigned want = 8 * (8 * j + row) + col;
          EXPECT_EQ((r.out[lane * 4 + j] >> (16 * h)) & 0xffff, want)
              << "trans " << trans << " lane " << lane << " r" << j << " half " << h;
        }
  }
}

TEST(MatrixInstruction, StmatrixInvertsLdmatrixAndMovmatrixTransposes) {
  // ldmatrix.x2 then stmatrix.x2.trans into a second area, reloaded: the transpose per matrix.
  const std::string body = "{ .reg .pred %p; .reg .b64 %sa, %sb; .reg .b32 %x0, %x1, %y;\n" +
                           fillSharedRows() +
                           "cvt.u64.u32 %sa, %s; add.u64 %sb, %sa, 1024;\n"
                           "ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%x0, %x1}, [%sa];\n"
                           "stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [%sb], {%x0, %x1};\n"
                           "bar.sync 0;\n"
                           "ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%o0, %o1}, [%sb];\n"
                           "movmatrix.sync.aligned.m8n8.trans.b16 %o2, %x0; }";
  WarpRun r = runWarp(body, 0, 3, {});
  ASSERT_EQ(r.loadCode, CUDA_SUCCESS) << r.loadMessage;
  ASSERT_EQ(r.launch.status.code, CUDA_SUCCESS) << r.launch.status.message;
  for (unsigned lane = 0; lane < 32; ++lane)
    for (unsigned h = 0; h < 2; ++h) {
      const unsigned row = lane / 4, col = lane % 4 * 2 + h;
      for (unsigned j = 0; j < 2; ++j)
        EXPECT_EQ((r.out[lane * 3 + j] >> (16 * h)) & 0xffff, 8 * (8 * j + col) + row) << lane;
      EXPECT_EQ((r.out[lane * 3 + 2] >> (16 * h)) & 0xffff, 8 * col + row) << lane;
    }
}

TEST(MatrixInstruction, WmmaLoadMmaStore16x16x16) {
  // A (row-major) and B (col-major) in global memory, C loaded, D stored row-major: the result
  // must be the product whatever fragment layout the emu uses.
  std::vector<uint64_t> in(32 * 8, 0);
  auto* halves = reinterpret_cast<uint16_t*>(in.data());     // A: halves[0..255], B: [256..511]
  auto* floats = reinterpret_cast<float*>(in.data() + 128);  // C: 256 floats
  std::vector<double> fa(256), fb(256);
  for (unsigned i = 0; i < 256; ++i) {
    fa[i] = static_cast<int>(i * 7 % 11) - 5;
    fb[i] = static_cast<int>(i * 5 % 9) - 4;
    halves[i] = doubleToHalf(fa[i]);
    halves[256 + i] = doubleToHalf(fb[i]);
    floats[i] = static_cast<float>(i) / 4;
  }
  const std::string body =
      "{ .reg .b64 %pa, %pb, %pc; .reg .b32 %a<8>, %b<8>, %c<8>, %d<8>;\n"
      "mov.u64 %pa, %in; add.u64 %pb, %in, 512; add.u64 %pc, %in, 1024;\n"
      "wmma.load.a.sync.aligned.row.m16n16k16.global.f16 {%a0, %a1, %a2, %a3, %a4, %a5, %a6, "
      "%a7}, [%pa], 16;\n"
      "wmma.load.b.sync.aligned.col.m16n16k16.global.f16 {%b0, %b1, %b2, %b3, %b4, %b5, %b6, "
      "%b7}, [%pb], 16;\n"
      "wmma.load.c.sync.aligned.row.m16n16k16.global.f32 {%c0, %c1, %c2, %c3, %c4, %c5, %c6, "
      "%c7}, [%pc], 16;\n"
      "wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32 {%d0, %d1, %d2, %d3, %d4, %d5, %d6, %d7}, "
      "{%a0, %a1, %a2, %a3, %a4, %a5, %a6, %a7}, {%b0, %b1, %b2, %b3, %b4, %b5, %b6, %b7}, {%c0, "
      "%c1, %c2, %c3, %c4, %c5, %c6, %c7};\n"
      "add.u64 %pa, %out, 256;\n"
      "wmma.store.d.sync.aligned.row.m16n16k16.global.f32 [%pa], {%d0, %d1, %d2, %d3, %d4, %d5, "
      "%d6, %d7}, 16; }";
  WarpRun r = runWarp(body, 0, 1, in);
  ASSERT_EQ(r.loadCode, CUDA_SUCCESS) << r.loadMessage;
  ASSERT_EQ(r.launch.status.code, CUDA_SUCCESS) << r.launch.status.message;
  const auto* d = reinterpret_cast<const float*>(r.out.data() + 32);
  for (unsigned i = 0; i < 16; ++i)
    for (unsigned j = 0; j < 16; ++j) {
      double want = static_cast<double>(i * 16 + j) / 4;
      // B is column-major: element (k, j) at j * 16 + k.
      for (unsigned k = 0; k < 16; ++k) want += fa[i * 16 + k] * fb[j * 16 + k];
      EXPECT_EQ(d[i * 16 + j], static_cast<float>(want)) << i << "," << j;
    }
}

TEST(MatrixInstruction, WmmaBf16M32n8k16WithColumnMajorCAndNoStride) {
  // A 32x16 row-major, B 16x8 row-major, C 32x8 column-major loaded without a stride (packed),
  // D stored column-major with stride 40.
  std::vector<uint64_t> in(288, 0);
  auto* halves = reinterpret_cast<uint16_t*>(in.data());     // A [0, 512), B [512, 640)
  auto* floats = reinterpret_cast<float*>(in.data() + 160);  // C: 256 floats at byte 1280
  std::vector<double> fa(512), fb(128);
  for (unsigned i = 0; i < 512; ++i) halves[i] = doubleToBfloat(fa[i] = int(i * 3 % 7) - 3);
  for (unsigned i = 0; i < 128; ++i) halves[512 + i] = doubleToBfloat(fb[i] = int(i % 5) - 2);
  for (unsigned i = 0; i < 256; ++i) floats[i] = static_cast<float>(i);
  const std::string body =
      "{ .reg .b64 %pa, %pb, %pc; .reg .b32 %a<8>, %b<2>; .reg .f32 %c<8>, %d<8>;\n"
      "mov.u64 %pa, %in; add.u64 %pb, %in, 1024; add.u64 %pc, %in, 1280;\n"
      "wmma.load.a.sync.aligned.row.m32n8k16.bf16 {%a0, %a1, %a2, %a3, %a4, %a5, %a6, %a7}, "
      "[%pa], 16;\n"
      "wmma.load.b.sync.aligned.row.m32n8k16.bf16 {%b0, %b1}, [%pb], 8;\n"
      "wmma.load.c.sync.aligned.col.m32n8k16.f32 {%c0, %c1, %c2, %c3, %c4, %c5, %c6, %c7}, "
      "[%pc];\n"
      "wmma.mma.sync.aligned.row.row.m32n8k16.f32.bf16.bf16.f32 {%d0, %d1, %d2, %d3, %d4, %d5, "
      "%d6, %d7}, {%a0, %a1, %a2, %a3, %a4, %a5, %a6, %a7}, {%b0, %b1}, {%c0, %c1, %c2, %c3, %c4, "
      "%c5, %c6, %c7};\n"
      "add.u64 %pa, %out, 256;\n"
      "wmma.store.d.sync.aligned.col.m32n8k16.f32 [%pa], {%d0, %d1, %d2, %d3, %d4, %d5, %d6, "
      "%d7}, 40; }";
  WarpRun r = runWarp(body, 0, 1, in);
  ASSERT_EQ(r.loadCode, CUDA_SUCCESS) << r.loadMessage;
  ASSERT_EQ(r.launch.status.code, CUDA_SUCCESS) << r.launch.status.message;
  const auto* d = reinterpret_cast<const float*>(r.out.data() + 32);
  for (unsigned i = 0; i < 32; ++i)
    for (unsigned j = 0; j < 8; ++j) {
      double want = floats[j * 32 + i];
      for (unsigned k = 0; k < 16; ++k) want += fa[i * 16 + k] * fb[k * 8 + j];
      EXPECT_EQ(d[j * 40 + i], static_cast<float>(want)) << i << "," << j;
    }
}

TEST(MatrixInstruction, LdmatrixMisalignedRowFaults) {
  WarpRun r = runWarp(
      "{ .reg .b32 %sa; mov.u32 %sa, smem; add.u32 %sa, %sa, 8;\n"
      "ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%o0}, [%sa]; }",
      0, 1, {});
  ASSERT_EQ(r.loadCode, CUDA_SUCCESS) << r.loadMessage;
  EXPECT_EQ(r.launch.status.code, CUDA_ERROR_MISALIGNED_ADDRESS) << r.launch.status.message;
}

TEST(MatrixInstruction, UnsupportedFormsAreRefusedAtLoadWithAReason) {
  const std::pair<std::string, std::string> cases[] = {
      {"mma.sp.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32 {%o0, %o1, %o2, %o3}, {%i0, %i1, "
       "%i2, %i3}, {%i4, %i5, %i6, %i7}, {%o0, %o1, %o2, %o3}, %i8, 0x0;",
       "sparse mma"},
      {"mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32 {%o0, %o1, %o2, %o3, %o4, %o5, %o6, %o7}, "
       "{%i0, %i1}, {%i2, %i3}, {%o0, %o1, %o2, %o3, %o4, %o5, %o6, %o7};",
       "quad-pair"},
      {"mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e2m1.e2m1.f32 {%o0, %o1, %o2, %o3}, "
       "{%i0, %i1, %i2, %i3}, {%i4, %i5}, {%o0, %o1, %o2, %o3};",
       ".kind::"},
      {"wgmma.fence.sync.aligned;", "unsupported instruction wgmma"},
      {"ldmatrix.sync.aligned.m16n16.x1.trans.shared.b8 {%o0, %o1}, [%i0];", ".m8n8 shape"},
  };
  for (const auto& [body, reason] : cases) {
    WarpRun r = runWarp(body, 9, 8, {});
    EXPECT_EQ(r.loadCode, CUDA_ERROR_NOT_SUPPORTED) << body;
    EXPECT_NE(r.loadMessage.find(reason), std::string::npos) << r.loadMessage;
  }
}

TEST(MatrixInstruction, CvtToTf32Rounds) {
  // 1 + 2^-11 + 2^-12 lies between tf32 neighbours 1 + 2^-10 * {0, 1}, above the tie: every mode
  // but .rz rounds up. 1 + 2^-11 is the tie: .rna rounds away (up), .rn to even (down).
  const std::vector<uint64_t> in = {0x3f803000u, 0x3f801000u, 0x7fc00001u, 0xff800000u,
                                    0x7f7fffffu};
  WarpRun r =
      runWarp("cvt.rna.tf32.f32 %o0, %i0; cvt.rn.tf32.f32 %o1, %i0; cvt.rz.tf32.f32 %o2, %i0;", 1,
              3, in, false, 5);
  ASSERT_EQ(r.loadCode, CUDA_SUCCESS) << r.loadMessage;
  ASSERT_EQ(r.launch.status.code, CUDA_SUCCESS) << r.launch.status.message;
  const uint64_t want[5][3] = {{0x3f804000u, 0x3f804000u, 0x3f802000u},
                               {0x3f802000u, 0x3f800000u, 0x3f800000u},
                               {0x7fffffffu, 0x7fffffffu, 0x7fffffffu},
                               {0xff800000u, 0xff800000u, 0xff800000u},
                               {0x7f800000u, 0x7f800000u, 0x7f7fe000u}};
  for (unsigned l = 0; l < 5; ++l)
    for (unsigned m = 0; m < 3; ++m) EXPECT_EQ(r.out[l * 3 + m], want[l][m]) << l << " " << m;
}

TEST(MatrixInstruction, PartialWarpFaults) {
  WarpRun r = runWarp("movmatrix.sync.aligned.m8n8.trans.b16 %o0, %i0;", 1, 1, {}, false, 16);
  ASSERT_EQ(r.loadCode, CUDA_SUCCESS) << r.loadMessage;
  EXPECT_EQ(r.launch.status.code, CUDA_ERROR_ILLEGAL_INSTRUCTION) << r.launch.status.message;
}

}  // namespace
}  // namespace gpupool::ptx::testing
