// Whole CUDA programs (kernels/*.cu compiled by nvcc at build time in four flavours) run through
// Module::load + launch and compared with plain C++ references.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>

#include "host_device_memory.h"

namespace gpupool::ptx::testing {
namespace {

class ProgramTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (std::string(PTX_KERNEL_DIR).empty()) GTEST_SKIP() << "nvcc was not available at build time";
    services_.printfSink = [this](std::string_view s) { printed_.emplace_back(s); };
    services_.heap = &heap_;
  }
  bool fastMath() const { return GetParam() == "sm90fast"; }

  Module& load(const std::string& file) {
    auto& slot = modules_[file];
    if (!slot) {
      std::string text =
          readFile(std::string(PTX_KERNEL_DIR) + "/" + GetParam() + "/" + file + ".ptx");
      EXPECT_FALSE(text.empty()) << file;
      auto loaded = Module::load(text);
      if (!loaded) {
        ADD_FAILURE() << file << ": " << loaded.status().message;
        throw std::runtime_error("module failed to load");
      }
      slot = std::move(*loaded);
      memory_.bindModuleGlobals(*slot);
    }
    return *slot;
  }
  const KernelInfo& kernel(Module& m, const std::string& name) {
    const KernelInfo* k = m.findKernel(name);
    if (!k)
      for (const auto& c : m.kernels())
        if (c.name.rfind(name, 0) == 0) k = &c;  // mangled template names by prefix
    if (!k) throw std::runtime_error("no kernel " + name);
    return *k;
  }
  LaunchResult run(Module& m, const KernelInfo& k, std::array<uint32_t, 3> grid,
                   std::array<uint32_t, 3> block, const ParamBlock& params,
                   uint32_t dynamicShared = 0) {
    LaunchConfig c;
    std::copy(grid.begin(), grid.end(), c.grid);
    std::copy(block.begin(), block.end(), c.block);
    c.dynamicSharedBytes = dynamicShared;
    return launch(m, k, c, params.data(), memory_, services_);
  }

  HostDeviceMemory memory_;
  DeviceHeap heap_;
  LaunchServices services_;
  std::vector<std::string> printed_;
  std::map<std::string, std::unique_ptr<Module>> modules_;
};

#define EXPECT_LAUNCH_OK(r) EXPECT_EQ((r).status.code, CUDA_SUCCESS) << (r).status.message

TEST_P(ProgramTest, EveryModuleLoads) {
  for (const char* f : {"basic", "shared", "calls", "math", "half"}) {
    Module& m = load(f);
    EXPECT_FALSE(m.kernels().empty()) << f;
    EXPECT_EQ(m.targetSm(), GetParam() == "sm75" ? 75u : 90u);
    EXPECT_EQ(m.ptxVersion(), 90u);
  }
}

TEST_P(ProgramTest, VectorAdd) {
  Module& m = load("basic");
  const int n = 1000;
  std::vector<float> a(n), b(n);
  for (int i = 0; i < n; ++i) a[i] = i * 0.5f, b[i] = 1000.0f - i;
  uint64_t da = memory_.upload(a), db = memory_.upload(b), dc = memory_.allocate(n * 4);
  const KernelInfo& k = kernel(m, "vectorAdd");
  ASSERT_EQ(k.params.size(), 4u);
  auto r =
      run(m, k, {4, 1, 1}, {256, 1, 1}, ParamBlock(k).set(0, da).set(1, db).set(2, dc).set(3, n));
  EXPECT_LAUNCH_OK(r);
  auto c = memory_.download<float>(dc, n);
  for (int i = 0; i < n; ++i) ASSERT_EQ(c[i], a[i] + b[i]) << i;
}

TEST_P(ProgramTest, SaxpyAndDaxpy) {
  Module& m = load("basic");
  const int n = 300;
  std::vector<float> x(n), y(n);
  std::vector<double> xd(n), yd(n);
  for (int i = 0; i < n; ++i)
    x[i] = i * 0.25f, y[i] = i * 0.5f - 7, xd[i] = i / 8.0, yd[i] = 3.0 - i;
  uint64_t dx = memory_.upload(x), dy = memory_.upload(y), dxd = memory_.upload(xd),
           dyd = memory_.upload(yd);
  const KernelInfo& ks = kernel(m, "saxpy");
  EXPECT_LAUNCH_OK(run(m, ks, {3, 1, 1}, {128, 1, 1},
                       ParamBlock(ks).set(0, n).set(1, 2.0f).set(2, dx).set(3, dy)));
  const KernelInfo& kd = kernel(m, "daxpy");
  EXPECT_LAUNCH_OK(run(m, kd, {3, 1, 1}, {128, 1, 1},
                       ParamBlock(kd).set(0, n).set(1, -1.5).set(2, dxd).set(3, dyd)));
  auto ry = memory_.download<float>(dy, n);
  auto ryd = memory_.download<double>(dyd, n);
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(ry[i], 2.0f * x[i] + y[i]) << i;  // exactly representable data
    ASSERT_EQ(ryd[i], -1.5 * xd[i] + yd[i]) << i;
  }
}

TEST_P(ProgramTest, GridStride64) {
  Module& m = load("basic");
  const size_t n = 5000;
  std::vector<unsigned> in(n);
  std::mt19937 rng(1);
  for (auto& v : in) v = rng();
  uint64_t din = memory_.upload(in), dout = memory_.allocate(n * 8);
  const KernelInfo& k = kernel(m, "gridStride");
  EXPECT_LAUNCH_OK(
      run(m, k, {3, 1, 1}, {96, 1, 1}, ParamBlock(k).set(0, n).set(1, din).set(2, dout)));
  auto out = memory_.download<unsigned long long>(dout, n);
  for (size_t i = 0; i < n; ++i) {
    unsigned long long v = in[i];
    ASSERT_EQ(out[i], (v * 2654435761ull) ^ (v >> 3) ^ (i % 7) ^ (i / 3)) << i;
  }
}

