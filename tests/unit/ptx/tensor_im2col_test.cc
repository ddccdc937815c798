// cp.async.bulk.tensor .im2col on the emu: maps encoded by encodeIm2colTensorMap (what the emu
// backend's cuTensorMapEncodeIm2col writes), loaded into shared memory by one thread. The 4d cases
// follow the loads Triton's TMA im2col tutorial checks on Hopper GPUs (a plain 4x4 image, a padded
// box, offsets moving it, a column running into the next image); the others add the box's corner
// order (W first, as globalDim), the 3d and 5d forms, traversal strides, channels past the tensor,
// the end of the batch, stores and reductions in .im2col_no_offs mode, and the encoder's argument
// rules.
#include <cuda.h>
#include <gtest/gtest.h>

#include <array>
#include <string>

#include "host_device_memory.h"
#include "ptx_snippet.h"
#include "tensor_map.h"

namespace gpupool::ptx::testing {
namespace {

// One thread of a rank-`rank` im2col load: coordinates and offsets come as parameters c0..,
// o0..; the raw shared box (`bytes`) is copied to `out`.
std::string im2colKernel(unsigned rank, const char* mode = "im2col") {
  std::string params, loads, coords, offsets;
  for (unsigned i = 0; i < rank; ++i) {
    params += ", .param .u32 c" + std::to_string(i);
    loads += "ld.param.u32 %c" + std::to_string(i) + ", [c" + std::to_string(i) + "]; ";
    coords += (i ? ", %c" : "%c") + std::to_string(i);
  }
  for (unsigned i = 0; i + 2 < rank; ++i) {
    params += ", .param .u16 o" + std::to_string(i);
    loads += "ld.param.u16 %h" + std::to_string(i) + ", [o" + std::to_string(i) + "]; ";
    offsets += (i ? ", %h" : "%h") + std::to_string(i);
  }
  const std::string r = std::to_string(rank);
  return R"(.version 8.0
.target sm_90
.address_size 64
.shared .align 128 .b8 box[1024];
.shared .align 8 .b8 mbar[8];
.visible .entry load(.param .align 64 .b8 map[128], .param .u64 out, .param .u32 bytes)" +
         params + R"()
{
  .reg .b64 %m, %o, %t; .reg .b32 %s, %bar, %n, %c<5>; .reg .b16 %h<3>; .reg .pred %p;
  mov.b64 %m, map; cvta.param.u64 %m, %m;
  ld.param.u64 %o, [out]; ld.param.u32 %n, [bytes];
  )" + loads +
         R"(
  mov.u32 %s, box; mov.u32 %bar, mbar;
  mbarrier.init.shared::cta.b64 [%bar], 1;
  mbarrier.arrive.expect_tx.shared::cta.b64 %t, [%bar], %n;
  cp.async.bulk.tensor.)" +
         r + "d.shared::cluster.global." + mode + ".mbarrier::complete_tx::bytes [%s], [%m, {" +
         coords + "}], [%bar], {" + offsets +
         R"(};
W: mbarrier.try_wait.parity.shared::cta.b64 %p, [%bar], 0; @!%p bra W;
  cp.async.bulk.global.shared::cta.bulk_group [%o], [%s], %n;
  cp.async.bulk.commit_group; cp.async.bulk.wait_group 0;
  ret;
}
)";
}

// A dense u32 tensor of `pixels` pixels (all dimensions but C) with 4 channels: pixel p's channel
// c holds (p + 1) * 100 + c, so a loaded pixel tells which one it was (0 when out of bounds).
struct Tensor {
  HostDeviceMemory memory;
  uint64_t address = 0;
  explicit Tensor(uint32_t pixels) {
    std::vector<uint32_t> data(pixels * 4);
    for (uint32_t i = 0; i < data.size(); ++i) data[i] = (i / 4 + 1) * 100 + i % 4;
    address = memory.upload(data);
  }
};

// dims: C, then the spatial ones (W first), then N; corners in the same order.
TensorMapLayout im2colMap(uint64_t address, std::vector<uint64_t> dims, std::vector<int32_t> lower,
                          std::vector<int32_t> upper, uint32_t pixelsPerColumn,
                          uint32_t channelsPerPixel = 4) {
  TensorMapLayout m;
  m.mode = kTensorMapIm2col;
  m.rank = static_cast<uint32_t>(dims.size());
  m.dataType = CU_TENSOR_MAP_DATA_TYPE_UINT32;
  m.globalAddress = address;
  uint64_t stride = 4;
  for (uint32_t i = 0; i < m.rank; ++i) {
    m.globalDim[i] = dims[i];
    m.elementStrides[i] = 1;
    stride *= dims[i];
    if (i + 1 < m.rank) m.globalStrides[i] = stride;
  }
  for (size_t i = 0; i < lower.size(); ++i) {
    m.pixelBoxLower[i] = lower[i];
    m.pixelBoxUpper[i] = upper[i];
  }
  m.pixelsPerColumn = pixelsPerColumn;
  m.channelsPerPixel = channelsPerPixel;
  return m;
}

