// Per-lane semantics of PTX arithmetic as pure functions on raw register bits: integer ops with
// PTX's defined corner cases (no traps on /0 or INT_MIN/-1, clamped shifts), float ops with
// ftz/sat/rounding modes, conversions with saturation, bit manipulation. Included only by
// interpreter.cpp, which is compiled with -frounding-math so fesetround() is honoured.
#pragma once

#include <bit>
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "half_float.h"
#include "ir.h"

namespace gpupool::ptx::scalar {

inline float f32(uint64_t b) {
  float f;
  uint32_t v = static_cast<uint32_t>(b);
  std::memcpy(&f, &v, 4);
  return f;
}
inline double f64(uint64_t b) {
  double d;
  std::memcpy(&d, &b, 8);
  return d;
}
inline uint64_t bits(float f) {
  uint32_t v;
  std::memcpy(&v, &f, 4);
  return v;
}
inline uint64_t bits(double d) {
  uint64_t v;
  std::memcpy(&v, &d, 8);
  return v;
}

inline uint64_t widthMask(unsigned bytes) { return bytes >= 8 ? ~0ull : (1ull << (bytes * 8)) - 1; }

// Sign- or zero-extends the low `bytes` of v to 64 bits.
inline uint64_t extend(uint64_t v, unsigned bytes, bool isSignedType) {
  if (bytes >= 8) return v;
  unsigned shift = 64 - bytes * 8;
  return isSignedType ? static_cast<uint64_t>(static_cast<int64_t>(v << shift) >> shift)
                      : v & widthMask(bytes);
}

constexpr uint32_t kCanonicalNanF32 = 0x7fffffffu;
constexpr uint64_t kCanonicalNanF64 = 0x7fffffffffffffffull;

inline float flush(float f) {
  return std::fpclassify(f) == FP_SUBNORMAL ? std::copysign(0.0f, f) : f;
}

// Scoped fesetround for directed rounding modifiers.
class RoundingScope {
 public:
  explicit RoundingScope(Round r) {
    int mode = r == Round::kRZ || r == Round::kRZI   ? FE_TOWARDZERO
               : r == Round::kRM || r == Round::kRMI ? FE_DOWNWARD
               : r == Round::kRP || r == Round::kRPI ? FE_UPWARD
                                                     : FE_TONEAREST;
    active_ = mode != FE_TONEAREST;
    if (active_) std::fesetround(mode);
  }
  ~RoundingScope() {
    if (active_) std::fesetround(FE_TONEAREST);
  }
  RoundingScope(const RoundingScope&) = delete;
  RoundingScope& operator=(const RoundingScope&) = delete;