TEST_P(ProgramTest, ThreeDimensionalIndices) {
  Module& m = load("basic");
  const uint32_t g[3] = {2, 3, 2}, b[3] = {4, 2, 3};
  const int total = 2 * 3 * 2 * 4 * 2 * 3;
  uint64_t dout = memory_.allocate(total * 16);
  const KernelInfo& k = kernel(m, "coordinates");
  EXPECT_LAUNCH_OK(run(m, k, {g[0], g[1], g[2]}, {b[0], b[1], b[2]}, ParamBlock(k).set(0, dout)));
  auto out = memory_.download<int>(dout, total * 4);
  for (uint32_t bz = 0; bz < g[2]; ++bz)
    for (uint32_t by = 0; by < g[1]; ++by)
      for (uint32_t bx = 0; bx < g[0]; ++bx)
        for (uint32_t tz = 0; tz < b[2]; ++tz)
          for (uint32_t ty = 0; ty < b[1]; ++ty)
            for (uint32_t tx = 0; tx < b[0]; ++tx) {
              int blk = bx + g[0] * (by + g[1] * bz), t = blk * 24 + tx + b[0] * (ty + b[1] * tz);
              ASSERT_EQ(out[4 * t + 0], int(tx | ty << 8 | tz << 16));
              ASSERT_EQ(out[4 * t + 1], int(bx | by << 8 | bz << 16));
              ASSERT_EQ(out[4 * t + 2], int(b[0] | b[1] << 8 | b[2] << 16));
              ASSERT_EQ(out[4 * t + 3], int(g[0] | g[1] << 8 | g[2] << 16));
            }
}

TEST_P(ProgramTest, IntegerCornerCases) {
  Module& m = load("basic");
  std::vector<int> a = {INT32_MIN, INT32_MIN, -7, 7, 0, 123456789, -1, 1 << 30, 5, -100};
  std::vector<int> b = {-1, 1, 2, -2, 5, -98765, 31, 33, 0, 7};
  const int n = static_cast<int>(a.size());
  uint64_t da = memory_.upload(a), db = memory_.upload(b), dout = memory_.allocate(n * 32);
  const KernelInfo& k = kernel(m, "integerOps");
  EXPECT_LAUNCH_OK(
      run(m, k, {1, 1, 1}, {32, 1, 1}, ParamBlock(k).set(0, da).set(1, db).set(2, dout).set(3, n)));
  auto out = memory_.download<int>(dout, n * 8);
  for (int i = 0; i < n; ++i) {
    int x = a[i], y = b[i];
    unsigned ux = x, uy = y;
    bool overflow = x == INT32_MIN && y == -1;  // defined by PTX (wraps), trap on x86
    EXPECT_EQ(out[8 * i + 0], y ? (overflow ? INT32_MIN : x / y) : 0) << i;
    EXPECT_EQ(out[8 * i + 1], y ? (overflow ? 0 : x % y) : 0) << i;
    EXPECT_EQ(out[8 * i + 2], uy ? int(ux / uy) : 0) << i;
    EXPECT_EQ(out[8 * i + 3], std::min(x, y) ^ std::max(x, y)) << i;
    int hi = int((int64_t(x) * y) >> 32), uhi = int((uint64_t(ux) * uy) >> 32);
    EXPECT_EQ(out[8 * i + 4], int(unsigned(hi) + unsigned(uhi))) << i;
    int s = y & 31;
    EXPECT_EQ(out[8 * i + 5], int(ux << s) ^ (x >> s) ^ int(ux >> s)) << i;
    int clz = ux ? __builtin_clz(ux) : 32, ffs = __builtin_ffs(x);
    EXPECT_EQ(out[8 * i + 6], __builtin_popcount(ux) + clz * 64 + ffs * 4096) << i;
    unsigned rev = 0;
    for (int bit = 0; bit < 32; ++bit) rev |= ((ux >> bit) & 1) << (31 - bit);
    int absx = x < 0 ? int(0u - ux) : x;
    EXPECT_EQ(out[8 * i + 7], int(rev) ^ absx) << i;
  }
}

TEST_P(ProgramTest, BlockReduceWithSharedMemory) {
  Module& m = load("shared");
  const int n = 10000, blocks = 8;
  std::vector<int> in(n);
  for (int i = 0; i < n; ++i) in[i] = (i * 37) % 101 - 50;
  uint64_t din = memory_.upload(in), dout = memory_.allocate(blocks * 4);
  const KernelInfo& k = kernel(m, "blockReduce");
  EXPECT_EQ(k.staticSharedBytes, 256u * 4);
  EXPECT_LAUNCH_OK(
      run(m, k, {blocks, 1, 1}, {256, 1, 1}, ParamBlock(k).set(0, din).set(1, dout).set(2, n)));
  auto out = memory_.download<int>(dout, blocks);
  for (int b = 0; b < blocks; ++b) {
    int expect = 0;
    for (int i = b * 256; i < n; i += 256 * blocks)
      for (int t = 0; t < 256 && i + t < n; ++t) expect += in[i + t];
    EXPECT_EQ(out[b], expect) << b;
  }
}

TEST_P(ProgramTest, DynamicSharedMemory) {
  Module& m = load("shared");
  const int block = 128, blocks = 3;
  std::vector<float> in(block * blocks);
  std::iota(in.begin(), in.end(), 1.0f);
  uint64_t din = memory_.upload(in), dout = memory_.allocate(in.size() * 4);
  const KernelInfo& k = kernel(m, "reverseDynamic");
  EXPECT_LAUNCH_OK(
      run(m, k, {blocks, 1, 1}, {block, 1, 1}, ParamBlock(k).set(0, din).set(1, dout), block * 4));
  auto out = memory_.download<float>(dout, in.size());
  for (int b = 0; b < blocks; ++b)
    for (int t = 0; t < block; ++t) ASSERT_EQ(out[b * block + t], in[b * block + block - 1 - t]);
  // Without the dynamic allocation the kernel reads out of bounds.
  auto r = run(m, k, {1, 1, 1}, {block, 1, 1}, ParamBlock(k).set(0, din).set(1, dout), 0);
  EXPECT_EQ(r.status.code, CUDA_ERROR_ILLEGAL_ADDRESS);
}

TEST_P(ProgramTest, TiledMatmul) {
  Module& m = load("shared");
  const int n = 40;
  std::vector<float> A(n * n), B(n * n);
  for (int i = 0; i < n * n; ++i) A[i] = float((i * 7) % 13) - 6, B[i] = float((i * 5) % 11) * 0.5f;
  uint64_t dA = memory_.upload(A), dB = memory_.upload(B), dC = memory_.allocate(n * n * 4);
  const KernelInfo& k = kernel(m, "matmul");
  EXPECT_LAUNCH_OK(
      run(m, k, {3, 3, 1}, {16, 16, 1}, ParamBlock(k).set(0, dA).set(1, dB).set(2, dC).set(3, n)));
  auto C = memory_.download<float>(dC, n * n);
  for (int r = 0; r < n; ++r)
    for (int c = 0; c < n; ++c) {
      float acc = 0;
      for (int k2 = 0; k2 < n; ++k2) acc += A[r * n + k2] * B[k2 * n + c];
      ASSERT_EQ(C[r * n + c], acc) << r << "," << c;  // small integers and halves: exact
    }
}