struct Load {
  LaunchResult result;
  std::vector<uint32_t> box;
};

// Loads through `m` at `coords` (C first) moved by `offsets` (W first).
Load runLoad(Tensor& t, const TensorMapLayout& m, std::vector<int32_t> coords,
             std::vector<int16_t> offsets, const char* mode = "im2col") {
  Load run;
  std::unique_ptr<Module> module = loadOrFail(im2colKernel(m.rank, mode));
  if (!module) return run;
  std::array<uint8_t, kTensorMapBytes> map{};
  EXPECT_TRUE(m.mode == kTensorMapIm2col ? encodeIm2colTensorMap(m, map.data()).ok()
                                         : encodeTiledTensorMap(m, map.data()).ok());
  const uint32_t words = m.pixelsPerColumn * m.channelsPerPixel;
  const uint64_t out = t.memory.allocate(words * 4);
  const KernelInfo& k = module->kernels().at(0);
  ParamBlock params(k);
  params.set(0, map).set(1, out).set(2, words * 4);
  for (size_t i = 0; i < coords.size(); ++i) params.set(3 + i, coords[i]);
  for (size_t i = 0; i < offsets.size(); ++i) params.set(3 + coords.size() + i, offsets[i]);
  LaunchConfig config;
  config.block[0] = 1;
  LaunchServices services;
  services.workerThreads = 1;
  services.stepBudget = 100'000;
  run.result = launch(*module, k, config, params.data(), t.memory, services);
  run.box = t.memory.download<uint32_t>(out, words);
  return run;
}

// Which pixel (1-based) each loaded pixel was, 0 for a fill, checking its 4 channels agree.
std::vector<uint32_t> pixelsOf(const Load& run, uint32_t firstChannel = 0) {
  EXPECT_EQ(run.result.status.code, CUDA_SUCCESS) << run.result.status.message;
  std::vector<uint32_t> pixels;
  for (size_t p = 0; p + 4 <= run.box.size(); p += 4) {
    const uint32_t pixel = run.box[p] / 100;
    for (uint32_t c = 0; c < 4; ++c) {
      const uint32_t channel = firstChannel + c;
      const uint32_t want = pixel == 0 || channel >= 4 ? 0 : pixel * 100 + channel;
      EXPECT_EQ(run.box[p + c], want) << "pixel " << p / 4 << " channel " << channel;
    }
    pixels.push_back(pixel);
  }
  return pixels;
}

using Pixels = std::vector<uint32_t>;

// NHWC [1, 4, 4, 4]: 16 pixels from (h, w) = (0, 0), in row order.
TEST(TensorIm2col, LoadsAnImageInRowOrder) {
  Tensor t(16);
  auto m = im2colMap(t.address, {4, 4, 4, 1}, {0, 0}, {0, 0}, 16);
  EXPECT_EQ(pixelsOf(runLoad(t, m, {0, 0, 0, 0}, {0, 0})),
            (Pixels{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}));
}

// Corners (-1, -1) both: the box is H, W in [-1, 3); what lies outside the image is filled.
TEST(TensorIm2col, APaddedBoxFillsWhatLiesOutside) {
  Tensor t(16);
  auto m = im2colMap(t.address, {4, 4, 4, 1}, {-1, -1}, {-1, -1}, 16);
  EXPECT_EQ(pixelsOf(runLoad(t, m, {0, -1, -1, 0}, {0, 0})),
            (Pixels{0, 0, 0, 0, 0, 1, 2, 3, 0, 5, 6, 7, 0, 9, 10, 11}));
  // Offsets (1, 1) move every read by one pixel each way: the whole image.
  EXPECT_EQ(pixelsOf(runLoad(t, m, {0, -1, -1, 0}, {1, 1})),
            (Pixels{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}));
}

