// cp.async.bulk.tensor .tile on the emu: tensor maps encoded by tensor_map.cc (what the emu
// backend's cuTensorMapEncodeTiled writes), passed as __grid_constant__ parameters (the cvta.param
// address nvcc emits), loaded into shared memory with an mbarrier transaction and stored back to
// global memory through a bulk group (or combined with it, cp.reduce.async.bulk.tensor): box
// dimensions, element strides, out-of-bounds zero and NaN fill, the 32-byte bank swizzle, and the
// encoder's argument rules.
#include <cuda.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <string>

#include "host_device_memory.h"
#include "ptx_snippet.h"
#include "tensor_map.h"

namespace gpupool::ptx::testing {
namespace {

// One thread: loads the box at (x, y) of map A (`bytes` of transaction), copies the raw shared
// box (256 bytes) to `out`, and stores it at (x2, y2) of map B.
constexpr const char* kTensorCopyKernel = R"(.version 8.0
.target sm_90
.address_size 64
.shared .align 128 .b8 box[256];
.shared .align 8 .b8 mbar[8];
.visible .entry tma(.param .align 64 .b8 mapA[128], .param .align 64 .b8 mapB[128],
                    .param .u64 out, .param .u32 x, .param .u32 y, .param .u32 bytes,
                    .param .u32 x2, .param .u32 y2)
{
  .reg .b64 %a, %b, %o, %t; .reg .b32 %s, %bar, %x, %y, %n; .reg .pred %p;
  mov.b64 %a, mapA; cvta.param.u64 %a, %a;
  mov.b64 %b, mapB; cvta.param.u64 %b, %b;
  ld.param.u64 %o, [out]; ld.param.u32 %x, [x]; ld.param.u32 %y, [y]; ld.param.u32 %n, [bytes];
  mov.u32 %s, box; mov.u32 %bar, mbar;
  mbarrier.init.shared::cta.b64 [%bar], 1;
  mbarrier.arrive.expect_tx.shared::cta.b64 %t, [%bar], %n;
  cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%s], [%a, {%x, %y}], [%bar];
W: mbarrier.try_wait.parity.shared::cta.b64 %p, [%bar], 0; @!%p bra W;
  cp.async.bulk.global.shared::cta.bulk_group [%o], [%s], 256;
  ld.param.u32 %x, [x2]; ld.param.u32 %y, [y2];
  cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%b, {%x, %y}], [%s];
  cp.async.bulk.commit_group; cp.async.bulk.wait_group 0;
  ret;
}
)";

constexpr uint64_t kWidth = 10, kHeight = 7, kPitch = 48;  // 10 four-byte elements, rows of 48

TensorMapLayout tiled2d(uint32_t dataType, uint64_t address, uint32_t boxX, uint32_t boxY,
                        uint32_t strideY, uint32_t swizzle, uint32_t oobFill) {
  TensorMapLayout m;
  m.rank = 2;
  m.dataType = dataType;
  m.globalAddress = address;
  m.globalDim[0] = kWidth;
  m.globalDim[1] = kHeight;
  m.globalStrides[0] = kPitch;
  m.boxDim[0] = boxX;
  m.boxDim[1] = boxY;
  m.elementStrides[0] = 1;
  m.elementStrides[1] = strideY;
  m.swizzle = swizzle;
  m.oobFill = oobFill;
  return m;
}

struct TensorRun {
  std::vector<uint32_t> box;     // the raw shared box, 64 words
  std::vector<uint32_t> stored;  // tensor B after the store, kHeight * kPitch / 4 words
};

// The kernel with its store replaced by cp.reduce.async.bulk.tensor's `op`.
std::string tensorReduceKernel(const std::string& op) {
  std::string kernel = kTensorCopyKernel;
  const std::string store = "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group";
  kernel.replace(kernel.find(store), store.size(),
                 "cp.reduce.async.bulk.tensor.2d.global.shared::cta." + op + ".tile.bulk_group");
  return kernel;
}

TensorRun runTensorCopy(const TensorMapLayout& a, const TensorMapLayout& b,
                        HostDeviceMemory& memory, uint64_t tensorB, uint32_t x, uint32_t y,
                        uint32_t bytes, uint32_t x2, uint32_t y2,
                        const std::string& kernel = kTensorCopyKernel,
                        CUresult expected = CUDA_SUCCESS) {
  TensorRun run;
  std::unique_ptr<Module> module = loadOrFail(kernel);
  if (!module) return run;
  std::array<uint8_t, kTensorMapBytes> mapA{}, mapB{};
  EXPECT_TRUE(encodeTiledTensorMap(a, mapA.data()).ok());
  EXPECT_TRUE(encodeTiledTensorMap(b, mapB.data()).ok());
  const uint64_t out = memory.allocate(256);
  const KernelInfo& k = module->kernels().at(0);
  ParamBlock params(k);
  params.set(0, mapA).set(1, mapB).set(2, out).set(3, x).set(4, y).set(5, bytes).set(6, x2).set(7,
                                                                                                y2);
  LaunchConfig config;
  config.block[0] = 1;
  LaunchServices services;
  services.workerThreads = 1;
  services.stepBudget = 100'000;
  LaunchResult r = launch(*module, k, config, params.data(), memory, services);
  EXPECT_EQ(r.status.code, expected) << r.status.message;
  run.box = memory.download<uint32_t>(out, 64);
  run.stored = memory.download<uint32_t>(tensorB, kHeight * kPitch / 4);
  return run;
}