TEST_P(ProgramTest, HistogramWithSharedAtomics) {
  Module& m = load("shared");
  const int n = 5000;
  std::vector<unsigned char> data(n);
  std::mt19937 rng(7);
  for (auto& d : data) d = static_cast<unsigned char>(rng() % 256);
  uint64_t dd = memory_.upload(data), bins = memory_.allocate(256 * 4);
  const KernelInfo& k = kernel(m, "histogram");
  EXPECT_LAUNCH_OK(
      run(m, k, {4, 1, 1}, {128, 1, 1}, ParamBlock(k).set(0, dd).set(1, n).set(2, bins)));
  auto out = memory_.download<unsigned>(bins, 256);
  std::vector<unsigned> expect(256);
  for (auto d : data) ++expect[d];
  EXPECT_EQ(out, expect);
}

TEST_P(ProgramTest, GlobalAtomics) {
  Module& m = load("shared");
  std::vector<int> ints = {0, 0, 0, 0, 0};
  std::vector<unsigned> uints = {0xffffffffu, 0, 0, 0, 0};
  uint64_t di = memory_.upload(ints), du = memory_.upload(uints), d64 = memory_.allocate(8),
           df = memory_.allocate(4), dd = memory_.allocate(8);
  const KernelInfo& k = kernel(m, "atomics");
  EXPECT_LAUNCH_OK(run(m, k, {4, 1, 1}, {64, 1, 1},
                       ParamBlock(k).set(0, di).set(1, du).set(2, d64).set(3, df).set(4, dd)));
  auto ri = memory_.download<int>(di, 5);
  auto ru = memory_.download<unsigned>(du, 5);
  EXPECT_EQ(ri[0], 256);
  EXPECT_EQ(ri[1], -512);
  EXPECT_EQ(ri[2], -255);
  EXPECT_EQ(ri[3], 255);
  EXPECT_GE(ri[4], 1);  // CAS chain: order-dependent
  EXPECT_EQ(ru[0], 0u);
  EXPECT_EQ(ru[1], 0xffffffffu);
  EXPECT_EQ(ru[2], 0u);
  EXPECT_EQ(ru[3], 256u % 10);
  EXPECT_EQ(ru[4], 7u);
  EXPECT_EQ(memory_.download<unsigned long long>(d64, 1)[0], 255ull * 256 / 2);
  EXPECT_EQ(memory_.download<float>(df, 1)[0], 256.0f);
  EXPECT_EQ(memory_.download<double>(dd, 1)[0], 128.0);
}

TEST_P(ProgramTest, WarpShuffleReductionAndVotes) {
  Module& m = load("shared");
  const int n = 100;
  std::vector<float> in(n);
  for (int i = 0; i < n; ++i) in[i] = float(i % 4) * 0.5f;
  uint64_t din = memory_.upload(in), total = memory_.allocate(4),
           ballots = memory_.allocate(4 * 12);
  const KernelInfo& k = kernel(m, "warpReduce");
  EXPECT_LAUNCH_OK(run(m, k, {2, 1, 1}, {64, 1, 1},
                       ParamBlock(k).set(0, din).set(1, total).set(2, ballots).set(3, n)));
  EXPECT_EQ(memory_.download<float>(total, 1)[0], std::accumulate(in.begin(), in.end(), 0.0f));
  auto b = memory_.download<unsigned>(ballots, 12);
  for (int w = 0; w < 4; ++w) {
    unsigned expect = 0;
    bool all = true, any = false;
    for (int l = 0; l < 32; ++l) {
      int i = w * 32 + l;
      if (i < n && in[i] > 0.5f) expect |= 1u << l;
      all &= i < n;
      any |= i >= n;
    }
    EXPECT_EQ(b[3 * w], expect) << w;
    EXPECT_EQ(b[3 * w + 1], unsigned(all)) << w;
    EXPECT_EQ(b[3 * w + 2], unsigned(any)) << w;
  }
}

TEST_P(ProgramTest, BallotIgnoresExitedLanes) {
  Module& m = load("shared");
  const int n = 20;
  std::vector<int> in(32);
  for (int i = 0; i < 32; ++i) in[i] = i % 3;
  uint64_t din = memory_.upload(in), dout = memory_.allocate(32 * 4);
  const KernelInfo& k = kernel(m, "ballotAfterExit");
  EXPECT_LAUNCH_OK(
      run(m, k, {1, 1, 1}, {32, 1, 1}, ParamBlock(k).set(0, din).set(1, dout).set(2, n)));
  unsigned expect = 0;
  for (int i = 0; i < n; ++i)
    if (in[i]) expect |= 1u << i;
  auto out = memory_.download<unsigned>(dout, 32);
  for (int i = 0; i < n; ++i) EXPECT_EQ(out[i], expect) << i;
}

TEST_P(ProgramTest, ShuffleVariants) {
  Module& m = load("shared");
  uint64_t dout = memory_.allocate(64 * 16);
  const KernelInfo& k = kernel(m, "shuffles");
  EXPECT_LAUNCH_OK(run(m, k, {1, 1, 1}, {64, 1, 1}, ParamBlock(k).set(0, dout)));
  auto out = memory_.download<int>(dout, 64 * 4);
  for (int t = 0; t < 64; ++t) {
    int lane = t & 31;
    EXPECT_EQ(out[4 * t + 0], (lane < 3 ? lane : lane - 3) * 10) << t;
    EXPECT_EQ(out[4 * t + 1], (lane ^ 5) * 10) << t;
    EXPECT_EQ(out[4 * t + 2], ((lane / 8) * 8 + 2) * 10) << t;
    EXPECT_EQ(out[4 * t + 3], (lane % 16 + 3 < 16 ? lane + 3 : lane) * 10) << t;
  }
}

TEST_P(ProgramTest, MatchAny) {
  Module& m = load("shared");
  std::vector<int> keys(32);
  for (int i = 0; i < 32; ++i) keys[i] = (i * i) % 5;
  uint64_t dk = memory_.upload(keys), dout = memory_.allocate(32 * 4);
  const KernelInfo& k = kernel(m, "matchAny");
  EXPECT_LAUNCH_OK(run(m, k, {1, 1, 1}, {32, 1, 1}, ParamBlock(k).set(0, dk).set(1, dout)));
  auto out = memory_.download<unsigned>(dout, 32);
  for (int i = 0; i < 32; ++i) {
    unsigned expect = 0;
    for (int j = 0; j < 32; ++j)
      if (keys[j] == keys[i]) expect |= 1u << j;
    EXPECT_EQ(out[i], expect) << i;
  }
}

