// What cuTensorMapEncodeTiled, cuTensorMapEncodeIm2col and cuTensorMapEncodeIm2colWide were
// asked for, as it reaches a backend (the map itself is the backend's: its layout is opaque).
#pragma once

#include <cstdint>
#include <vector>

namespace gpupool {

enum class TensorMapMode : uint32_t { kTiled = 0, kIm2col = 1, kIm2colWide = 2 };

struct TensorMapRequest {
  TensorMapMode mode = TensorMapMode::kTiled;
  uint32_t dataType = 0;  // CUtensorMapDataType
  uint64_t globalAddress = 0;
  std::vector<uint64_t> globalDims;     // the rank
  std::vector<uint64_t> globalStrides;  // rank - 1
  std::vector<uint32_t> boxDims;        // tiled
  std::vector<uint32_t> elementStrides;
  uint32_t interleave = 0, swizzle = 0, l2Promotion = 0, oobFill = 0;
  std::vector<int32_t> pixelBoxLower, pixelBoxUpper;  // im2col: rank - 2; wide: one each
  uint32_t channelsPerPixel = 0, pixelsPerColumn = 0, wideMode = 0;
};

inline constexpr unsigned kTensorMapBytes = 128;
inline constexpr unsigned kMaxTensorRank = 5;

}  // namespace gpupool
