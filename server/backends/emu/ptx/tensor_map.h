// The emu's tensor map (CUtensorMap, 128 opaque bytes): what cuTensorMapEncodeTiled checks and
// stores, and what cp.async.bulk.tensor reads back. The layout is the emu's own (a real driver's
// is undocumented); programs only pass it around. Little-endian fields:
//   0: u32 magic "GPTM"   4: u8 rank   5: u8 CUtensorMapDataType   6: u8 interleave
//   7: u8 swizzle   8: u8 L2 promotion   9: u8 OOB fill   10: u8 mode (0 tiled, 1 im2col)
//   11-15: zero   16: u64 global address
//   24: u32 globalDim[i] - 1, i < 5   44: u8 boxDim[i] - 1, i < 5 (tiled; zero for im2col)
//   49: u8 elementStrides[i], i < 5   56: u64 globalStrides[i] (bytes of dimension i + 1), i < 4
//   88: u16 channelsPerPixel   90: u16 pixelsPerColumn (im2col; zero for tiled)
//   92: s16 pixelBoxLowerCorner[i]   98: s16 pixelBoxUpperCorner[i], i < 3 (im2col)
//   104-127: zero
#pragma once

#include <cstdint>

#include "common/status.h"

namespace gpupool::ptx {

inline constexpr uint32_t kTensorMapMagic = 0x4d545047;  // "GPTM"
inline constexpr unsigned kTensorMapBytes = 128;

struct TensorMapLayout {
  uint32_t rank = 0;
  uint32_t dataType = 0, interleave = 0, swizzle = 0, l2Promotion = 0, oobFill = 0;
  uint64_t globalAddress = 0;
  uint64_t globalDim[5] = {};
  uint64_t globalStrides[4] = {};  // bytes between consecutive indices of dimensions 1..rank-1
  uint32_t boxDim[5] = {};         // tiled
  uint32_t elementStrides[5] = {};
  uint32_t mode = 0;  // 0 tiled, 1 im2col
  // im2col: the bounding box's corners along the spatial dimensions 1 to rank - 2 (W, H, D, in
  // globalDim's order), and what one copy loads: pixelsPerColumn pixels of channelsPerPixel
  // elements (dimension 0) each.
  int32_t pixelBoxLower[3] = {}, pixelBoxUpper[3] = {};
  uint32_t channelsPerPixel = 0, pixelsPerColumn = 0;
};

inline constexpr uint32_t kTensorMapTiled = 0, kTensorMapIm2col = 1;

// Bytes per element of a CUtensorMapDataType the emu encodes (0 for the packed sub-byte types).
unsigned tensorMapElementBytes(uint32_t dataType);

// cuTensorMapEncodeTiled's argument rules (cuda.h); on success writes the 128-byte map.
Status encodeTiledTensorMap(const TensorMapLayout& layout, uint8_t* out);
// cuTensorMapEncodeIm2col's argument rules (cuda.h), and what the emu's im2col copies cover.
Status encodeIm2colTensorMap(const TensorMapLayout& layout, uint8_t* out);
// Reads a map either encoder wrote; false when the bytes are not one.
bool decodeTensorMap(const uint8_t* in, TensorMapLayout* out);
// cuTensorMapReplaceAddress: checks the new address as encoding would and stores it.
Status replaceTensorMapAddress(uint8_t* map, uint64_t globalAddress);

}  // namespace gpupool::ptx