TEST_P(ProgramTest, DivergentBarrierIsReportedAsDeadlock) {
  Module& m = load("shared");
  uint64_t dout = memory_.allocate(32 * 4);
  const KernelInfo& k = kernel(m, "barrierDeadlock");
  auto r = run(m, k, {1, 1, 1}, {32, 1, 1}, ParamBlock(k).set(0, dout));
  EXPECT_EQ(r.status.code, CUDA_ERROR_LAUNCH_FAILED);
  EXPECT_NE(r.status.message.find("deadlock"), std::string::npos) << r.status.message;
}

TEST_P(ProgramTest, OutOfBoundsStoreIsIllegalAddress) {
  Module& m = load("shared");
  uint64_t dout = memory_.allocate(16);
  const KernelInfo& k = kernel(m, "outOfBounds");
  auto r = run(m, k, {1, 1, 1}, {4, 1, 1}, ParamBlock(k).set(0, dout).set(1, 4));
  EXPECT_EQ(r.status.code, CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_NE(r.status.message.find("outOfBounds"), std::string::npos) << r.status.message;
  EXPECT_NE(r.status.message.find("lane"), std::string::npos) << r.status.message;
}

TEST_P(ProgramTest, RecursionFibonacci) {
  Module& m = load("calls");
  uint64_t dout = memory_.allocate(20 * 4);
  const KernelInfo& k = kernel(m, "fibonacci");
  EXPECT_LAUNCH_OK(run(m, k, {1, 1, 1}, {20, 1, 1}, ParamBlock(k).set(0, dout)));
  auto out = memory_.download<int>(dout, 20);
  int f0 = 0, f1 = 1;
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(out[i], f0) << i;
    int f2 = f0 + f1;
    f0 = f1;
    f1 = f2;
  }
}

TEST_P(ProgramTest, FunctionPointerTable) {
  Module& m = load("calls");
  std::vector<int> a(30), b(30);
  for (int i = 0; i < 30; ++i) a[i] = i + 3, b[i] = 2 * i - 5;
  uint64_t da = memory_.upload(a), db = memory_.upload(b), dout = memory_.allocate(30 * 4);
  const KernelInfo& k = kernel(m, "functionPointers");
  EXPECT_LAUNCH_OK(
      run(m, k, {1, 1, 1}, {30, 1, 1}, ParamBlock(k).set(0, da).set(1, db).set(2, dout)));
  auto out = memory_.download<int>(dout, 30);
  for (int i = 0; i < 30; ++i)
    EXPECT_EQ(out[i], i % 3 == 0 ? a[i] + b[i] : i % 3 == 1 ? a[i] * b[i] : a[i] - b[i]) << i;
}

struct Params {  // same layout as kernels/calls.cu
  float scale;
  int offset;
  double bias;
  short tag;
  char name[6];
  float* out;
};

TEST_P(ProgramTest, StructByValue) {
  Module& m = load("calls");
  std::vector<float> in(12);
  for (int i = 0; i < 12; ++i) in[i] = float(i);
  uint64_t din = memory_.upload(in), dout = memory_.allocate(12 * 4);
  Params p{2.0f, 10, 0.5, 3, {1, 2, 3, 4, 5, 6}, reinterpret_cast<float*>(dout)};
  const KernelInfo& k = kernel(m, "structByValue");
  ASSERT_EQ(k.params.size(), 2u);
  EXPECT_EQ(k.params[0].size, sizeof(Params));
  EXPECT_EQ(k.params[0].align, alignof(Params));
  EXPECT_LAUNCH_OK(run(m, k, {1, 1, 1}, {12, 1, 1}, ParamBlock(k).set(0, p).set(1, din)));
  auto out = memory_.download<float>(dout, 12);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(out[i], in[i] * 2.0f + 10 + 0.5f + 3 + p.name[i % 6]) << i;
}

TEST_P(ProgramTest, TemplateInstantiations) {
  Module& m = load("calls");
  const int n = 50;
  std::vector<float> f(n);
  std::vector<double> d(n);
  std::vector<int> i32(n);
  std::vector<short> s(n);
  for (int i = 0; i < n; ++i)
    f[i] = i * 0.5f, d[i] = i * 0.25, i32[i] = i - 20, s[i] = short(i * 3 - 40);
  uint64_t df = memory_.upload(f), dd = memory_.upload(d), di = memory_.upload(i32),
           ds = memory_.upload(s);
  const KernelInfo& kf = kernel(m, "_Z13scaleTemplateIfEvPT_S0_i");
  const KernelInfo& kd = kernel(m, "_Z13scaleTemplateIdEvPT_S0_i");
  const KernelInfo& ki = kernel(m, "_Z13scaleTemplateIiEvPT_S0_i");
  const KernelInfo& ks = kernel(m, "_Z13scaleTemplateIsEvPT_S0_i");
  EXPECT_LAUNCH_OK(
      run(m, kf, {1, 1, 1}, {64, 1, 1}, ParamBlock(kf).set(0, df).set(1, 3.0f).set(2, n)));
  EXPECT_LAUNCH_OK(
      run(m, kd, {1, 1, 1}, {64, 1, 1}, ParamBlock(kd).set(0, dd).set(1, -2.0).set(2, n)));
  EXPECT_LAUNCH_OK(
      run(m, ki, {1, 1, 1}, {64, 1, 1}, ParamBlock(ki).set(0, di).set(1, 7).set(2, n)));
  EXPECT_LAUNCH_OK(
      run(m, ks, {1, 1, 1}, {64, 1, 1}, ParamBlock(ks).set(0, ds).set(1, short(-3)).set(2, n)));
  auto rf = memory_.download<float>(df, n);
  auto rd = memory_.download<double>(dd, n);
  auto ri = memory_.download<int>(di, n);
  auto rs = memory_.download<short>(ds, n);
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(rf[i], f[i] * 3.0f + 1);
    EXPECT_EQ(rd[i], d[i] * -2.0 + 1);
    EXPECT_EQ(ri[i], i32[i] * 7 + 1);
    EXPECT_EQ(rs[i], short(s[i] * -3 + 1));
  }
}

TEST_P(ProgramTest, Printf) {
  Module& m = load("calls");
  const KernelInfo& k = kernel(m, "printer");
  services_.workerThreads = 1;
  EXPECT_LAUNCH_OK(run(m, k, {1, 1, 1}, {3, 1, 1}, ParamBlock(k).set(0, 100)));
  ASSERT_EQ(printed_.size(), 3u);
  std::sort(printed_.begin(), printed_.end());
  for (int t = 0; t < 3; ++t) {
    char expect[512];
    snprintf(expect, sizeof expect,
             "thread %d: int=%d neg=%i hex=%x HEX=%X oct=%o char=%c str=%s dbl=%.3f exp=%e g=%g "
             "ll=%lld ull=%llu "
             "w=[%5d] l=[%-4d] z=%05.1f\n",
             t, 100 + t, -t, 255 + t, 255 + t, 8 + t, 'A' + t, "hi", 1.5 * t, 12345.678, 0.0001,
             -9000000000ll, 18000000000000000000ull, t, t, 3.14159);
    EXPECT_EQ(printed_[t], expect);
  }
}

