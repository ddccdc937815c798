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

// Whether the lists have the lengths the mode and rank call for (tiled: rank 1 to 5 with a box per
// dimension; im2col: rank 3 to 5 with rank - 2 corners each; im2col wide: one corner width each),
// so a backend may index them by rank.
inline bool tensorMapShapeConsistent(const TensorMapRequest& r) {
  const size_t rank = r.globalDims.size();
  const size_t minRank = r.mode == TensorMapMode::kTiled ? 1 : 3;
  if (rank < minRank || rank > kMaxTensorRank || r.globalStrides.size() != rank - 1 ||
      r.elementStrides.size() != rank)
    return false;
  if (r.mode == TensorMapMode::kTiled) return r.boxDims.size() == rank;
  const size_t corners = r.mode == TensorMapMode::kIm2col ? rank - 2 : 1;
  return r.pixelBoxLower.size() == corners && r.pixelBoxUpper.size() == corners;
}

}  // namespace gpupool