std::vector<uint32_t> sourceTensor() {
  std::vector<uint32_t> t(kHeight * kPitch / 4, 0xdeadbeef);  // padding stays marked
  for (uint64_t yy = 0; yy < kHeight; ++yy)
    for (uint64_t xx = 0; xx < kWidth; ++xx) t[yy * kPitch / 4 + xx] = 1000 * yy + xx;
  return t;
}

// A float box of 8 x 4 with element stride 2 along y (two rows: y and y + 2), partly outside the
// tensor: NaN fill for what lies outside, and only the inside stored.
TEST(TensorCopy, TileLoadWithElementStridesAndNanFill) {
  HostDeviceMemory memory;
  const uint64_t a = memory.upload(sourceTensor());
  const uint64_t b = memory.upload(std::vector<uint32_t>(kHeight * kPitch / 4, 0));
  const auto mapA = tiled2d(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, a, 8, 4, 2, CU_TENSOR_MAP_SWIZZLE_NONE,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA);
  const auto mapB = tiled2d(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, b, 8, 4, 2, CU_TENSOR_MAP_SWIZZLE_NONE,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  TensorRun run = runTensorCopy(mapA, mapB, memory, b, 4, 5, 64, static_cast<uint32_t>(-2), 1);
  ASSERT_EQ(run.box.size(), 64u);
  for (uint32_t k = 0; k < 16; ++k) {
    const uint32_t x = 4 + k % 8, y = 5 + 2 * (k / 8);
    const uint32_t expected = x < kWidth && y < kHeight ? 1000 * y + x : 0x7fffffffu;
    EXPECT_EQ(run.box[k], expected) << k;
  }
  // Stored at (-2, 1): box column c lands on x = c - 2, box row r on y = 1 + 2r.
  for (uint32_t yy = 0; yy < kHeight; ++yy)
    for (uint32_t xx = 0; xx < kPitch / 4; ++xx) {
      uint32_t expected = 0;
      const bool row = yy == 1 || yy == 3, column = xx + 2 < 8 && xx < kWidth;
      if (row && column) expected = run.box[(yy == 3 ? 8 : 0) + xx + 2];
      EXPECT_EQ(run.stored[yy * kPitch / 4 + xx], expected) << xx << "," << yy;
    }
}

// A u32 box of 8 x 8 with the 32-byte swizzle: rows 4-7 (shared bytes 128-255) have their two
// 16-byte halves swapped; row 7 lies outside and is zero. The store unswizzles.
TEST(TensorCopy, TileLoadSwizzlesAndStoreUnswizzles) {
  HostDeviceMemory memory;
  const uint64_t a = memory.upload(sourceTensor());
  const uint64_t b = memory.upload(std::vector<uint32_t>(kHeight * kPitch / 4, 0));
  const auto mapA = tiled2d(CU_TENSOR_MAP_DATA_TYPE_UINT32, a, 8, 8, 1, CU_TENSOR_MAP_SWIZZLE_32B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  const auto mapB = tiled2d(CU_TENSOR_MAP_DATA_TYPE_UINT32, b, 8, 8, 1, CU_TENSOR_MAP_SWIZZLE_32B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  TensorRun run = runTensorCopy(mapA, mapB, memory, b, 0, 0, 256, 2, 0);
  ASSERT_EQ(run.box.size(), 64u);
  for (uint32_t r = 0; r < 8; ++r)
    for (uint32_t c = 0; c < 8; ++c) {
      const uint32_t slot = r * 8 + (r >= 4 ? (c ^ 4) : c);
      const uint32_t expected = r < kHeight ? 1000 * r + c : 0;
      EXPECT_EQ(run.box[slot], expected) << r << "," << c;
    }
  for (uint32_t yy = 0; yy < kHeight; ++yy)
    for (uint32_t xx = 0; xx < kPitch / 4; ++xx) {
      const uint32_t expected = xx >= 2 && xx < kWidth ? 1000 * yy + (xx - 2) : 0;
      EXPECT_EQ(run.stored[yy * kPitch / 4 + xx], expected) << xx << "," << yy;
    }
}

// cp.reduce.async.bulk.tensor: a u32 box of 8 x 2 loaded at (0, 0) and combined into tensor B at
// (4, 5): every element of B is 5, so .add gives 5 + the box's and .min gives the smaller; the
// part of the box past the tensor's edge (x >= 10) changes nothing. A pair the emu does not
// combine (max on floats) faults.
TEST(TensorCopy, TileReductionsCombineWithMemory) {
  for (const char* op : {"add", "min"}) {
    HostDeviceMemory memory;
    const uint64_t a = memory.upload(sourceTensor());
    const uint64_t b = memory.upload(std::vector<uint32_t>(kHeight * kPitch / 4, 5));
    const auto mapA = tiled2d(CU_TENSOR_MAP_DATA_TYPE_UINT32, a, 8, 2, 1,
                              CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    const auto mapB = tiled2d(CU_TENSOR_MAP_DATA_TYPE_UINT32, b, 8, 2, 1,
                              CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    TensorRun run = runTensorCopy(mapA, mapB, memory, b, 0, 0, 64, 4, 5, tensorReduceKernel(op));
    ASSERT_EQ(run.stored.size(), kHeight * kPitch / 4);
    const bool add = std::string(op) == "add";
    for (uint32_t yy = 0; yy < kHeight; ++yy)
      for (uint32_t xx = 0; xx < kPitch / 4; ++xx) {
        uint32_t expected = 5;
        if (yy >= 5 && yy < 7 && xx >= 4 && xx < kWidth) {
          const uint32_t source = 1000 * (yy - 5) + (xx - 4);
          expected = add ? 5 + source : std::min(5u, source);
        }
        EXPECT_EQ(run.stored[yy * kPitch / 4 + xx], expected) << op << " " << xx << "," << yy;
      }
  }
  HostDeviceMemory memory;
  const uint64_t a = memory.upload(sourceTensor());
  const auto floats = tiled2d(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, a, 8, 2, 1,
                              CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  runTensorCopy(floats, floats, memory, a, 0, 0, 64, 0, 2, tensorReduceKernel("max"),
                CUDA_ERROR_ILLEGAL_INSTRUCTION);
}

TEST(TensorCopy, EncodeChecksTheDriversArgumentRules) {
  std::array<uint8_t, kTensorMapBytes> map{};
  const auto good = tiled2d(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 0x10000, 8, 4, 1,
                            CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  EXPECT_TRUE(encodeTiledTensorMap(good, map.data()).ok());
  TensorMapLayout decoded;
  ASSERT_TRUE(decodeTensorMap(map.data(), &decoded));
  EXPECT_EQ(decoded.globalDim[1], kHeight);
  EXPECT_EQ(decoded.boxDim[0], 8u);
  struct Case {
    const char* what;
    void (*change)(TensorMapLayout&);
    CUresult code;
  };
  const Case cases[] = {
      {"rank 0", [](TensorMapLayout& m) { m.rank = 0; }, CUDA_ERROR_INVALID_VALUE},
      {"rank 6", [](TensorMapLayout& m) { m.rank = 6; }, CUDA_ERROR_INVALID_VALUE},
      {"address", [](TensorMapLayout& m) { m.globalAddress += 8; }, CUDA_ERROR_INVALID_VALUE},
      {"dim 0", [](TensorMapLayout& m) { m.globalDim[0] = 0; }, CUDA_ERROR_INVALID_VALUE},
      {"dim 2^32+1", [](TensorMapLayout& m) { m.globalDim[1] = (uint64_t{1} << 32) + 1; },
       CUDA_ERROR_INVALID_VALUE},
      {"stride", [](TensorMapLayout& m) { m.globalStrides[0] = 40; }, CUDA_ERROR_INVALID_VALUE},
      {"box 257", [](TensorMapLayout& m) { m.boxDim[1] = 257; }, CUDA_ERROR_INVALID_VALUE},
      {"box bytes", [](TensorMapLayout& m) { m.boxDim[0] = 2; }, CUDA_ERROR_INVALID_VALUE},
      {"element stride 9", [](TensorMapLayout& m) { m.elementStrides[1] = 9; },
       CUDA_ERROR_INVALID_VALUE},
      {"swizzle span",
       [](TensorMapLayout& m) { m.swizzle = CU_TENSOR_MAP_SWIZZLE_32B, m.boxDim[0] = 16; },
       CUDA_ERROR_INVALID_VALUE},
      {"NaN fill on integers",
       [](TensorMapLayout& m) {
         m.dataType = CU_TENSOR_MAP_DATA_TYPE_INT32;
         m.oobFill = CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA;
       },
       CUDA_ERROR_INVALID_VALUE},
      {"interleave on rank 2", [](TensorMapLayout& m) { m.interleave = 1; },
       CUDA_ERROR_INVALID_VALUE},
      {"unknown type", [](TensorMapLayout& m) { m.dataType = 16; }, CUDA_ERROR_INVALID_VALUE},
      {"packed type", [](TensorMapLayout& m) { m.dataType = 13; }, CUDA_ERROR_NOT_SUPPORTED},
  };
  for (const Case& c : cases) {
    TensorMapLayout m = good;
    c.change(m);
    EXPECT_EQ(encodeTiledTensorMap(m, map.data()).code, c.code) << c.what;
  }
  ASSERT_TRUE(encodeTiledTensorMap(good, map.data()).ok());
  EXPECT_EQ(replaceTensorMapAddress(map.data(), 0x20008).code, CUDA_ERROR_INVALID_VALUE);
  EXPECT_TRUE(replaceTensorMapAddress(map.data(), 0x20010).ok());
  ASSERT_TRUE(decodeTensorMap(map.data(), &decoded));
  EXPECT_EQ(decoded.globalAddress, 0x20010u);
}

}  // namespace
}  // namespace gpupool::ptx::testing