TEST_P(ProgramTest, DeviceMallocAndFree) {
  Module& m = load("calls");
  uint64_t dout = memory_.allocate(64 * 4);
  const KernelInfo& k = kernel(m, "heap");
  EXPECT_LAUNCH_OK(run(m, k, {1, 1, 1}, {64, 1, 1}, ParamBlock(k).set(0, dout)));
  auto out = memory_.download<int>(dout, 64);
  for (int t = 0; t < 64; ++t) EXPECT_EQ(out[t], 40 * t + 6) << t;
}

TEST_P(ProgramTest, FailingAssert) {
  Module& m = load("calls");
  std::vector<int> ok(8, 1), bad = {0, 1, 2, 3, 4, 5, 6, 7};
  uint64_t dok = memory_.upload(ok), dbad = memory_.upload(bad);
  const KernelInfo& k = kernel(m, "asserting");
  EXPECT_LAUNCH_OK(run(m, k, {1, 1, 1}, {8, 1, 1}, ParamBlock(k).set(0, dok)));
  auto r = run(m, k, {1, 1, 1}, {8, 1, 1}, ParamBlock(k).set(0, dbad));
  EXPECT_EQ(r.status.code, CUDA_ERROR_ASSERT);
  EXPECT_NE(r.status.message.find("v < 5"), std::string::npos) << r.status.message;
  EXPECT_NE(r.status.message.find("calls.cu"), std::string::npos) << r.status.message;
}

TEST_P(ProgramTest, LocalArrays) {
  Module& m = load("calls");
  std::vector<int> idx(32);
  for (int i = 0; i < 32; ++i) idx[i] = (i * 5) % 16;
  uint64_t di = memory_.upload(idx), dout = memory_.allocate(32 * 4);
  const KernelInfo& k = kernel(m, "localArray");
  EXPECT_LAUNCH_OK(run(m, k, {1, 1, 1}, {32, 1, 1}, ParamBlock(k).set(0, di).set(1, dout)));
  auto out = memory_.download<int>(dout, 32);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(out[i], idx[i] * idx[i] + i) << i;
}

TEST_P(ProgramTest, ConstantAndGlobalVariables) {
  Module& m = load("calls");
  ASSERT_GE(m.globals().size(), 3u);  // ops table, coefficients, counter (+ printf strings)
  uint64_t dout = memory_.allocate(16 * 4);
  const KernelInfo& k = kernel(m, "constants");
  EXPECT_LAUNCH_OK(run(m, k, {1, 1, 1}, {16, 1, 1}, ParamBlock(k).set(0, dout)));
  const float coeff[4] = {1.0f, -2.0f, 0.5f, 4.0f};
  auto out = memory_.download<float>(dout, 16);
  for (int t = 0; t < 16; ++t) EXPECT_EQ(out[t], coeff[t & 3] * t + 42) << t;
}

TEST_P(ProgramTest, TrapFailsTheLaunch) {
  Module& m = load("calls");
  const KernelInfo& k = kernel(m, "trapping");
  auto r = run(m, k, {2, 1, 1}, {32, 1, 1}, ParamBlock(k));
  EXPECT_EQ(r.status.code, CUDA_ERROR_LAUNCH_FAILED);
  EXPECT_NE(r.status.message.find("trap"), std::string::npos) << r.status.message;
}

void expectClose(double got, double want, double rel, double abs, const std::string& what) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << what;
    return;
  }
  EXPECT_LE(std::fabs(got - want), abs + rel * std::fabs(want))
      << what << " got " << got << " want " << want;
}

TEST_P(ProgramTest, FloatMathFunctions) {
  Module& m = load("math");
  std::vector<float> x;
  for (int i = 0; i < 64; ++i) x.push_back(-4.0f + i * 0.13f);
  const int n = static_cast<int>(x.size());
  uint64_t dx = memory_.upload(x), dout = memory_.allocate(n * 16 * 4);
  const KernelInfo& k = kernel(m, "mathFloat");
  EXPECT_LAUNCH_OK(
      run(m, k, {1, 1, 1}, {64, 1, 1}, ParamBlock(k).set(0, dx).set(1, dout).set(2, n)));
  auto out = memory_.download<float>(dout, n * 16);
  const double rel = fastMath() ? 2e-3 : 2e-6, abs = fastMath() ? 2e-3 : 1e-6;
  for (int i = 0; i < n; ++i) {
    double v = x[i];
    const double want[16] = {std::exp(v),
                             std::log(std::fabs(v) + 1),
                             std::sin(v),
                             std::cos(v),
                             std::tanh(v),
                             std::pow(std::fabs(v), 1.5),
                             std::sqrt(std::fabs(v)),
                             std::erf(v),
                             std::atan2(v, 1.5),
                             std::fmod(v, 1.25),
                             std::round(v),
                             v / 3.0,
                             std::exp(v),
                             std::clamp(v, 0.0, 1.0),
                             1 / std::sqrt(std::fabs(v) + 1),
                             std::floor(v) + std::ceil(v) + std::trunc(v)};
    for (int j = 0; j < 16; ++j) {
      double tol = (j == 11 || j == 12) ? 2e-6 + (fastMath() ? 0 : 0) : rel;
      expectClose(out[16 * i + j], want[j], std::max(tol, rel), abs,
                  "x=" + std::to_string(v) + " fn " + std::to_string(j));
    }
  }
}

TEST_P(ProgramTest, DoubleMathFunctions) {
  Module& m = load("math");
  std::vector<double> x;
  for (int i = 0; i < 40; ++i) x.push_back(-10.0 + i * 0.51);
  const int n = static_cast<int>(x.size());
  uint64_t dx = memory_.upload(x), dout = memory_.allocate(n * 8 * 8);
  const KernelInfo& k = kernel(m, "mathDouble");
  EXPECT_LAUNCH_OK(
      run(m, k, {1, 1, 1}, {64, 1, 1}, ParamBlock(k).set(0, dx).set(1, dout).set(2, n)));
  auto out = memory_.download<double>(dout, n * 8);
  for (int i = 0; i < n; ++i) {
    double v = x[i];
    const double want[8] = {std::exp(v),
                            std::log(std::fabs(v) + 1),
                            std::sin(v),
                            std::cos(v),
                            std::sqrt(std::fabs(v)),
                            std::pow(std::fabs(v), 0.75),
                            std::tanh(v),
                            v / 3.0};
    for (int j = 0; j < 8; ++j)
      expectClose(out[8 * i + j], want[j], 1e-14, 1e-15,
                  "x=" + std::to_string(v) + " fn " + std::to_string(j));
  }
}