// From (n, h, w) = (0, 1, 3), 16 pixels run on into the second image; from the second image's
// start, the column runs past the batch and is filled.
TEST(TensorIm2col, AColumnRunsIntoTheNextImageAndPastTheBatch) {
  Tensor t(32);
  auto m = im2colMap(t.address, {4, 4, 4, 2}, {0, 0}, {0, 0}, 16);
  EXPECT_EQ(pixelsOf(runLoad(t, m, {0, 3, 1, 0}, {0, 0})),
            (Pixels{8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23}));
  auto longer = im2colMap(t.address, {4, 4, 4, 2}, {0, 0}, {0, 0}, 24);
  Pixels want;
  for (uint32_t p = 17; p <= 32; ++p) want.push_back(p);
  want.resize(24, 0);
  EXPECT_EQ(pixelsOf(runLoad(t, longer, {0, 0, 0, 1}, {0, 0})), want);
}

// The corners name W first: lower (1, 0), upper (-1, 0) keep W in [1, 3) and all of H.
TEST(TensorIm2col, CornersComeInGlobalDimOrder) {
  Tensor t(16);
  auto m = im2colMap(t.address, {4, 4, 4, 1}, {1, 0}, {-1, 0}, 8);
  EXPECT_EQ(pixelsOf(runLoad(t, m, {0, 1, 0, 0}, {0, 0})), (Pixels{2, 3, 6, 7, 10, 11, 14, 15}));
}

// Channels from 2 on: 2 and 3 are the tensor's, 4 and 5 lie past it and are filled.
TEST(TensorIm2col, ChannelsPastTheTensorAreFilled) {
  Tensor t(16);
  auto m = im2colMap(t.address, {4, 4, 4, 1}, {0, 0}, {0, 0}, 4);
  EXPECT_EQ(pixelsOf(runLoad(t, m, {2, 0, 0, 0}, {0, 0}), 2), (Pixels{1, 2, 3, 4}));
}

// NWC [2, 5, 4] with the box W in [-2, 5): two fills before each image's pixels.
TEST(TensorIm2col, ThreeDimensionalTensors) {
  Tensor t(10);
  auto m = im2colMap(t.address, {4, 5, 2}, {-2}, {0}, 10);
  EXPECT_EQ(pixelsOf(runLoad(t, m, {0, -2, 0}, {0})), (Pixels{0, 0, 1, 2, 3, 4, 5, 0, 0, 6}));
}

// NDHWC [1, 2, 2, 2, 4], offsets (W 1, H 0, D 0): only positions with w = 0 land inside; then
// (W 0, H 0, D 1): only those with d = 0. The offsets come in globalDim's order too.
TEST(TensorIm2col, FiveDimensionalTensorsWithOffsets) {
  Tensor t(8);
  auto m = im2colMap(t.address, {4, 2, 2, 2, 1}, {0, 0, 0}, {0, 0, 0}, 8);
  EXPECT_EQ(pixelsOf(runLoad(t, m, {0, 0, 0, 0, 0}, {1, 0, 0})), (Pixels{2, 0, 4, 0, 6, 0, 8, 0}));
  EXPECT_EQ(pixelsOf(runLoad(t, m, {0, 0, 0, 0, 0}, {0, 0, 1})), (Pixels{5, 6, 7, 8, 0, 0, 0, 0}));
}

// A 3x3 convolution at stride 2 and padding 1 over NHWC [1, 5, 5, 4]: traversal strides 2, the
// box H, W in [-1, 4) (lower -1, upper 1 - 2), so 3 x 3 output pixels, each at (2i - 1, 2j - 1);
// with offsets (1, 1), the filter's centre tap, at (2i, 2j).
TEST(TensorIm2col, TraversalStridesStepThroughTheBox) {
  Tensor t(25);
  auto m = im2colMap(t.address, {4, 5, 5, 1}, {-1, -1}, {-1, -1}, 9);
  m.elementStrides[1] = m.elementStrides[2] = 2;
  EXPECT_EQ(pixelsOf(runLoad(t, m, {0, -1, -1, 0}, {0, 0})), (Pixels{0, 0, 0, 0, 7, 9, 0, 17, 19}));
  EXPECT_EQ(pixelsOf(runLoad(t, m, {0, -1, -1, 0}, {1, 1})),
            (Pixels{1, 3, 5, 11, 13, 15, 21, 23, 25}));
}

