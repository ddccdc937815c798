// Semantics of the non-control instructions for the lanes of one scheduled group: moves,
// loads/stores, conversions, integer/float arithmetic, comparisons, atomics.
#include <atomic>

#include "block_runner.h"

namespace gpupool::ptx::execution {

template <class Fn>
void BlockRunner::floatBinary(const Instr& in, uint32_t exec, Fn fn) {
  RoundingScope scope(in.round);
  const Operand &d = in.ops[0], &A = in.ops[1], &B = in.ops[2];
  switch (in.type) {
    case Type::F32:
      forLanes(exec, [&](int l) {
        set(d, l,
            finishF32(fn(inF32(value(A, l), in.flags), inF32(value(B, l), in.flags)), in.flags));
      });
      break;
    case Type::F64:
      forLanes(exec, [&](int l) {
        set(d, l, finishF64(fn(f64(value(A, l)), f64(value(B, l))), in.flags));
      });
      break;
    case Type::F16:
    case Type::BF16:
      forLanes(exec, [&](int l) {
        set(d, l,
            halfResult(fn(toDouble(value(A, l), in.type), toDouble(value(B, l), in.type)), in.type,
                       in.flags));
      });
      break;
    case Type::F16x2:
    case Type::BF16x2: {
      Type h = in.type == Type::F16x2 ? Type::F16 : Type::BF16;
      forLanes(exec, [&](int l) {
        uint64_t a = value(A, l), b = value(B, l), r = 0;
        for (int k = 0; k < 2; ++k)
          r |= halfResult(fn(toDouble(a >> (16 * k), h), toDouble(b >> (16 * k), h)), h, in.flags)
               << (16 * k);
        set(d, l, r);
      });
      break;
    }
    default:
      break;
  }
}

template <class Fn>
void BlockRunner::floatUnary(const Instr& in, uint32_t exec, Fn fn) {
  RoundingScope scope(in.round);
  const Operand &d = in.ops[0], &A = in.ops[1];
  switch (in.type) {
    case Type::F32:
      forLanes(exec,
               [&](int l) { set(d, l, finishF32(fn(inF32(value(A, l), in.flags)), in.flags)); });
      break;
    case Type::F64:
      forLanes(exec, [&](int l) { set(d, l, finishF64(fn(f64(value(A, l))), in.flags)); });
      break;
    case Type::F16:
    case Type::BF16:
      forLanes(exec, [&](int l) {
        set(d, l, halfResult(fn(toDouble(value(A, l), in.type)), in.type, in.flags));
      });
      break;
    case Type::F16x2:
    case Type::BF16x2: {
      Type h = in.type == Type::F16x2 ? Type::F16 : Type::BF16;
      forLanes(exec, [&](int l) {
        uint64_t a = value(A, l), r = 0;
        for (int k = 0; k < 2; ++k)
          r |= halfResult(fn(toDouble(a >> (16 * k), h)), h, in.flags) << (16 * k);
        set(d, l, r);
      });
      break;
    }
    default:
      break;
  }
}

namespace {

uint64_t atomicCombine(const Instr& in, uint64_t old, uint64_t b, uint64_t c) {
  const Type t = in.type;
  const unsigned bytes = typeBytes(t);
  const uint64_t m = widthMask(bytes);
  auto sext = [&](uint64_t v) { return static_cast<int64_t>(extend(v, bytes, true)); };
  switch (static_cast<AtomOp>(in.mode)) {
    case AtomOp::Add:
      switch (t) {
        case Type::F32:
          return bits(f32(old) + f32(b));
        case Type::F64:
          return bits(f64(old) + f64(b));
        case Type::F16:
          return doubleToHalf(halfToDouble(static_cast<uint16_t>(old)) +
                              halfToDouble(static_cast<uint16_t>(b)));
        case Type::BF16:
          return doubleToBfloat(bfloatToDouble(static_cast<uint16_t>(old)) +
                                bfloatToDouble(static_cast<uint16_t>(b)));
        case Type::F16x2:
        case Type::BF16x2: {
          uint64_t r = 0;
          for (int k = 0; k < 2; ++k) {
            uint16_t x = static_cast<uint16_t>(old >> (16 * k)),
                     y = static_cast<uint16_t>(b >> (16 * k));
            uint16_t s = t == Type::F16x2 ? doubleToHalf(halfToDouble(x) + halfToDouble(y))
                                          : doubleToBfloat(bfloatToDouble(x) + bfloatToDouble(y));
            r |= uint64_t{s} << (16 * k);
          }
          return r;
        }
        default:
          return (old + b) & m;
      }
    case AtomOp::Min:
      if (t == Type::F32) return bits(floatMin(f32(old), f32(b)));
      if (t == Type::F64) return bits(floatMin(f64(old), f64(b)));
      if (isSigned(t)) return sext(old) < sext(b) ? old : b & m;
      return (old & m) < (b & m) ? old : b & m;
    case AtomOp::Max:
      if (t == Type::F32) return bits(floatMax(f32(old), f32(b)));
      if (t == Type::F64) return bits(floatMax(f64(old), f64(b)));
      if (isSigned(t)) return sext(old) > sext(b) ? old : b & m;
      return (old & m) > (b & m) ? old : b & m;
    case AtomOp::Inc:
      return (old & m) >= (b & m) ? 0 : (old + 1) & m;
    case AtomOp::Dec:
      return ((old & m) == 0 || (old & m) > (b & m)) ? b & m : (old - 1) & m;
    case AtomOp::And:
      return old & b & m;
    case AtomOp::Or:
      return (old | b) & m;
    case AtomOp::Xor:
      return (old ^ b) & m;
    case AtomOp::Exch:
      return b & m;
    case AtomOp::Cas:
      return (old & m) == (b & m) ? c & m : old;
  }
  return old;
}

template <class U>
uint64_t atomicUpdate(uint8_t* p, const Instr& in, uint64_t b, uint64_t c) {
  U* q = reinterpret_cast<U*>(p);
  U old = __atomic_load_n(q, __ATOMIC_RELAXED);
  while (true) {
    U next = static_cast<U>(atomicCombine(in, old, b, c));
    if (__atomic_compare_exchange_n(q, &old, next, true, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
      return old;
  }
}

}  // namespace

void BlockRunner::atomic(const Instr& in, uint32_t exec) {
  const bool isRed = in.op == Op::Red;
  const Operand& addrOp = in.ops[isRed ? 0 : 1];
  const Operand& bOp = in.ops[isRed ? 1 : 2];
  const unsigned bytes = typeBytes(in.type);
  forLanes(exec, [&](int l) {
    uint64_t addr = address(addrOp, l);
    if (addr % bytes) fault(CUDA_ERROR_MISALIGNED_ADDRESS, l, curPc_, "misaligned atomic address");
    uint8_t* p = access(in.space, addr, bytes, l);
    uint64_t b = value(bOp, l);
    uint64_t c = (!isRed && in.numOps > 3) ? value(in.ops[3], l) : 0;
    uint64_t old = bytes == 2   ? atomicUpdate<uint16_t>(p, in, b, c)
                   : bytes == 4 ? atomicUpdate<uint32_t>(p, in, b, c)
                                : atomicUpdate<uint64_t>(p, in, b, c);
    if (!isRed) set(in.ops[0], l, old);
  });
}

void BlockRunner::integerOp(const Instr& in, uint32_t exec) {
  const Operand &d = in.ops[0], &A = in.ops[1], &B = in.ops[2], &C = in.ops[3];
  const bool cc = in.flags & kCC;
  const bool isPred = in.type == Type::Pred;
  withIntType(in.type, [&](auto tag) {
    using T = decltype(tag);
    using U = std::make_unsigned_t<T>;
    constexpr unsigned W = sizeof(T) * 8;
    using Wide = std::conditional_t<W == 64, unsigned __int128, uint64_t>;
    auto get = [&](const Operand& o, int l) { return static_cast<T>(value(o, l)); };
    auto put = [&](int l, T v) { set(d, l, raw<T>(v)); };
    switch (in.op) {
      case Op::Add:
        forLanes(exec, [&](int l) {
          T a = get(A, l), b = get(B, l);
          U r = static_cast<U>(static_cast<U>(a) + static_cast<U>(b));
          if constexpr (std::is_same_v<T, int32_t>) {
            if (in.flags & kSat) {
              int64_t s = int64_t{a} + b;
              r = static_cast<U>(static_cast<T>(s > INT32_MAX   ? INT32_MAX
                                                : s < INT32_MIN ? INT32_MIN
                                                                : s));
            }
          }
          if (cc) w_->carry[l] = r < static_cast<U>(a);
          put(l, static_cast<T>(r));
        });
        break;
      case Op::Sub:
        forLanes(exec, [&](int l) {
          T a = get(A, l), b = get(B, l);
          U r = static_cast<U>(static_cast<U>(a) - static_cast<U>(b));
          if constexpr (std::is_same_v<T, int32_t>) {
            if (in.flags & kSat) {
              int64_t s = int64_t{a} - b;
              r = static_cast<U>(static_cast<T>(s > INT32_MAX   ? INT32_MAX
                                                : s < INT32_MIN ? INT32_MIN
                                                                : s));
            }
          }
          if (cc) w_->carry[l] = static_cast<U>(a) < static_cast<U>(b);
          put(l, static_cast<T>(r));
        });
        break;
      case Op::Addc:
        forLanes(exec, [&](int l) {
          Wide s = Wide{static_cast<U>(get(A, l))} + static_cast<U>(get(B, l)) + w_->carry[l];
          if (cc) w_->carry[l] = static_cast<uint8_t>(s >> W);
          put(l, static_cast<T>(static_cast<U>(s)));
        });
        break;
      case Op::Subc:
        forLanes(exec, [&](int l) {
          Wide a = static_cast<U>(get(A, l)), b = Wide{static_cast<U>(get(B, l))} + w_->carry[l];
          if (cc) w_->carry[l] = a < b;
          put(l, static_cast<T>(static_cast<U>(a - b)));
        });
        break;
      case Op::Mul:
      case Op::Mad:
      case Op::Madc:
        forLanes(exec, [&](int l) {
          T a = get(A, l), b = get(B, l);
          if ((in.flags & kWide) && W <= 32) {
            using WT = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
            WT p = static_cast<WT>(a) * static_cast<WT>(b);
            if (in.op != Op::Mul)
              p += static_cast<WT>(extend(value(C, l), 2 * W / 8, std::is_signed_v<T>));
            set(d, l, static_cast<uint64_t>(p) & widthMask(2 * W / 8));
            return;
          }
          U part = (in.flags & kHi) ? static_cast<U>(mulHi<T>(a, b))
                                    : static_cast<U>(static_cast<U>(a) * static_cast<U>(b));
          if (in.op == Op::Mul) {
            put(l, static_cast<T>(part));
            return;
          }
          U c = static_cast<U>(get(C, l));
          Wide s = Wide{part} + c + (in.op == Op::Madc ? w_->carry[l] : 0);
          if (cc) w_->carry[l] = static_cast<uint8_t>(s >> W);
          put(l, static_cast<T>(static_cast<U>(s)));
        });
        break;
      case Op::Mul24:
      case Op::Mad24:
        forLanes(exec, [&](int l) {
          int64_t a = static_cast<int64_t>(extend(value(A, l), 3, std::is_signed_v<T>));
          int64_t b = static_cast<int64_t>(extend(value(B, l), 3, std::is_signed_v<T>));
          int64_t p = a * b;
          uint32_t r = (in.flags & kHi) ? static_cast<uint32_t>(p >> 16) : static_cast<uint32_t>(p);
          if (in.op == Op::Mad24) r += static_cast<uint32_t>(value(C, l));
          set(d, l, r);
        });
        break;
      case Op::Sad:
        forLanes(exec, [&](int l) {
          T a = get(A, l), b = get(B, l);
          U diff = a > b ? static_cast<U>(static_cast<U>(a) - static_cast<U>(b))
                         : static_cast<U>(static_cast<U>(b) - static_cast<U>(a));
          put(l, static_cast<T>(static_cast<U>(diff + static_cast<U>(get(C, l)))));
        });
        break;
      case Op::Div:
        forLanes(exec, [&](int l) { put(l, intDiv<T>(get(A, l), get(B, l))); });
        break;
      case Op::Rem:
        forLanes(exec, [&](int l) { put(l, intRem<T>(get(A, l), get(B, l))); });
        break;
      case Op::Min:
        forLanes(exec, [&](int l) { put(l, std::min(get(A, l), get(B, l))); });
        break;
      case Op::Max:
        forLanes(exec, [&](int l) { put(l, std::max(get(A, l), get(B, l))); });
        break;
      case Op::Neg:
        forLanes(exec, [&](int l) {
          put(l, static_cast<T>(static_cast<U>(0 - static_cast<U>(get(A, l)))));
        });
        break;
      case Op::Abs:
        forLanes(exec, [&](int l) {
          T a = get(A, l);
          put(l, a < 0 ? static_cast<T>(static_cast<U>(0 - static_cast<U>(a))) : a);
        });
        break;
      case Op::And:
        forLanes(exec, [&](int l) { put(l, static_cast<T>(get(A, l) & get(B, l))); });
        break;
      case Op::Or:
        forLanes(exec, [&](int l) { put(l, static_cast<T>(get(A, l) | get(B, l))); });
        break;
      case Op::Xor:
        forLanes(exec, [&](int l) { put(l, static_cast<T>(get(A, l) ^ get(B, l))); });
        break;
      case Op::Not:
        forLanes(exec, [&](int l) {
          put(l, isPred ? static_cast<T>((get(A, l) & 1) ^ 1) : static_cast<T>(~get(A, l)));
        });
        break;
      case Op::Cnot:
        forLanes(exec, [&](int l) { put(l, static_cast<T>(get(A, l) == 0 ? 1 : 0)); });
        break;
      case Op::Shl:
        forLanes(exec, [&](int l) {
          uint32_t n = static_cast<uint32_t>(value(B, l));
          put(l, n >= W ? T{0} : static_cast<T>(static_cast<U>(static_cast<U>(get(A, l)) << n)));
        });
        break;
      case Op::Shr:
        forLanes(exec, [&](int l) {
          uint32_t n = static_cast<uint32_t>(value(B, l));
          T a = get(A, l);
          if constexpr (std::is_signed_v<T>)
            put(l, n >= W ? static_cast<T>(a < 0 ? -1 : 0) : static_cast<T>(a >> n));
          else
            put(l, n >= W ? T{0} : static_cast<T>(a >> n));
        });
        break;
      case Op::Popc:
        forLanes(exec, [&](int l) {
          set(d, l, static_cast<uint32_t>(std::popcount(static_cast<U>(get(A, l)))));
        });
        break;
      case Op::Clz:
        forLanes(exec, [&](int l) {
          set(d, l, static_cast<uint32_t>(std::countl_zero(static_cast<U>(get(A, l)))));
        });
        break;
      case Op::Brev:
        forLanes(exec, [&](int l) {
          U a = static_cast<U>(get(A, l)), r = 0;
          for (unsigned i = 0; i < W; ++i) r = static_cast<U>(r | (((a >> i) & 1) << (W - 1 - i)));
          put(l, static_cast<T>(r));
        });
        break;
      case Op::Bfind:
        forLanes(exec, [&](int l) { set(d, l, findMsb<T>(get(A, l), in.flags & kShiftAmt)); });
        break;
      case Op::Bfe:
        forLanes(exec, [&](int l) {
          put(l, bitFieldExtract<T>(get(A, l), static_cast<uint32_t>(value(B, l)),
                                    static_cast<uint32_t>(value(C, l))));
        });
        break;
      case Op::Bfi:
        forLanes(exec, [&](int l) {
          put(l,
              static_cast<T>(bitFieldInsert<U>(static_cast<U>(get(A, l)), static_cast<U>(get(B, l)),
                                               static_cast<uint32_t>(value(C, l)),
                                               static_cast<uint32_t>(value(in.ops[4], l)))));
        });
        break;
      case Op::Prmt:
        forLanes(exec, [&](int l) {
          set(d, l,
              permute(static_cast<uint32_t>(value(A, l)), static_cast<uint32_t>(value(B, l)),
                      static_cast<uint32_t>(value(C, l)), in.mode));
        });
        break;
      case Op::Bmsk:
        forLanes(exec, [&](int l) {
          set(d, l,
              bitMask(static_cast<uint32_t>(value(A, l)), static_cast<uint32_t>(value(B, l)),
                      in.flags & kClamp));
        });
        break;
      case Op::Shf:
        forLanes(exec, [&](int l) {
          set(d, l,
              funnelShift(static_cast<uint32_t>(value(A, l)), static_cast<uint32_t>(value(B, l)),
                          static_cast<uint32_t>(value(C, l)), in.flags & kLeft, in.flags & kWrap));
        });
        break;
      default:
        break;
    }
  });
}

void BlockRunner::executeSimple(const Instr& in, uint32_t exec, uint32_t group) {
  const Operand& d = in.ops[0];
  switch (in.op) {
    case Op::Mov: {
      const Operand& s = in.ops[1];
      const unsigned bytes = typeBytes(in.type);
      if (d.kind == OperandKind::Vector) {  // unpack
        const unsigned eb = bytes * 8 / d.count;
        forLanes(exec, [&](int l) {
          uint64_t v = value(s, l);
          for (unsigned k = 0; k < d.count; ++k)
            set(element(d, k), l, (v >> (k * eb)) & widthMask(eb / 8));
        });
      } else if (s.kind == OperandKind::Vector) {  // pack
        const unsigned eb = bytes * 8 / s.count;
        forLanes(exec, [&](int l) {
          uint64_t v = 0;
          for (unsigned k = 0; k < s.count; ++k)
            v |= (value(element(s, k), l) & widthMask(eb / 8)) << (k * eb);
          set(d, l, v);
        });
      } else {
        const uint64_t m = widthMask(bytes);
        forLanes(exec, [&](int l) { set(d, l, value(s, l) & m); });
      }
      return;
    }
    case Op::Ld: {
      const unsigned eb = typeBytes(in.type), n = in.vec;
      const bool sgn = isSigned(in.type);
      forLanes(exec, [&](int l) {
        const uint8_t* p = access(in.space, address(in.ops[1], l), uint64_t{eb} * n, l);
        for (unsigned k = 0; k < n; ++k) {
          uint64_t v = 0;
          std::memcpy(&v, p + k * eb, eb);
          set(n == 1 ? d : element(d, k), l, extend(v, eb, sgn));
        }
      });
      return;
    }
    case Op::St: {
      const unsigned eb = typeBytes(in.type), n = in.vec;
      const Operand& s = in.ops[1];
      forLanes(exec, [&](int l) {
        uint8_t* p = access(in.space, address(d, l), uint64_t{eb} * n, l);
        for (unsigned k = 0; k < n; ++k) {
          uint64_t v = value(n == 1 ? s : element(s, k), l);
          std::memcpy(p + k * eb, &v, eb);
        }
      });
      return;
    }
    case Op::Cvt:
      if (in.type == Type::F16x2 || in.type == Type::BF16x2) {
        Type h = in.type == Type::F16x2 ? Type::F16 : Type::BF16;
        forLanes(exec, [&](int l) {
          uint64_t hi = convert(value(in.ops[1], l), h, in.type2, in.round, in.flags);
          uint64_t lo = convert(value(in.ops[2], l), h, in.type2, in.round, in.flags);
          set(d, l, (hi << 16) | lo);
        });
      } else {
        forLanes(exec, [&](int l) {
          set(d, l, convert(value(in.ops[1], l), in.type, in.type2, in.round, in.flags));
        });
      }
      return;
    case Op::Cvta:
    case Op::CvtaTo: {
      const bool to = in.op == Op::CvtaTo;
      uint64_t window = in.space == Space::Shared  ? kSharedWindow
                        : in.space == Space::Local ? kLocalWindow
                                                   : 0;
      forLanes(exec, [&](int l) {
        uint64_t v = value(in.ops[1], l);
        if (window)
          v = to ? (v >= window && v < window + kWindowSize ? v - window : v)
                 : (v & 0xffffffffu) + window;
        set(d, l, v & widthMask(typeBytes(in.type)));
      });
      return;
    }
    case Op::Isspacep:
      forLanes(exec, [&](int l) {
        uint64_t v = value(in.ops[1], l);
        bool r;
        switch (in.space) {
          case Space::Shared:
            r = v >= kSharedWindow && v < kSharedWindow + kWindowSize;
            break;
          case Space::Local:
            r = v >= kLocalWindow && v < kLocalWindow + kWindowSize;
            break;
          case Space::Param:
            r = v >= kParamWindow && v < kParamWindow + kWindowSize;
            break;
          default:
            r = v < kSharedWindow || v >= kWindowsEnd ||
                (v >= kHeapWindow && v < kHeapWindow + kWindowSize);
            break;
        }
        set(d, l, r);
      });
      return;
    case Op::Selp:
      forLanes(exec, [&](int l) {
        set(d, l, (value(in.ops[3], l) & 1) ? value(in.ops[1], l) : value(in.ops[2], l));
      });
      return;
    case Op::Setp: {
      const CmpOp cmp = static_cast<CmpOp>(in.mode);
      forLanes(exec, [&](int l) {
        uint64_t a = value(in.ops[1], l), b = value(in.ops[2], l);
        bool r = false, r2 = false;
        bool pair = false;
        switch (in.type) {
          case Type::F32:
            r = floatCompare(cmp, inF32(a, in.flags), inF32(b, in.flags));
            break;
          case Type::F64:
            r = floatCompare(cmp, f64(a), f64(b));
            break;
          case Type::F16:
          case Type::BF16:
            r = floatCompare(cmp, toDouble(a, in.type), toDouble(b, in.type));
            break;
          case Type::F16x2:
          case Type::BF16x2: {
            Type h = in.type == Type::F16x2 ? Type::F16 : Type::BF16;
            r = floatCompare(cmp, toDouble(a, h), toDouble(b, h));
            r2 = floatCompare(cmp, toDouble(a >> 16, h), toDouble(b >> 16, h));
            pair = true;
            break;
          }
          default:
            withIntType(in.type, [&](auto tag) {
              using T = decltype(tag);
              r = intCompare<T>(cmp, static_cast<T>(a), static_cast<T>(b));
            });
        }
        if (pair) {
          set(d, l, r);
          set(in.ops[5], l, r2);
          return;
        }
        bool q = !r;
        if (in.boolOp != BoolOp::None) {
          bool c = value(in.ops[3], l) & 1;
          auto combine = [&](bool x) {
            return in.boolOp == BoolOp::And  ? (x && c)
                   : in.boolOp == BoolOp::Or ? (x || c)
                                             : (x != c);
          };
          r = combine(r);
          q = combine(q);
        }
        set(d, l, r);
        set(in.ops[5], l, q);
      });
      return;
    }
    case Op::Activemask:
      forLanes(exec, [&](int l) { set(d, l, group); });
      return;
    case Op::Atom:
    case Op::Red:
      atomic(in, exec);
      return;
    case Op::Membar:
      std::atomic_thread_fence(std::memory_order_seq_cst);
      return;
    case Op::Nop:
      return;
    case Op::CpAsync:
      forLanes(exec, [&](int l) {
        uint64_t size = value(in.ops[2], l);
        uint64_t srcSize = in.numOps > 3 ? std::min(value(in.ops[3], l), size) : size;
        uint8_t* dst = access(Space::Shared, address(in.ops[0], l), size, l);
        if (srcSize)
          std::memcpy(dst, access(Space::Global, address(in.ops[1], l), srcSize, l), srcSize);
        std::memset(dst + srcSize, 0, size - srcSize);
      });
      return;
    case Op::Testp: {
      const TestpOp t = static_cast<TestpOp>(in.mode);
      forLanes(exec, [&](int l) {
        double v = in.type == Type::F32 ? static_cast<double>(f32(value(in.ops[1], l)))
                                        : f64(value(in.ops[1], l));
        int cls =
            in.type == Type::F32 ? std::fpclassify(f32(value(in.ops[1], l))) : std::fpclassify(v);
        bool r = t == TestpOp::Finite       ? std::isfinite(v)
                 : t == TestpOp::Infinite   ? std::isinf(v)
                 : t == TestpOp::Number     ? !std::isnan(v)
                 : t == TestpOp::NotANumber ? std::isnan(v)
                 : t == TestpOp::Normal     ? cls == FP_NORMAL
                                            : cls == FP_SUBNORMAL;
        set(d, l, r);
      });
      return;
    }
    case Op::Copysign:
      forLanes(exec, [&](int l) {
        uint64_t a = value(in.ops[1], l), b = value(in.ops[2], l);
        uint64_t sign = in.type == Type::F32 ? 0x80000000ull : 0x8000000000000000ull;
        set(d, l, (b & ~sign & widthMask(typeBytes(in.type))) | (a & sign));
      });
      return;
    default:
      break;
  }
  if (!isFloat(in.type)) {
    integerOp(in, exec);
    return;
  }
  switch (in.op) {
    case Op::Add:
      floatBinary(in, exec, [](auto a, auto b) { return a + b; });
      return;
    case Op::Sub:
      floatBinary(in, exec, [](auto a, auto b) { return a - b; });
      return;
    case Op::Mul:
      floatBinary(in, exec, [](auto a, auto b) { return a * b; });
      return;
    case Op::Div:
      floatBinary(in, exec, [](auto a, auto b) { return a / b; });
      return;
    case Op::Min:
      floatBinary(in, exec, [](auto a, auto b) { return floatMin(a, b); });
      return;
    case Op::Max:
      floatBinary(in, exec, [](auto a, auto b) { return floatMax(a, b); });
      return;
    case Op::Fma:
    case Op::Mad: {
      RoundingScope scope(in.round);
      const Operand &A = in.ops[1], &B = in.ops[2], &C = in.ops[3];
      switch (in.type) {
        case Type::F32:
          forLanes(exec, [&](int l) {
            set(d, l,
                finishF32(std::fma(inF32(value(A, l), in.flags), inF32(value(B, l), in.flags),
                                   inF32(value(C, l), in.flags)),
                          in.flags));
          });
          break;
        case Type::F64:
          forLanes(exec, [&](int l) {
            set(d, l,
                finishF64(std::fma(f64(value(A, l)), f64(value(B, l)), f64(value(C, l))),
                          in.flags));
          });
          break;
        default: {
          const bool pair = in.type == Type::F16x2 || in.type == Type::BF16x2;
          Type h = (in.type == Type::BF16 || in.type == Type::BF16x2) ? Type::BF16 : Type::F16;
          forLanes(exec, [&](int l) {
            uint64_t a = value(A, l), b = value(B, l), c = value(C, l), r = 0;
            for (int k = 0; k < (pair ? 2 : 1); ++k)
              r |= halfResult(std::fma(toDouble(a >> (16 * k), h), toDouble(b >> (16 * k), h),
                                       toDouble(c >> (16 * k), h)),
                              h, in.flags)
                   << (16 * k);
            set(d, l, r);
          });
        }
      }
      return;
    }
    case Op::Neg:
    case Op::Abs: {
      const unsigned bytes = typeBytes(in.type);
      const uint64_t sign = bytes == 8                           ? 0x8000000000000000ull
                            : bytes == 4 && in.type == Type::F32 ? 0x80000000ull
                            : in.type == Type::F16x2 || in.type == Type::BF16x2 ? 0x80008000ull
                                                                                : 0x8000ull;
      forLanes(exec, [&](int l) {
        uint64_t a = value(in.ops[1], l);
        if (in.type == Type::F32 && (in.flags & kFtz)) a = bits(flush(f32(a)));
        set(d, l, in.op == Op::Neg ? a ^ sign : a & ~sign);
      });
      return;
    }
    case Op::Sqrt:
      floatUnary(in, exec, [](auto a) { return std::sqrt(a); });
      return;
    case Op::Rcp:
      floatUnary(in, exec, [](auto a) { return decltype(a){1} / a; });
      return;
    case Op::Rsqrt:
      floatUnary(in, exec, [](auto a) { return decltype(a){1} / std::sqrt(a); });
      return;
    case Op::Ex2:
      floatUnary(in, exec, [](auto a) { return std::exp2(a); });
      return;
    case Op::Lg2:
      floatUnary(in, exec, [](auto a) { return std::log2(a); });
      return;
    case Op::Sin:
      floatUnary(in, exec, [](auto a) { return std::sin(a); });
      return;
    case Op::Cos:
      floatUnary(in, exec, [](auto a) { return std::cos(a); });
      return;
    case Op::Tanh:
      floatUnary(in, exec, [](auto a) { return std::tanh(a); });
      return;
    default:
      break;
  }
}

}  // namespace gpupool::ptx::execution