TEST_P(ProgramTest, LargeArgumentTrigonometry) {
  Module& m = load("math");
  std::vector<float> xf = {1e5f, 123456.7f, 3e30f, -7.5e20f, 1.0e10f, 3.0e38f, 0.5f, -2e4f};
  std::vector<double> xd = {1e5, 123456.7, 3e300, -7.5e20, 1.0e10, 3.0e38, 0.5, -2e4};
  uint64_t dxf = memory_.upload(xf), dxd = memory_.upload(xd), dof = memory_.allocate(16 * 4),
           dod = memory_.allocate(16 * 8);
  const KernelInfo& k = kernel(m, "bigTrig");
  EXPECT_LAUNCH_OK(run(m, k, {1, 1, 1}, {8, 1, 1},
                       ParamBlock(k).set(0, dxf).set(1, dxd).set(2, dof).set(3, dod)));
  auto of = memory_.download<float>(dof, 16);
  auto od = memory_.download<double>(dod, 16);
  for (int i = 0; i < 8; ++i) {
    if (!fastMath()) {  // sin.approx is only accurate near zero
      expectClose(of[2 * i], std::sin(double(xf[i])), 0, 2e-7, "sinf " + std::to_string(xf[i]));
      expectClose(of[2 * i + 1], std::cos(double(xf[i])), 0, 2e-7, "cosf " + std::to_string(xf[i]));
    }
    expectClose(od[2 * i], std::sin(xd[i]), 0, 1e-15, "sin " + std::to_string(xd[i]));
    expectClose(od[2 * i + 1], std::cos(xd[i]), 0, 1e-15, "cos " + std::to_string(xd[i]));
  }
}

TEST_P(ProgramTest, FloatIntConversions) {
  Module& m = load("math");
  std::vector<float> x = {0.5f, 1.5f,  2.5f, -0.5f, -1.5f, -2.7f,
                          3e9f, -3e9f, NAN,  1e20f, -0.0f, 123.456f};
  x.resize(16, 7.25f);
  uint64_t dx = memory_.upload(x), di = memory_.allocate(16 * 16), du = memory_.allocate(16 * 4),
           df = memory_.allocate(16 * 8);
  const KernelInfo& k = kernel(m, "conversions");
  EXPECT_LAUNCH_OK(
      run(m, k, {1, 1, 1}, {16, 1, 1}, ParamBlock(k).set(0, dx).set(1, di).set(2, du).set(3, df)));
  auto oi = memory_.download<int>(di, 64);
  auto ou = memory_.download<unsigned>(du, 16);
  auto of = memory_.download<float>(df, 32);
  auto sat = [](double v) -> int {  // PTX cvt: saturate, NaN -> 0
    if (std::isnan(v)) return 0;
    return v <= INT32_MIN ? INT32_MIN : v >= INT32_MAX ? INT32_MAX : int(v);
  };
  for (int i = 0; i < 16; ++i) {
    double v = x[i];
    EXPECT_EQ(oi[4 * i + 0], sat(std::trunc(v))) << v;
    EXPECT_EQ(oi[4 * i + 1], sat(std::nearbyint(v))) << v;
    EXPECT_EQ(oi[4 * i + 2], sat(std::floor(v))) << v;
    EXPECT_EQ(oi[4 * i + 3], sat(std::ceil(v))) << v;
    unsigned u = std::isnan(v) || v <= 0 ? 0u : v >= 4294967295.0 ? 0xffffffffu : unsigned(v);
    EXPECT_EQ(ou[i], u) << v;
    double scaled = double(float(x[i] * 1000.0f));
    long long ll = std::isnan(scaled)  ? 0
                   : scaled >= 9.2e18  ? INT64_MAX
                   : scaled <= -9.2e18 ? INT64_MIN
                                       : (long long)scaled;
    EXPECT_EQ(of[2 * i], float(ll)) << v;
    // __int2float_rz: round toward zero.
    int iv = 0x7fffffff - i;
    float rz = float(iv);
    if (double(rz) > double(iv)) rz = std::nextafter(rz, 0.0f);
    EXPECT_EQ(of[2 * i + 1], rz) << i;
  }
}

TEST_P(ProgramTest, HalfPrecision) {
  Module& m = load("half");
  std::vector<float> a, b;
  for (int i = 0; i < 40; ++i) a.push_back(-2.5f + i * 0.125f), b.push_back(3.875f - i * 0.25f);
  const int n = static_cast<int>(a.size());
  uint64_t da = memory_.upload(a), db = memory_.upload(b), dout = memory_.allocate(n * 5 * 4);
  const KernelInfo& k = kernel(m, "halfArith");
  EXPECT_LAUNCH_OK(
      run(m, k, {1, 1, 1}, {64, 1, 1}, ParamBlock(k).set(0, da).set(1, db).set(2, dout).set(3, n)));
  auto out = memory_.download<float>(dout, n * 5);
  // Inputs are exact in binary16; float sums/products of them are exact, so one rounding to
  // _Float16 (GCC's IEEE binary16, round-to-nearest-even) is the reference.
  auto h = [](double v) { return float(static_cast<_Float16>(v)); };
  for (int i = 0; i < n; ++i) {
    float sum = h(a[i] + b[i]);
    EXPECT_EQ(out[5 * i + 0], sum) << i;
    EXPECT_EQ(out[5 * i + 1], h(a[i] * b[i])) << i;
    EXPECT_EQ(out[5 * i + 2], h(double(a[i]) * b[i] + sum)) << i;
    EXPECT_EQ(out[5 * i + 3], h(a[i] * a[i])) << i;
    EXPECT_EQ(out[5 * i + 4], h(b[i] * b[i])) << i;
  }
}

