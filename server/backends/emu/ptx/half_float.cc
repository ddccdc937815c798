#include "half_float.h"

#include <cmath>

namespace gpupool::ptx {
namespace {

// Rounds a non-negative value that is an exact double to an integer using mode r.
double roundInteger(double v, SmallFloatRounding r, bool negative) {
  double f = std::floor(v);
  double diff = v - f;
  if (diff == 0) return f;
  switch (r) {
    case SmallFloatRounding::kTowardZero:
      return f;
    case SmallFloatRounding::kDown:
      return negative ? f + 1 : f;
    case SmallFloatRounding::kUp:
      return negative ? f : f + 1;
    case SmallFloatRounding::kNearestEven:
      if (diff > 0.5 || (diff == 0.5 && std::fmod(f, 2.0) != 0)) return f + 1;
      return f;
  }
  return f;
}

// Encodes x in a binary format with `expBits` exponent and `mantBits` fraction bits.
uint16_t encode(double x, int expBits, int mantBits, SmallFloatRounding r) {
  const int bias = (1 << (expBits - 1)) - 1;
  const uint16_t expMask = static_cast<uint16_t>(((1 << expBits) - 1) << mantBits);
  if (std::isnan(x)) return 0x7fff;
  bool negative = std::signbit(x);
  uint16_t sign = negative ? static_cast<uint16_t>(0x8000) : 0;
  double a = std::fabs(x);
  auto overflow = [&]() -> uint16_t {
    bool toInf = r == SmallFloatRounding::kNearestEven ||
                 (r == SmallFloatRounding::kUp && !negative) ||
                 (r == SmallFloatRounding::kDown && negative);
    return sign | (toInf ? expMask : static_cast<uint16_t>(expMask - 1));  // inf or max finite
  };
  if (std::isinf(a)) return sign | expMask;
  if (a == 0) return sign;
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  int E = e - 1;
  if (E < 1 - bias) {  // subnormal: multiples of 2^(1-bias-mantBits)
    double q = roundInteger(std::ldexp(a, mantBits + bias - 1), r, negative);
    return sign | static_cast<uint16_t>(q);  // q == 2^mantBits becomes the smallest normal
  }
  double frac = roundInteger((std::ldexp(a, -E) - 1.0) * (1 << mantBits), r, negative);
  if (frac >= (1 << mantBits)) {
    frac = 0;
    ++E;
  }
  if (E > bias) return overflow();
  return sign | static_cast<uint16_t>((E + bias) << mantBits) | static_cast<uint16_t>(frac);
}

double decode(uint16_t h, int expBits, int mantBits) {
  const int bias = (1 << (expBits - 1)) - 1;
  int sign = h >> 15;
  int exp = (h >> mantBits) & ((1 << expBits) - 1);
  int frac = h & ((1 << mantBits) - 1);
  double v;
  if (exp == (1 << expBits) - 1)
    v = frac ? std::nan("") : INFINITY;
  else if (exp == 0)
    v = std::ldexp(frac, 1 - bias - mantBits);
  else
    v = std::ldexp(frac + (1 << mantBits), exp - bias - mantBits);
  return sign ? -v : v;
}

}  // namespace

uint16_t doubleToHalf(double x, SmallFloatRounding r) { return encode(x, 5, 10, r); }
uint16_t doubleToBfloat(double x, SmallFloatRounding r) { return encode(x, 8, 7, r); }
double halfToDouble(uint16_t h) { return decode(h, 5, 10); }
double bfloatToDouble(uint16_t h) { return decode(h, 8, 7); }

}  // namespace gpupool::ptx