// One thread copies `bytes` from `src` into shared memory, then stores it through the 4d map in
// .im2col_no_offs mode at (c0, w, h, n): with cp.async.bulk.tensor, or with
// cp.reduce.async.bulk.tensor and `reduction` when one is named.
std::string im2colStoreKernel(const std::string& reduction) {
  const std::string op = reduction.empty()
                             ? "cp.async.bulk.tensor.4d.global.shared::cta"
                             : "cp.reduce.async.bulk.tensor.4d.global.shared::cta." + reduction;
  return R"(.version 8.0
.target sm_90
.address_size 64
.shared .align 128 .b8 box[1024];
.shared .align 8 .b8 mbar[8];
.visible .entry store(.param .align 64 .b8 map[128], .param .u64 src, .param .u32 bytes,
                      .param .u32 c0, .param .u32 w, .param .u32 h, .param .u32 n)
{
  .reg .b64 %m, %g, %t; .reg .b32 %s, %bar, %bytes, %c, %w, %h, %n; .reg .pred %p;
  mov.b64 %m, map; cvta.param.u64 %m, %m;
  ld.param.u64 %g, [src]; ld.param.u32 %bytes, [bytes];
  ld.param.u32 %c, [c0]; ld.param.u32 %w, [w]; ld.param.u32 %h, [h]; ld.param.u32 %n, [n];
  mov.u32 %s, box; mov.u32 %bar, mbar;
  mbarrier.init.shared::cta.b64 [%bar], 1;
  mbarrier.arrive.expect_tx.shared::cta.b64 %t, [%bar], %bytes;
  cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%s], [%g], %bytes, [%bar];
W: mbarrier.try_wait.parity.shared::cta.b64 %p, [%bar], 0; @!%p bra W;
  )" + op +
         R"(.im2col_no_offs.bulk_group [%m, {%c, %w, %h, %n}], [%s];
  cp.async.bulk.commit_group; cp.async.bulk.wait_group 0;
  ret;
}
)";
}

// The box H, W in [-1, 3) of NHWC [1, 4, 4, 4], stored from (h, w) = (-1, -1): box pixel p lands
// on (p / 4 - 1, p % 4 - 1), the ones outside the image are dropped, and row 3 and column 3 keep
// what they had. A reduction (.add) adds instead.
TEST(TensorIm2col, StoresWithoutOffsetsWalkTheBoxToo) {
  for (const std::string op : {"", "add"}) {
    const bool add = op == "add";
    HostDeviceMemory memory;
    const uint64_t image = memory.upload(std::vector<uint32_t>(64, 1));
    std::vector<uint32_t> box(64);
    for (uint32_t i = 0; i < 64; ++i) box[i] = (i / 4 + 1) * 100 + i % 4;
    const uint64_t src = memory.upload(box);
    auto m = im2colMap(image, {4, 4, 4, 1}, {-1, -1}, {-1, -1}, 16);
    std::array<uint8_t, kTensorMapBytes> map{};
    ASSERT_TRUE(encodeIm2colTensorMap(m, map.data()).ok());
    std::unique_ptr<Module> module = loadOrFail(im2colStoreKernel(op));
    ASSERT_TRUE(module);
    ParamBlock params(module->kernels().at(0));
    params.set(0, map).set(1, src).set(2, uint32_t{256});
    params.set(3, int32_t{0}).set(4, int32_t{-1}).set(5, int32_t{-1}).set(6, int32_t{0});
    LaunchConfig config;
    config.block[0] = 1;
    LaunchServices services;
    services.workerThreads = 1;
    services.stepBudget = 100'000;
    LaunchResult r =
        launch(*module, module->kernels().at(0), config, params.data(), memory, services);
    ASSERT_EQ(r.status.code, CUDA_SUCCESS) << r.status.message;
    const auto got = memory.download<uint32_t>(image, 64);
    for (uint32_t h = 0; h < 4; ++h)
      for (uint32_t w = 0; w < 4; ++w)
        for (uint32_t c = 0; c < 4; ++c) {
          uint32_t want = 1;
          if (h < 3 && w < 3) {
            const uint32_t stored = box[((h + 1) * 4 + (w + 1)) * 4 + c];
            want = add ? 1 + stored : stored;
          }
          EXPECT_EQ(got[(h * 4 + w) * 4 + c], want) << op << " h " << h << " w " << w << " c " << c;
        }
  }
}

TEST(TensorIm2col, ATiledMapInAnIm2colCopyFaults) {
  Tensor t(16);
  TensorMapLayout tiled = im2colMap(t.address, {4, 4, 4, 1}, {}, {}, 4);
  tiled.mode = kTensorMapTiled;
  for (uint32_t i = 0; i < 4; ++i) tiled.boxDim[i] = i == 0 ? 4 : 1;
  Load run = runLoad(t, tiled, {0, 0, 0, 0}, {0, 0});
  EXPECT_EQ(run.result.status.code, CUDA_ERROR_ILLEGAL_INSTRUCTION) << run.result.status.message;
}