TEST_P(ProgramTest, CooperativeGroupTiles) {
  Module& m = load("half");
  std::vector<int> in(64);
  for (int i = 0; i < 64; ++i) in[i] = i * 3 - 17;
  uint64_t din = memory_.upload(in), dout = memory_.allocate(128 * 4);
  const KernelInfo& k = kernel(m, "tiles");
  EXPECT_LAUNCH_OK(run(m, k, {1, 1, 1}, {64, 1, 1}, ParamBlock(k).set(0, din).set(1, dout)));
  auto out = memory_.download<int>(dout, 128);
  for (int i = 0; i < 64; ++i) {
    int base = i & ~3, sum = in[base] + in[base + 1] + in[base + 2] + in[base + 3];
    EXPECT_EQ(out[2 * i], sum) << i;
    EXPECT_EQ(out[2 * i + 1], sum) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Flavours, ProgramTest,
                         ::testing::Values("sm75", "sm90", "sm90fast", "sm90debug"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gpupool::ptx::testing

namespace gpupool::ptx::testing {
namespace {

// A context's texture and surface objects, as the emu backend keeps them.
struct TextureMap final : TextureTable {
  std::map<uint64_t, TextureView> views;
  const TextureView* find(uint64_t handle) const override {
    auto it = views.find(handle);
    return it == views.end() ? nullptr : &it->second;
  }
};

TEST_P(ProgramTest, TextureAndSurfaceObjects) {
  Module& m = load("texture");
  const int n = 8;
  std::vector<float> linearData(n), rowData(n);
  for (int i = 0; i < n; ++i) {
    linearData[i] = 1.5f * i;
    rowData[i] = 16.0f * i;
  }
  TextureMap textures;
  TextureView linear;
  linear.resource = TextureResource::kLinear;
  linear.format = CU_AD_FORMAT_FLOAT;
  linear.address = memory_.upload(linearData);
  linear.width = n;
  linear.rowPitch = linear.slicePitch = linear.bytes = n * sizeof(float);
  TextureView row = linear;
  row.resource = TextureResource::kArray;
  row.address = memory_.upload(rowData);
  row.dims = 2;
  row.height = 1;
  row.filterMode = CU_TR_FILTER_MODE_LINEAR;
  row.addressMode[0] = row.addressMode[1] = CU_TR_ADDRESS_MODE_CLAMP;
  textures.views = {{7, linear}, {9, row}};
  services_.textures = &textures;
  uint64_t out = memory_.allocate(3 * n * sizeof(float));
  const KernelInfo& sample = kernel(m, "sampleOnly");
  EXPECT_LAUNCH_OK(
      run(m, sample, {1, 1, 1}, {n, 1, 1},
          ParamBlock(sample).set(0, uint64_t{7}).set(1, uint64_t{9}).set(2, out).set(3, n)));
  std::vector<float> got = memory_.download<float>(out, 2 * n);
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(got[i], i == 0 ? 0.0f : linearData[i - 1]) << i;
    float want = 0.75f * rowData[i] + 0.25f * rowData[std::min(i + 1, n - 1)];
    EXPECT_EQ(got[n + i], want) << i;
  }
  // A layered fetch from a plain 2D texture, and an unknown handle, fail the launch.
  const KernelInfo& both = kernel(m, "fetchAndSample");
  LaunchResult r =
      run(m, both, {1, 1, 1}, {n, 1, 1},
          ParamBlock(both).set(0, uint64_t{7}).set(1, uint64_t{9}).set(2, out).set(3, n));
  EXPECT_EQ(r.status.code, CUDA_ERROR_ILLEGAL_ADDRESS) << r.status.message;
  r = run(m, sample, {1, 1, 1}, {n, 1, 1},
          ParamBlock(sample).set(0, uint64_t{8}).set(1, uint64_t{9}).set(2, out).set(3, n));
  EXPECT_EQ(r.status.code, CUDA_ERROR_ILLEGAL_ADDRESS) << r.status.message;

  std::vector<int32_t> ints(2 * n, 100);
  TextureView surface;
  surface.surface = true;
  surface.format = CU_AD_FORMAT_SIGNED_INT32;
  surface.address = memory_.upload(ints);
  surface.width = n;
  surface.rowPitch = surface.slicePitch = surface.bytes = n * sizeof(int32_t);
  textures.views[11] = surface;
  const KernelInfo& inc = kernel(m, "surfaceIncrement");
  EXPECT_LAUNCH_OK(
      run(m, inc, {1, 1, 1}, {n, 1, 1}, ParamBlock(inc).set(0, uint64_t{11}).set(1, n)));
  std::vector<int32_t> after = memory_.download<int32_t>(surface.address, 2 * n);
  for (int i = 0; i < 2 * n; ++i) EXPECT_EQ(after[i], i < n ? 101 : 100) << i;
  // A texture handle is not a surface.
  r = run(m, inc, {1, 1, 1}, {n, 1, 1}, ParamBlock(inc).set(0, uint64_t{7}).set(1, n));
  EXPECT_EQ(r.status.code, CUDA_ERROR_ILLEGAL_ADDRESS) << r.status.message;
}

// tex naming a module's `.global .texref` asks the launch's table for textureReferenceHandle(i).
TEST_P(ProgramTest, TextureReferencesResolveThroughTheirHandle) {
  auto loaded = Module::load(
      ".version 8.0\n.target sm_75\n.address_size 64\n.global .texref values;\n"
      ".visible .entry fetch(.param .u64 out) { .reg .b32 %r<6>; .reg .b64 %rd<4>;"
      " ld.param.u64 %rd1, [out]; mov.u32 %r1, %tid.x;"
      " tex.1d.v4.s32.s32 {%r2, %r3, %r4, %r5}, [values, {%r1}];"
      " mul.wide.u32 %rd2, %r1, 4; add.s64 %rd3, %rd1, %rd2; st.global.s32 [%rd3], %r2; ret; }\n");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message;
  Module& m = **loaded;
  memory_.bindModuleGlobals(m);
  const int n = 4;
  std::vector<int32_t> data = {5, -6, 7, 8};
  TextureMap textures;
  TextureView linear;
  linear.resource = TextureResource::kLinear;
  linear.format = CU_AD_FORMAT_SIGNED_INT32;
  linear.readAsInteger = true;
  linear.address = memory_.upload(data);
  linear.width = n;
  linear.rowPitch = linear.slicePitch = linear.bytes = n * sizeof(int32_t);
  services_.textures = &textures;
  uint64_t out = memory_.allocate(n * sizeof(int32_t));
  const KernelInfo& k = kernel(m, "fetch");
  ASSERT_EQ(k.references, std::vector<uint32_t>{0});
  // Unbound: the kernel runs and reads 0 (NVIDIA's driver launches such a kernel).
  std::memset(reinterpret_cast<void*>(out), 0xff, n * sizeof(int32_t));
  EXPECT_LAUNCH_OK(run(m, k, {1, 1, 1}, {n, 1, 1}, ParamBlock(k).set(0, out)));
  EXPECT_EQ(memory_.download<int32_t>(out, n), std::vector<int32_t>(n, 0));
  textures.views[textureReferenceHandle(0)] = linear;
  EXPECT_LAUNCH_OK(run(m, k, {1, 1, 1}, {n, 1, 1}, ParamBlock(k).set(0, out)));
  EXPECT_EQ(memory_.download<int32_t>(out, n), data);
}

// txq and suq answer from the view the launch's table holds: extents, layers, levels and the
// sampler's modes in the ISA's enumerations; an unbound reference answers 0.
TEST_P(ProgramTest, TextureAndSurfaceQueries) {
  auto loaded = Module::load(
      ".version 8.0\n.target sm_75\n.address_size 64\n.global .texref ref;\n"
      ".visible .entry queries(.param .u64 t, .param .u64 s, .param .u64 out) {"
      " .reg .b32 %r<20>; .reg .b64 %rd<4>;"
      " ld.param.u64 %rd1, [t]; ld.param.u64 %rd2, [s]; ld.param.u64 %rd3, [out];"
      " txq.width.b32 %r0, [%rd1]; txq.height.b32 %r1, [%rd1]; txq.depth.b32 %r2, [%rd1];"
      " txq.normalized_coords.b32 %r3, [%rd1]; txq.array_size.b32 %r4, [%rd1];"
      " txq.num_mipmap_levels.b32 %r5, [%rd1]; txq.num_samples.b32 %r6, [%rd1];"
      " txq.filter_mode.b32 %r7, [%rd1]; txq.addr_mode_0.b32 %r8, [%rd1];"
      " txq.addr_mode_1.b32 %r9, [%rd1]; txq.addr_mode_2.b32 %r10, [%rd1]; mov.u32 %r19, 1;"
      " txq.level.width.b32 %r11, [%rd1], %r19; txq.level.height.b32 %r12, [%rd1], %r19;"
      " suq.width.b32 %r13, [%rd2]; suq.height.b32 %r14, [%rd2]; suq.depth.b32 %r15, [%rd2];"
      " suq.array_size.b32 %r16, [%rd2]; suq.memory_layout.b32 %r17, [%rd2];"
      " txq.width.b32 %r18, [ref];"
      " st.global.v4.b32 [%rd3], {%r0, %r1, %r2, %r3};"
      " st.global.v4.b32 [%rd3+16], {%r4, %r5, %r6, %r7};"
      " st.global.v4.b32 [%rd3+32], {%r8, %r9, %r10, %r11};"
      " st.global.v4.b32 [%rd3+48], {%r12, %r13, %r14, %r15};"
      " st.global.v2.b32 [%rd3+64], {%r16, %r17}; st.global.b32 [%rd3+72], %r18; ret; }\n");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message;
  Module& m = **loaded;
  memory_.bindModuleGlobals(m);
  const KernelInfo& k = kernel(m, "queries");
  const uint64_t backing = memory_.allocate(4096);
  auto view2D = [&](bool surface, unsigned format, uint64_t width, uint64_t height) {
    TextureView v;
    v.surface = surface;
    v.address = backing;
    v.bytes = 4096;
    v.format = format;
    v.dims = 2;
    v.width = width;
    v.height = height;
    return v;
  };
  // A mipmapped 16x8 2D texture of three levels, normalized, linear, wrap / mirror / border.
  TextureView mipmapped = view2D(false, CU_AD_FORMAT_FLOAT, 16, 8);
  mipmapped.mipmapped = true;
  mipmapped.levels = 3;
  for (unsigned l = 0; l < 3; ++l) {
    mipmapped.level[l].width = 16u >> l;
    mipmapped.level[l].height = 8u >> l;
  }
  mipmapped.normalizedCoords = true;
  mipmapped.filterMode = CU_TR_FILTER_MODE_LINEAR;
  mipmapped.addressMode[0] = CU_TR_ADDRESS_MODE_WRAP;
  mipmapped.addressMode[1] = CU_TR_ADDRESS_MODE_MIRROR;
  mipmapped.addressMode[2] = CU_TR_ADDRESS_MODE_BORDER;
  // A layered 5x4 surface of three layers.
  TextureView layered = view2D(true, CU_AD_FORMAT_SIGNED_INT32, 5, 4);
  layered.layered = true;
  layered.layers = 3;
  TextureMap textures;
  textures.views = {{7, mipmapped}, {9, layered}};
  services_.textures = &textures;
  const uint64_t out = memory_.allocate(19 * sizeof(uint32_t));
  auto query = [&](uint64_t texture, uint64_t surface) {
    std::memset(reinterpret_cast<void*>(out), 0xff, 19 * sizeof(uint32_t));
    LaunchResult r =
        run(m, k, {1, 1, 1}, {1, 1, 1}, ParamBlock(k).set(0, texture).set(1, surface).set(2, out));
    EXPECT_LAUNCH_OK(r);
    return memory_.download<uint32_t>(out, 19);
  };
  EXPECT_EQ(query(7, 9),
            (std::vector<uint32_t>{16, 8, 1, 1, 0, 3, 0, 1, 0, 1, 4, 8, 4, 5, 4, 1, 3, 0, 0}));
  // A layered cubemap of two cubes (twelve faces), clamped, point, unnormalized; the reference
  // bound to 10 elements of linear memory.
  TextureView cubes = view2D(false, CU_AD_FORMAT_FLOAT, 4, 4);
  cubes.layered = cubes.cubemap = cubes.cubemapLayered = true;
  cubes.layers = 12;
  for (unsigned& mode : cubes.addressMode) mode = CU_TR_ADDRESS_MODE_CLAMP;
  TextureView cubeSurface = cubes;
  cubeSurface.surface = true;
  TextureView linear;
  linear.resource = TextureResource::kLinear;
  linear.address = backing;
  linear.format = CU_AD_FORMAT_FLOAT;
  linear.width = 10;
  linear.rowPitch = linear.slicePitch = linear.bytes = 40;
  textures.views[11] = cubes;
  textures.views[13] = cubeSurface;
  textures.views[textureReferenceHandle(0)] = linear;
  // Not mipmapped: txq.level of level 1 has no extent; the cubes count as two, the surface's
  // faces as twelve.
  EXPECT_EQ(query(11, 13),
            (std::vector<uint32_t>{4, 4, 1, 0, 2, 0, 0, 0, 3, 3, 3, 0, 0, 4, 4, 1, 12, 0, 10}));
  // A surface asked as a texture, and a texture as a surface, fail the launch.
  for (auto [texture, surface] : {std::pair<uint64_t, uint64_t>{9, 9}, {7, 7}}) {
    LaunchResult r =
        run(m, k, {1, 1, 1}, {1, 1, 1}, ParamBlock(k).set(0, texture).set(1, surface).set(2, out));
    EXPECT_EQ(r.status.code, CUDA_ERROR_ILLEGAL_ADDRESS) << r.status.message;
  }
}

}  // namespace
}  // namespace gpupool::ptx::testing
