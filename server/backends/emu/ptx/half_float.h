// Bit-exact conversions between binary16 / bfloat16 bit patterns and host floating point
// (round-to-nearest-even unless a mode is given; NaN -> canonical 0x7fff; subnormals kept).
#pragma once

#include <cstdint>

namespace gpupool::ptx {

enum class SmallFloatRounding : uint8_t { kNearestEven, kTowardZero, kDown, kUp };

uint16_t doubleToHalf(double x, SmallFloatRounding r = SmallFloatRounding::kNearestEven);
uint16_t doubleToBfloat(double x, SmallFloatRounding r = SmallFloatRounding::kNearestEven);
inline uint16_t floatToHalf(float f) { return doubleToHalf(f); }  // float -> double is exact
inline uint16_t floatToBfloat(float f) { return doubleToBfloat(f); }
double halfToDouble(uint16_t h);
double bfloatToDouble(uint16_t h);
inline float halfToFloat(uint16_t h) { return static_cast<float>(halfToDouble(h)); }  // exact
inline float bfloatToFloat(uint16_t h) { return static_cast<float>(bfloatToDouble(h)); }

}  // namespace gpupool::ptx