TEST(TensorIm2col, FormsTheEmuDoesNotRunAreRefusedByName) {
  const Status loaded = Module::load(im2colKernel(4, "im2col::w")).status();
  EXPECT_EQ(loaded.code, CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_NE(loaded.message.find("im2col::w"), std::string::npos) << loaded.message;
}

TEST(TensorIm2col, EncodeChecksTheDriversArgumentRules) {
  std::array<uint8_t, kTensorMapBytes> map{};
  const auto good = im2colMap(0x10000, {4, 4, 4, 2}, {-1, -2}, {3, -1}, 64, 8);
  ASSERT_TRUE(encodeIm2colTensorMap(good, map.data()).ok());
  TensorMapLayout decoded;
  ASSERT_TRUE(decodeTensorMap(map.data(), &decoded));
  EXPECT_EQ(decoded.mode, kTensorMapIm2col);
  EXPECT_EQ(decoded.pixelBoxLower[1], -2);
  EXPECT_EQ(decoded.pixelBoxUpper[0], 3);
  EXPECT_EQ(decoded.pixelsPerColumn, 64u);
  EXPECT_EQ(decoded.channelsPerPixel, 8u);
  struct Case {
    const char* what;
    void (*change)(TensorMapLayout&);
    CUresult code;
  };
  const Case cases[] = {
      {"rank 2", [](TensorMapLayout& m) { m.rank = 2; }, CUDA_ERROR_INVALID_VALUE},
      {"rank 4 corner 128", [](TensorMapLayout& m) { m.pixelBoxUpper[1] = 128; },
       CUDA_ERROR_INVALID_VALUE},
      {"rank 4 corner -129", [](TensorMapLayout& m) { m.pixelBoxLower[0] = -129; },
       CUDA_ERROR_INVALID_VALUE},
      {"zero area", [](TensorMapLayout& m) { m.pixelBoxLower[0] = 2, m.pixelBoxUpper[0] = -2; },
       CUDA_ERROR_INVALID_VALUE},
      {"no channels", [](TensorMapLayout& m) { m.channelsPerPixel = 0; }, CUDA_ERROR_INVALID_VALUE},
      {"257 channels", [](TensorMapLayout& m) { m.channelsPerPixel = 257; },
       CUDA_ERROR_INVALID_VALUE},
      {"1025 pixels", [](TensorMapLayout& m) { m.pixelsPerColumn = 1025; },
       CUDA_ERROR_INVALID_VALUE},
      {"swizzle span",
       [](TensorMapLayout& m) { m.swizzle = CU_TENSOR_MAP_SWIZZLE_32B, m.channelsPerPixel = 16; },
       CUDA_ERROR_INVALID_VALUE},
      {"stride", [](TensorMapLayout& m) { m.globalStrides[1] = 72; }, CUDA_ERROR_INVALID_VALUE},
      {"traversal stride along N", [](TensorMapLayout& m) { m.elementStrides[3] = 2; },
       CUDA_ERROR_NOT_SUPPORTED},
      {"8-byte pixels", [](TensorMapLayout& m) { m.channelsPerPixel = 2; },
       CUDA_ERROR_NOT_SUPPORTED},
  };
  for (const Case& c : cases) {
    TensorMapLayout m = good;
    c.change(m);
    EXPECT_EQ(encodeIm2colTensorMap(m, map.data()).code, c.code) << c.what;
  }
  // The corners' range widens as the rank falls: 16 bits for rank 3, 5 for rank 5.
  auto rank3 = im2colMap(0x10000, {4, 8, 2}, {-32768}, {32767}, 16);
  EXPECT_TRUE(encodeIm2colTensorMap(rank3, map.data()).ok());
  rank3.pixelBoxLower[0] = -32769;
  EXPECT_EQ(encodeIm2colTensorMap(rank3, map.data()).code, CUDA_ERROR_INVALID_VALUE);
  auto rank5 = im2colMap(0x10000, {4, 2, 2, 2, 1}, {-16, 0, 0}, {15, 0, 0}, 16);
  EXPECT_TRUE(encodeIm2colTensorMap(rank5, map.data()).ok());
  rank5.pixelBoxUpper[0] = 16;
  EXPECT_EQ(encodeIm2colTensorMap(rank5, map.data()).code, CUDA_ERROR_INVALID_VALUE);
}

}  // namespace
}  // namespace gpupool::ptx::testing