 private:
  bool active_;
};

// Post-processing of an f32 result: NaN canonicalization, .ftz, .sat.
inline uint64_t finishF32(float r, uint32_t flags) {
  if (std::isnan(r)) return (flags & kSat) ? 0 : kCanonicalNanF32;
  if (flags & kFtz) r = flush(r);
  if (flags & kSat) r = r < 0.0f ? 0.0f : (r > 1.0f ? 1.0f : r);
  return bits(r);
}
inline uint64_t finishF64(double r, uint32_t flags) {
  if (std::isnan(r)) return (flags & kSat) ? 0 : kCanonicalNanF64;
  if (flags & kSat) r = r < 0.0 ? 0.0 : (r > 1.0 ? 1.0 : r);
  return bits(r);
}
inline float inF32(uint64_t b, uint32_t flags) {
  float f = f32(b);
  return (flags & kFtz) ? flush(f) : f;
}

// PTX min/max: a NaN operand yields the other; -0 orders below +0.
template <class F>
F floatMin(F a, F b) {
  if (std::isnan(a)) return b;
  if (std::isnan(b)) return a;
  if (a == b) return std::signbit(a) ? a : b;
  return a < b ? a : b;
}
template <class F>
F floatMax(F a, F b) {
  if (std::isnan(a)) return b;
  if (std::isnan(b)) return a;
  if (a == b) return std::signbit(a) ? b : a;
  return a > b ? a : b;
}

// min.NaN/max.NaN: a NaN operand makes the result NaN (canonical once the result is finished).
template <class F>
F floatMinNan(F a, F b) {
  return std::isnan(a) || std::isnan(b) ? std::numeric_limits<F>::quiet_NaN() : floatMin(a, b);
}
template <class F>
F floatMaxNan(F a, F b) {
  return std::isnan(a) || std::isnan(b) ? std::numeric_limits<F>::quiet_NaN() : floatMax(a, b);
}

template <class F>
bool floatCompare(CmpOp op, F a, F b) {
  bool unordered = std::isnan(a) || std::isnan(b);
  switch (op) {
    case CmpOp::kEq:
      return !unordered && a == b;
    case CmpOp::kNe:
      return !unordered && a != b;
    case CmpOp::kLt:
    case CmpOp::kLo:
      return !unordered && a < b;
    case CmpOp::kLe:
    case CmpOp::kLs:
      return !unordered && a <= b;
    case CmpOp::kGt:
    case CmpOp::kHi:
      return !unordered && a > b;
    case CmpOp::kGe:
    case CmpOp::kHs:
      return !unordered && a >= b;
    case CmpOp::kEqu:
      return unordered || a == b;
    case CmpOp::kNeu:
      return unordered || a != b;
    case CmpOp::kLtu:
      return unordered || a < b;
    case CmpOp::kLeu:
      return unordered || a <= b;
    case CmpOp::kGtu:
      return unordered || a > b;
    case CmpOp::kGeu:
      return unordered || a >= b;
    case CmpOp::kNum:
      return !unordered;
    case CmpOp::kNan:
      return unordered;
  }
  return false;
}

template <class T>
bool intCompare(CmpOp op, T a, T b) {
  switch (op) {
    case CmpOp::kEq:
    case CmpOp::kEqu:
      return a == b;
    case CmpOp::kNe:
    case CmpOp::kNeu:
      return a != b;
    case CmpOp::kLt:
    case CmpOp::kLo:
    case CmpOp::kLtu:
      return a < b;
    case CmpOp::kLe:
    case CmpOp::kLs:
    case CmpOp::kLeu:
      return a <= b;
    case CmpOp::kGt:
    case CmpOp::kHi:
    case CmpOp::kGtu:
      return a > b;
    case CmpOp::kGe:
    case CmpOp::kHs:
    case CmpOp::kGeu:
      return a >= b;
    default:
      return false;
  }
}

// Integer division without host traps: x/0 -> all ones, x%0 -> x, INT_MIN/-1 -> INT_MIN.
template <class T>
T intDiv(T a, T b) {
  if (b == 0) return static_cast<T>(~T{0});
  if constexpr (std::is_signed_v<T>)
    if (a == std::numeric_limits<T>::min() && b == -1) return a;
  return static_cast<T>(a / b);
}
template <class T>
T intRem(T a, T b) {
  if (b == 0) return a;
  if constexpr (std::is_signed_v<T>)
    if (a == std::numeric_limits<T>::min() && b == -1) return 0;
  return static_cast<T>(a % b);
}

// High half of the full product.
template <class T>
T mulHi(T a, T b) {
  if constexpr (sizeof(T) == 8) {
    using W = std::conditional_t<std::is_signed_v<T>, __int128, unsigned __int128>;
    return static_cast<T>((static_cast<W>(a) * static_cast<W>(b)) >> 64);
  } else {
    using W = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
    return static_cast<T>((static_cast<W>(a) * static_cast<W>(b)) >> (sizeof(T) * 8));
  }
}

// Float -> integer with rounding, saturation to the destination range, NaN -> 0.
inline uint64_t floatToInt(double v, Round r, Type dst) {
  if (std::isnan(v)) return 0;
  switch (r) {
    case Round::kRNI:
    case Round::kRN:
      v = std::nearbyint(v);
      break;  // FE_TONEAREST is the default
    case Round::kRMI:
    case Round::kRM:
      v = std::floor(v);
      break;
    case Round::kRPI:
    case Round::kRP:
      v = std::ceil(v);
      break;
    default:
      v = std::trunc(v);
      break;
  }
  unsigned n = typeBytes(dst) * 8;
  if (isSigned(dst)) {
    double lo = -std::ldexp(1.0, n - 1), hi = std::ldexp(1.0, n - 1);
    if (v < lo) return static_cast<uint64_t>(static_cast<int64_t>(lo)) & widthMask(n / 8);
    if (v >= hi) return (widthMask(n / 8) >> 1);
    return static_cast<uint64_t>(static_cast<int64_t>(v)) & widthMask(n / 8);
  }
  if (v <= 0) return 0;
  if (v >= std::ldexp(1.0, n)) return widthMask(n / 8);
  return static_cast<uint64_t>(v);
}

inline SmallFloatRounding smallRounding(Round r) {
  switch (r) {
    case Round::kRZ:
      return SmallFloatRounding::kTowardZero;
    case Round::kRM:
      return SmallFloatRounding::kDown;
    case Round::kRP:
      return SmallFloatRounding::kUp;
    default:
      return SmallFloatRounding::kNearestEven;
  }
}

// Reads a float-typed register value as double (f16/bf16/f32/f64).
inline double toDouble(uint64_t b, Type t) {
  switch (t) {
    case Type::kF16:
      return halfToDouble(static_cast<uint16_t>(b));
    case Type::kBF16:
      return bfloatToDouble(static_cast<uint16_t>(b));
    case Type::kF32:
      return f32(b);
    default:
      return f64(b);
  }
}

// Full cvt semantics for scalar destinations.
inline uint64_t convert(uint64_t src, Type dst, Type srcType, Round r, uint32_t flags) {
  const bool srcF = isFloat(srcType), dstF = isFloat(dst);
  if (!srcF && !dstF) {
    uint64_t v = extend(src, typeBytes(srcType), isSigned(srcType));
    if (flags & kSat) {
      unsigned n = typeBytes(dst) * 8;
      if (isSigned(dst)) {
        int64_t lo = n >= 64 ? INT64_MIN : -(int64_t{1} << (n - 1));
        int64_t hi = n >= 64 ? INT64_MAX : (int64_t{1} << (n - 1)) - 1;
        if (isSigned(srcType)) {
          int64_t s = static_cast<int64_t>(v);
          v = static_cast<uint64_t>(s < lo ? lo : s > hi ? hi : s);
        } else {
          v = v > static_cast<uint64_t>(hi) ? static_cast<uint64_t>(hi) : v;
        }
      } else {
        uint64_t hi = widthMask(n / 8);
        if (isSigned(srcType) && static_cast<int64_t>(v) < 0)
          v = 0;
        else if (v > hi)
          v = hi;
      }
    }
    return v & widthMask(typeBytes(dst));
  }
  if (srcF && !dstF) {
    double v =
        srcType == Type::kF32 ? static_cast<double>(inF32(src, flags)) : toDouble(src, srcType);
    return floatToInt(v, r, dst);
  }
  if (!srcF) {  // int -> float, rounding per .rn/.rz/.rm/.rp
    RoundingScope scope(r);
    bool s = isSigned(srcType);
    uint64_t v = extend(src, typeBytes(srcType), s);
    if (dst == Type::kF32) {
      float f = s ? static_cast<float>(static_cast<int64_t>(v)) : static_cast<float>(v);
      return finishF32(f, flags);
    }
    if (dst == Type::kF64) {
      double d = s ? static_cast<double>(static_cast<int64_t>(v)) : static_cast<double>(v);
      return finishF64(d, flags);
    }
    // f16/bf16: an int64 may not be exact in double; rare, accept one extra rounding.
    double d = s ? static_cast<double>(static_cast<int64_t>(v)) : static_cast<double>(v);
    return dst == Type::kF16 ? doubleToHalf(d, smallRounding(r))
                             : doubleToBfloat(d, smallRounding(r));
  }
  // float -> float
  double v =
      srcType == Type::kF32 ? static_cast<double>(inF32(src, flags)) : toDouble(src, srcType);
  bool integral = r == Round::kRNI || r == Round::kRZI || r == Round::kRMI || r == Round::kRPI;
  if (integral) {
    v = r == Round::kRNI   ? std::nearbyint(v)
        : r == Round::kRZI ? std::trunc(v)
        : r == Round::kRMI ? std::floor(v)
                           : std::ceil(v);
  }
  if (flags & kSat) v = std::isnan(v) ? 0.0 : v < 0 ? 0.0 : v > 1 ? 1.0 : v;
  if ((flags & kRelu) && !std::isnan(v) && v < 0) v = 0.0;
  switch (dst) {
    case Type::kF32: {
      float f;
      {
        RoundingScope scope(integral ? Round::kRN : r);
        f = static_cast<float>(v);
      }
      return finishF32(f, flags & ~kSat);
    }
    case Type::kF64:
      return finishF64(v, flags & ~kSat);
    case Type::kF16:
      return doubleToHalf(v, smallRounding(r));
    case Type::kBF16:
      return doubleToBfloat(v, smallRounding(r));
    default:
      return 0;
  }
}

// ---- bit manipulation ----------------------------------------------------------------------

template <class T>
T bitFieldExtract(T a, uint32_t b, uint32_t c) {
  using U = std::make_unsigned_t<T>;
  const unsigned msb = sizeof(T) * 8 - 1;
  unsigned pos = b & 0xff, len = c & 0xff;
  U ua = static_cast<U>(a);
  bool sbit = false;
  if (std::is_signed_v<T> && len != 0) {
    unsigned top = std::min(pos + len - 1, msb);
    sbit = (ua >> top) & 1;
  }
  U d = 0;
  for (unsigned i = 0; i <= msb; ++i) {
    bool bit = (i < len && pos + i <= msb) ? ((ua >> (pos + i)) & 1) : sbit;
    d |= static_cast<U>(bit) << i;
  }
  return static_cast<T>(d);
}

template <class U>
U bitFieldInsert(U a, U b, uint32_t c, uint32_t d) {
  const unsigned msb = sizeof(U) * 8 - 1;
  unsigned pos = c & 0xff, len = d & 0xff;
  U f = b;
  for (unsigned i = 0; i < len && pos + i <= msb; ++i) {
    U bit = static_cast<U>((a >> i) & 1);
    f = static_cast<U>((f & ~(U{1} << (pos + i))) | (bit << (pos + i)));
  }
  return f;
}

// bfind: position of the most significant non-sign bit, 0xffffffff when none.
template <class T>
uint32_t findMsb(T a, bool shiftAmount) {
  using U = std::make_unsigned_t<T>;
  const unsigned width = sizeof(T) * 8;
  U u = static_cast<U>(a);
  if (std::is_signed_v<T> && a < 0) u = static_cast<U>(~u);
  if (u == 0) return 0xffffffffu;
  uint32_t pos = width - 1 - static_cast<uint32_t>(std::countl_zero(u));
  return shiftAmount ? width - 1 - pos : pos;
}

inline uint32_t permute(uint32_t a, uint32_t b, uint32_t c, uint8_t mode) {
  uint64_t bytes = (static_cast<uint64_t>(b) << 32) | a;
  auto byteAt = [&](unsigned i) { return static_cast<uint32_t>((bytes >> (8 * (i & 7))) & 0xff); };
  uint32_t d = 0;
  if (mode == 0) {  // default: selector nibbles, bit 3 replicates the sign
    for (unsigned i = 0; i < 4; ++i) {
      unsigned sel = (c >> (4 * i)) & 0xf;
      uint32_t v = byteAt(sel & 7);
      if (sel & 8) v = (v & 0x80) ? 0xff : 0;
      d |= v << (8 * i);
    }
    return d;
  }
  unsigned s = c & 3;
  unsigned idx[4];
  switch (mode) {
    case 1:
      idx[0] = s;
      idx[1] = s + 1;
      idx[2] = s + 2;
      idx[3] = s + 3;
      break;  // f4e
    case 2:
      idx[0] = s;
      idx[1] = (s + 7) & 7;
      idx[2] = (s + 6) & 7;
      idx[3] = (s + 5) & 7;
      break;  // b4e
    case 3:
      idx[0] = idx[1] = idx[2] = idx[3] = s;
      break;  // rc8
    case 4:
      idx[0] = s;
      idx[1] = s > 1 ? s : 1;
      idx[2] = s > 2 ? s : 2;
      idx[3] = 3;
      break;  // ecl
    case 5:
      idx[0] = 0;
      idx[1] = s < 1 ? s : 1;
      idx[2] = s < 2 ? s : 2;
      idx[3] = s;
      break;    // ecr
    default: {  // rc16
      unsigned h = (c & 1) * 2;
      idx[0] = h;
      idx[1] = h + 1;
      idx[2] = h;
      idx[3] = h + 1;
      break;
    }
  }
  for (unsigned i = 0; i < 4; ++i) d |= byteAt(idx[i] & 7) << (8 * i);
  return d;
}

// bmsk: a mask of b ones starting at bit a. .wrap takes both operands modulo 32; .clamp gives 0
// for a >= 32 and all bits from a upwards for b >= 32 (PTX ISA, "bmsk").
inline uint32_t bitMask(uint32_t a, uint32_t b, bool clamp) {
  const uint32_t start = a & 31, width = b & 31, end = start + width;
  uint32_t low = ~0u << start;
  if (clamp && a >= 32) low = 0;
  const bool widthOverflow = clamp && b >= 32;
  uint32_t high = width == 0 ? ~0u : ~0u << (end & 31);
  if (end >= 32 || widthOverflow) high = 0;
  return low & ~high;
}

inline uint32_t funnelShift(uint32_t a, uint32_t b, uint32_t c, bool left, bool wrap) {
  uint32_t n = wrap ? (c & 31) : (c > 32 ? 32 : c);
  uint64_t both = (static_cast<uint64_t>(b) << 32) | a;
  if (left) return static_cast<uint32_t>((both << n) >> 32);
  return static_cast<uint32_t>(both >> n);
}

// lop3: bit i of the result is bit (a_i << 2 | b_i << 1 | c_i) of the lookup table.
inline uint32_t logicOp3(uint32_t a, uint32_t b, uint32_t c, uint32_t lut) {
  uint32_t r = 0;
  for (uint32_t i = 0; i < 8; ++i)
    if ((lut >> i) & 1) r |= ((i & 4) ? a : ~a) & ((i & 2) ? b : ~b) & ((i & 1) ? c : ~c);
  return r;
}

// Byte k (or halfword k) of a 32-bit word, sign- or zero-extended.
inline int64_t packedPart(uint32_t word, unsigned k, unsigned bits, bool isSigned) {
  const uint32_t part = (word >> (k * bits)) & ((1u << bits) - 1);
  if (!isSigned) return part;
  return static_cast<int64_t>(part) - ((part >> (bits - 1)) ? (int64_t{1} << bits) : 0);
}

// dp4a: c plus the four byte products; dp2a: c plus two halfword-by-byte products, taking
// b's low (bytes 0, 1) or high (bytes 2, 3) pair. The sum wraps to 32 bits.
inline uint32_t dotProduct4(uint32_t a, bool aSigned, uint32_t b, bool bSigned, uint32_t c) {
  int64_t sum = 0;
  for (unsigned k = 0; k < 4; ++k)
    sum += packedPart(a, k, 8, aSigned) * packedPart(b, k, 8, bSigned);
  return c + static_cast<uint32_t>(sum);
}
inline uint32_t dotProduct2(uint32_t a, bool aSigned, uint32_t b, bool bSigned, bool high,
                            uint32_t c) {
  const unsigned first = high ? 2 : 0;
  int64_t sum = packedPart(a, 0, 16, aSigned) * packedPart(b, first, 8, bSigned) +
                packedPart(a, 1, 16, aSigned) * packedPart(b, first + 1, 8, bSigned);
  return c + static_cast<uint32_t>(sum);
}

// fns: the position of the |offset|-th set bit of mask counting from base toward the MSB
// (offset > 0) or the LSB (offset < 0); offset 0 asks whether bit base is set. 0xffffffff when
// there is no such bit.
inline uint32_t findNthSet(uint32_t mask, uint32_t base, int32_t offset) {
  if (offset == 0) return base < 32 && ((mask >> base) & 1) ? base : 0xffffffffu;
  int64_t count = offset > 0 ? int64_t{offset} - 1 : -int64_t{offset} - 1;
  const int inc = offset > 0 ? 1 : -1;
  for (int64_t pos = base; pos >= 0 && pos < 32; pos += inc) {
    if ((mask >> pos) & 1) {
      if (count == 0) return static_cast<uint32_t>(pos);
      --count;
    }
  }
  return 0xffffffffu;
}

// fp8 (e4m3: bias 7, no infinities, NaN 0x7f, largest 448; e5m2: bias 15, IEEE-like, largest
// 57344), rounded to nearest even and saturated to the largest finite magnitude. NaN gives 0x7f.
inline uint8_t toFp8(double x, bool e4m3, bool relu) {
  if (std::isnan(x)) return 0x7f;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  if (relu && sign) return 0;
  const int manBits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15;
  const double largest = e4m3 ? 448.0 : 57344.0;
  double m = std::fabs(x);
  if (m == 0) return sign;
  const int minExp = 1 - bias;
  int e;
  std::frexp(m, &e);  // m = f * 2^e, f in [0.5, 1): the leading bit is 2^(e-1)
  const int exp = std::max(e - 1, minExp);
  const double quantum = std::ldexp(1.0, exp - manBits);
  double rounded = std::nearbyint(m / quantum) * quantum;  // ties to even (default mode)
  if (rounded > largest) rounded = largest;
  std::frexp(rounded, &e);
  if (rounded < std::ldexp(1.0, minExp))  // subnormal (or zero)
    return sign | static_cast<uint8_t>(rounded / std::ldexp(1.0, minExp - manBits));
  const int field = e - 1 + bias;
  const auto mantissa =
      static_cast<uint8_t>(rounded / std::ldexp(1.0, e - 1 - manBits) - (1 << manBits));
  return sign | static_cast<uint8_t>(field << manBits) | mantissa;
}

inline double fromFp8(uint8_t v, bool e4m3) {
  const int manBits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15, expBits = e4m3 ? 4 : 5;
  const double sign = (v & 0x80) ? -1.0 : 1.0;
  const int field = (v >> manBits) & ((1 << expBits) - 1);
  const int mantissa = v & ((1 << manBits) - 1);
  if (e4m3 && field == 15 && mantissa == 7) return std::nan("");
  if (!e4m3 && field == 31) return mantissa ? std::nan("") : sign * INFINITY;
  if (field == 0) return sign * std::ldexp(mantissa, 1 - bias - manBits);
  return sign * std::ldexp(mantissa + (1 << manBits), field - bias - manBits);
}

}  // namespace gpupool::ptx::scalar
