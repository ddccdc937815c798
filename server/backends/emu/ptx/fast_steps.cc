// The fast steps (fast_steps.h). Each template mirrors one case of the generic path for one
// fixed form; chooseFastStep() accepts only forms whose generic semantics reduce to that case.
#include "fast_steps.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "block_runner.h"
#include "device_element_access.h"

namespace gpupool::ptx::execution {

struct FastSteps {
  // A source operand: a register's 32 lanes, or an immediate.
  struct Reg {
    const uint64_t* lanes;
    Reg(const uint64_t* registers, const Operand& o) : lanes(registers + size_t{o.index} * 32) {}
    uint64_t operator()(int l) const { return lanes[l]; }
  };
  struct Imm {
    uint64_t value;
    Imm(const uint64_t*, const Operand& o) : value(o.imm) {}
    uint64_t operator()(int) const { return value; }
  };

  // All 32 lanes in a loop the compiler can unroll and vectorize; otherwise lane by lane.
  template <class Body>
  static void lanes(uint32_t exec, Body&& body) {
    if (exec == 0xffffffffu) {
      for (int l = 0; l < 32; ++l) body(l);
    } else {
      forLanes(exec, body);
    }
  }

  static uint64_t* destination(BlockRunner& r, const Operand& d) {
    return r.R_ + size_t{d.index} * 32;
  }

  // ---- integers (integerOp's add, sub, mul.lo, mad.lo, mul.wide, logic, shifts, min, max) ----
  enum class IntOp : uint8_t {
    kAdd,
    kSub,
    kMul,
    kAnd,
    kOr,
    kXor,
    kShl,
    kShr,
    kMin,
    kMax,
    kDiv,
    kRem
  };

  template <class T, IntOp OP>
  static T intResult(T a, uint64_t bRaw) {
    using U = std::make_unsigned_t<T>;
    constexpr unsigned W = sizeof(T) * 8;
    const T b = static_cast<T>(bRaw);
    if constexpr (OP == IntOp::kAdd) return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    if constexpr (OP == IntOp::kSub) return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
    if constexpr (OP == IntOp::kMul) return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
    if constexpr (OP == IntOp::kAnd) return static_cast<T>(a & b);
    if constexpr (OP == IntOp::kOr) return static_cast<T>(a | b);
    if constexpr (OP == IntOp::kXor) return static_cast<T>(a ^ b);
    if constexpr (OP == IntOp::kShl) {
      const uint32_t n = static_cast<uint32_t>(bRaw);
      return n >= W ? T{0} : static_cast<T>(static_cast<U>(static_cast<U>(a) << n));
    }
    if constexpr (OP == IntOp::kShr) {
      const uint32_t n = static_cast<uint32_t>(bRaw);
      if constexpr (std::is_signed_v<T>)
        return n >= W ? static_cast<T>(a < 0 ? -1 : 0) : static_cast<T>(a >> n);
      else
        return n >= W ? T{0} : static_cast<T>(a >> n);
    }
    if constexpr (OP == IntOp::kMin) return std::min(a, b);
    if constexpr (OP == IntOp::kMax) return std::max(a, b);
    if constexpr (OP == IntOp::kDiv) return intDiv<T>(a, b);
    if constexpr (OP == IntOp::kRem) return intRem<T>(a, b);
  }

  template <class T, IntOp OP, class B>
  static void intBinary(BlockRunner& r, const Instr& in, uint32_t exec) {
    uint64_t* d = destination(r, in.ops[0]);
    const Reg a(r.R_, in.ops[1]);
    const B b(r.R_, in.ops[2]);
    if constexpr ((OP == IntOp::kDiv || OP == IntOp::kRem) && std::is_unsigned_v<T>) {
      // One power-of-two divisor for every lane (tid % (2 * stride)): a shift or a mask.
      const T divisor = static_cast<T>(b(std::countr_zero(exec)));
      if (std::has_single_bit(divisor)) {
        bool uniform = true;
        if constexpr (!std::is_same_v<B, Imm>)
          lanes(exec, [&](int l) { uniform &= static_cast<T>(b(l)) == divisor; });
        if (uniform) {
          const int shift = std::countr_zero(divisor);
          lanes(exec, [&](int l) {
            const T x = static_cast<T>(a(l));
            d[l] = raw<T>(OP == IntOp::kDiv ? static_cast<T>(x >> shift)
                                            : static_cast<T>(x & (divisor - 1)));
          });
          return;
        }
      }
    }
    lanes(exec, [&](int l) { d[l] = raw<T>(intResult<T, OP>(static_cast<T>(a(l)), b(l))); });
  }

  template <class T, class B, class C>
  static void madLo(BlockRunner& r, const Instr& in, uint32_t exec) {
    using U = std::make_unsigned_t<T>;
    uint64_t* d = destination(r, in.ops[0]);
    const Reg a(r.R_, in.ops[1]);
    const B b(r.R_, in.ops[2]);
    const C c(r.R_, in.ops[3]);
    lanes(exec, [&](int l) {
      d[l] = raw<U>(
          static_cast<U>(static_cast<U>(a(l)) * static_cast<U>(b(l)) + static_cast<U>(c(l))));
    });
  }

  template <class T, class B>
  static void mulWide(BlockRunner& r, const Instr& in, uint32_t exec) {
    using Wide = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
    uint64_t* d = destination(r, in.ops[0]);
    const Reg a(r.R_, in.ops[1]);
    const B b(r.R_, in.ops[2]);
    lanes(exec, [&](int l) {
      d[l] = static_cast<uint64_t>(static_cast<Wide>(static_cast<T>(a(l))) *
                                   static_cast<Wide>(static_cast<T>(b(l))));
    });
  }

  // ---- f32 (floatBinary and the fma/mad case, round to nearest, no .ftz/.sat) ----------------
  enum class FloatOp : uint8_t { kAdd, kSub, kMul };

  template <FloatOp OP, class A, class B>
  static void f32Binary(BlockRunner& r, const Instr& in, uint32_t exec) {
    uint64_t* d = destination(r, in.ops[0]);
    const A a(r.R_, in.ops[1]);
    const B b(r.R_, in.ops[2]);
    lanes(exec, [&](int l) {
      const float x = f32(a(l)), y = f32(b(l));
      if constexpr (OP == FloatOp::kAdd) d[l] = finishF32(x + y, 0);
      if constexpr (OP == FloatOp::kSub) d[l] = finishF32(x - y, 0);
      if constexpr (OP == FloatOp::kMul) d[l] = finishF32(x * y, 0);
    });
  }

  template <class A, class B, class C>
  static void f32Fma(BlockRunner& r, const Instr& in, uint32_t exec) {
    uint64_t* d = destination(r, in.ops[0]);
    const A a(r.R_, in.ops[1]);
    const B b(r.R_, in.ops[2]);
    const C c(r.R_, in.ops[3]);
    lanes(exec, [&](int l) { d[l] = finishF32(std::fma(f32(a(l)), f32(b(l)), f32(c(l))), 0); });
  }

  // The same where the host has FMA instructions (chosen at load): std::fma becomes one
  // instruction instead of a call into libm, with the same, exactly rounded, result.
  template <class A, class B, class C>
  __attribute__((target("fma"))) static void f32FmaInstruction(BlockRunner& r, const Instr& in,
                                                               uint32_t exec) {
    uint64_t* d = destination(r, in.ops[0]);
    const A a(r.R_, in.ops[1]);
    const B b(r.R_, in.ops[2]);
    const C c(r.R_, in.ops[3]);
    for (int l = 0; l < 32; ++l) {
      if (!((exec >> l) & 1)) continue;
      d[l] = finishF32(__builtin_fmaf(f32(a(l)), f32(b(l)), f32(c(l))), 0);
    }
  }

  // ---- setp (one or two predicate destinations, no boolean combination) ----------------------
  template <class T, CmpOp CMP, class B>
  static void setp(BlockRunner& r, const Instr& in, uint32_t exec) {
    uint64_t* d = destination(r, in.ops[0]);
    uint64_t* q = in.ops[5].kind == OperandKind::kReg ? destination(r, in.ops[5]) : nullptr;
    const Reg a(r.R_, in.ops[1]);
    const B b(r.R_, in.ops[2]);
    lanes(exec, [&](int l) {
      bool v;
      if constexpr (std::is_same_v<T, float>)
        v = floatCompare(CMP, f32(a(l)), f32(b(l)));
      else
        v = intCompare<T>(CMP, static_cast<T>(a(l)), static_cast<T>(b(l)));
      d[l] = v;
      if (q) q[l] = !v;
    });
  }

  // ---- selp, mov ------------------------------------------------------------------------------
  template <class A, class B>
  static void selp(BlockRunner& r, const Instr& in, uint32_t exec) {
    uint64_t* d = destination(r, in.ops[0]);
    const A a(r.R_, in.ops[1]);
    const B b(r.R_, in.ops[2]);
    const Reg c(r.R_, in.ops[3]);
    lanes(exec, [&](int l) { d[l] = (c(l) & 1) ? a(l) : b(l); });
  }

  template <class S>
  static void mov(BlockRunner& r, const Instr& in, uint32_t exec) {
    uint64_t* d = destination(r, in.ops[0]);
    const S s(r.R_, in.ops[1]);
    const uint64_t mask = widthMask(typeBytes(in.type));
    lanes(exec, [&](int l) { d[l] = s(l) & mask; });
  }

  // cvta/cvta.to of a register (executeSimple's kCvta case): generic addresses of shared and
  // local memory are their windows' addresses; global ones are the addresses themselves.
  template <Space SP, bool TO>
  static void cvta(BlockRunner& r, const Instr& in, uint32_t exec) {
    uint64_t* d = destination(r, in.ops[0]);
    const Reg a(r.R_, in.ops[1]);
    const uint64_t mask = widthMask(typeBytes(in.type));
    constexpr uint64_t window = cvtaWindow(SP);
    lanes(exec, [&](int l) { d[l] = cvtaAddress(a(l), window, TO) & mask; });
  }

  // mov of a special register that differs by lane (BlockRunner::special, its switch folded).
  template <Special S>
  static void moveSpecial(BlockRunner& r, const Instr& in, uint32_t exec) {
    uint64_t* d = destination(r, in.ops[0]);
    const uint64_t mask = widthMask(typeBytes(in.type));
    lanes(exec, [&](int l) { d[l] = r.special(static_cast<uint32_t>(S), l) & mask; });
  }
  // The same for the ones every thread of the block reads alike.
  static void moveUniformSpecial(BlockRunner& r, const Instr& in, uint32_t exec) {
    uint64_t* d = destination(r, in.ops[0]);
    const uint64_t v =
        r.special(in.ops[1].index, std::countr_zero(exec)) & widthMask(typeBytes(in.type));
    lanes(exec, [&](int l) { d[l] = v; });
  }

  static FastStep chooseSpecial(const Instr& in) {
    switch (static_cast<Special>(in.ops[1].index)) {
      case Special::kTidX:
        return &moveSpecial<Special::kTidX>;
      case Special::kTidY:
        return &moveSpecial<Special::kTidY>;
      case Special::kTidZ:
        return &moveSpecial<Special::kTidZ>;
      case Special::kLaneId:
        return &moveSpecial<Special::kLaneId>;
      case Special::kNtidX:
      case Special::kNtidY:
      case Special::kNtidZ:
      case Special::kCtaidX:
      case Special::kCtaidY:
      case Special::kCtaidZ:
      case Special::kNctaidX:
      case Special::kNctaidY:
      case Special::kNctaidZ:
      case Special::kWarpId:
      case Special::kNWarpId:
      case Special::kWarpSize:
        return &moveUniformSpecial;
      default:
        return nullptr;  // clocks, lane masks and the rest: the generic path
    }
  }

  // ---- ld, st (the generic kLd/kSt cases with the space and element size fixed) --------------
  // An address operand: a register plus an offset, or anything else (a symbol, an immediate), as
  // BlockRunner::address reads it.
  struct RegAddress {
    const uint64_t* lanes;
    uint64_t offset;
    RegAddress(BlockRunner& r, const Operand& o)
        : lanes(r.R_ + size_t{o.index} * 32), offset(o.imm) {}
    uint64_t operator()(BlockRunner&, int l) const { return lanes[l] + offset; }
  };
  struct OtherAddress {
    const Operand& operand;
    OtherAddress(BlockRunner&, const Operand& o) : operand(o) {}
    uint64_t operator()(BlockRunner& r, int l) const { return r.address(operand, l); }
  };

  // ld.param of a kernel parameter: one address for every lane, so one load for the warp.
  template <unsigned EB, bool SIGNED>
  static void loadKernelParam(BlockRunner& r, const Instr& in, uint32_t exec) {
    const int first = std::countr_zero(exec);
    const uint8_t* p = r.access(Space::kParam, r.address(in.ops[1], first), EB, first);
    const uint64_t v = extend(loadDeviceElement(p, EB), EB, SIGNED);
    uint64_t* d = destination(r, in.ops[0]);
    lanes(exec, [&](int l) { d[l] = v; });
  }

  // The addresses of a warp's active lanes: the lowest, the highest, and all of them ORed (their
  // common alignment).
  struct AddressRange {
    uint64_t lowest = ~0ull, highest = 0, bits = 0;
  };
  static AddressRange addressRange(BlockRunner& r, const RegAddress& address, uint32_t exec) {
    AddressRange range;
    if (exec != 0xffffffffu) {
      forLanes(exec, [&](int l) {
        const uint64_t a = address(r, l);
        range.lowest = std::min(range.lowest, a);
        range.highest = std::max(range.highest, a);
        range.bits |= a;
      });
      return range;
    }
    // Two lanes at a time in registers: two short dependency chains instead of one long one.
    uint64_t lo0 = ~0ull, lo1 = ~0ull, hi0 = 0, hi1 = 0, bits = 0;
#pragma GCC unroll 4
    for (int l = 0; l < 32; l += 2) {
      const uint64_t a = address(r, l), b = address(r, l + 1);
      lo0 = a < lo0 ? a : lo0;
      hi0 = a > hi0 ? a : hi0;
      lo1 = b < lo1 ? b : lo1;
      hi1 = b > hi1 ? b : hi1;
      bits |= a | b;
    }
    return {std::min(lo0, lo1), std::max(hi0, hi1), bits};
  }

  // A warp's elements at once: where the active lanes' addresses (each a multiple of EB) fall in
  // one range the space resolves, the host pointer of the lowest, so that an address's element is
  // at that pointer + (address - range.lowest). Null otherwise: the lanes then go one by one,
  // which also names the lane of an illegal address.
  template <Space SP, unsigned EB>
  static uint8_t* warpRange(BlockRunner& r, const AddressRange& range) {
    if ((range.bits & (EB - 1)) || range.highest > ~0ull - EB) return nullptr;
    uint8_t* base = rangeBase<SP>(r, range.lowest, range.highest + EB - range.lowest);
    // The elements are accessed as EB-aligned host words (loadAlignedElement).
    return reinterpret_cast<uintptr_t>(base) % EB == 0 ? base : nullptr;
  }
  // The host pointer of device bytes [lo, lo + len) of space SP when one range holds them all.
  template <Space SP>
  static uint8_t* rangeBase(BlockRunner& r, uint64_t lo, uint64_t len) {
    const uint64_t end = lo + len;
    if constexpr (SP == Space::kShared) {
      return end <= r.shared_.size() ? r.shared_.data() + lo : nullptr;
    } else if constexpr (SP == Space::kGlobal || SP == Space::kConst) {
      return r.resolveGlobal(lo, len);
    } else if constexpr (SP == Space::kGeneric) {
      if (lo >= kSharedWindow && end <= kSharedWindow + r.shared_.size())
        return r.shared_.data() + (lo - kSharedWindow);
      if (end <= kSharedWindow || lo >= kWindowsEnd) return r.resolveGlobal(lo, len);
      return nullptr;
    } else {
      return nullptr;
    }
  }

  // One register (SCALAR) or a vector of up to four.
  template <Space SP, unsigned EB, bool SIGNED, class ADDRESS, bool SCALAR>
  static void load(BlockRunner& r, const Instr& in, uint32_t exec) {
    const unsigned n = SCALAR ? 1 : in.vec;
    const Operand& d = in.ops[0];
    const ADDRESS address(r, in.ops[1]);
    uint64_t* scalar = SCALAR ? destination(r, d) : nullptr;
    if constexpr (SCALAR && std::is_same_v<ADDRESS, RegAddress>) {
      const AddressRange range = addressRange(r, address, exec);
      if (const uint8_t* base = warpRange<SP, EB>(r, range)) {
        lanes(exec, [&](int l) {
          scalar[l] =
              extend(loadAlignedElement<EB>(base + (address(r, l) - range.lowest)), EB, SIGNED);
        });
        return;
      }
    }
    forLanes(exec, [&](int l) {
      const uint8_t* p = r.access(SP, address(r, l), uint64_t{EB} * n, l);
      if constexpr (SCALAR) {
        scalar[l] = extend(loadDeviceElement(p, EB), EB, SIGNED);
      } else {
        uint64_t v[8];
        loadDeviceVector(p, EB, n, v);
        for (unsigned k = 0; k < n; ++k) r.set(r.element(d, k), l, extend(v[k], EB, SIGNED));
      }
    });
  }

  // SOURCE: Reg or Imm for one element; void for a vector.
  template <Space SP, unsigned EB, class ADDRESS, class SOURCE>
  static void store(BlockRunner& r, const Instr& in, uint32_t exec) {
    const ADDRESS address(r, in.ops[0]);
    const Operand& s = in.ops[1];
    if constexpr (std::is_void_v<SOURCE>) {
      const unsigned n = in.vec;
      forLanes(exec, [&](int l) {
        uint8_t* p = r.access(SP, address(r, l), uint64_t{EB} * n, l);
        uint64_t v[8];
        for (unsigned k = 0; k < n; ++k) v[k] = r.value(r.element(s, k), l);
        storeDeviceVector(p, EB, n, v);
      });
    } else {
      const SOURCE source(r.R_, s);
      if constexpr (std::is_same_v<ADDRESS, RegAddress>) {
        const AddressRange range = addressRange(r, address, exec);
        if (uint8_t* base = warpRange<SP, EB>(r, range)) {
          lanes(exec, [&](int l) {
            storeAlignedElement<EB>(base + (address(r, l) - range.lowest), source(l));
          });
          return;
        }
      }
      forLanes(exec, [&](int l) {
        storeDeviceElement(r.access(SP, address(r, l), EB, l), EB, source(l));
      });
    }
  }

  // ---- choosing ------------------------------------------------------------------------------
  static bool isReg(const Operand& o) { return o.kind == OperandKind::kReg && !o.negate; }
  static bool isImm(const Operand& o) { return o.kind == OperandKind::kImm; }
  static bool regOrImm(const Operand& o) { return isReg(o) || isImm(o); }

  // pick(x, y) with x and y Kind<Reg> or Kind<Imm> by the kinds of operands `first` and
  // `second` (registers or immediates).
  template <class S>
  struct Kind {
    using type = S;
  };
  template <class Pick>
  static FastStep byKinds(const Operand& first, const Operand& second, Pick pick) {
    if (isReg(first))
      return isReg(second) ? pick(Kind<Reg>{}, Kind<Reg>{}) : pick(Kind<Reg>{}, Kind<Imm>{});
    return isReg(second) ? pick(Kind<Imm>{}, Kind<Reg>{}) : pick(Kind<Imm>{}, Kind<Imm>{});
  }

  template <class T, IntOp OP>
  static FastStep intBinaryStep(const Operand& b) {
    return isReg(b) ? &intBinary<T, OP, Reg> : &intBinary<T, OP, Imm>;
  }

  template <class T>
  static FastStep chooseInt(const Instr& in) {
    const Operand& b = in.ops[2];
    switch (in.op) {
      case Op::kAdd:
        return intBinaryStep<T, IntOp::kAdd>(b);
      case Op::kSub:
        return intBinaryStep<T, IntOp::kSub>(b);
      case Op::kMul:
        return intBinaryStep<T, IntOp::kMul>(b);
      case Op::kAnd:
        return intBinaryStep<T, IntOp::kAnd>(b);
      case Op::kOr:
        return intBinaryStep<T, IntOp::kOr>(b);
      case Op::kXor:
        return intBinaryStep<T, IntOp::kXor>(b);
      case Op::kShl:
        return intBinaryStep<T, IntOp::kShl>(b);
      case Op::kShr:
        return intBinaryStep<T, IntOp::kShr>(b);
      case Op::kMin:
        return intBinaryStep<T, IntOp::kMin>(b);
      case Op::kMax:
        return intBinaryStep<T, IntOp::kMax>(b);
      case Op::kDiv:
        return intBinaryStep<T, IntOp::kDiv>(b);
      case Op::kRem:
        return intBinaryStep<T, IntOp::kRem>(b);
      default:
        return nullptr;
    }
  }

  template <class T>
  static FastStep chooseMad(const Instr& in) {
    return byKinds(in.ops[2], in.ops[3], [](auto b, auto c) -> FastStep {
      return &madLo<T, typename decltype(b)::type, typename decltype(c)::type>;
    });
  }

  template <class T, CmpOp CMP>
  static FastStep setpStep(const Operand& b) {
    return isReg(b) ? &setp<T, CMP, Reg> : &setp<T, CMP, Imm>;
  }

  template <class T>
  static FastStep chooseSetp(const Instr& in) {
    const Operand& b = in.ops[2];
    switch (static_cast<CmpOp>(in.mode)) {
      case CmpOp::kEq:
        return setpStep<T, CmpOp::kEq>(b);
      case CmpOp::kNe:
        return setpStep<T, CmpOp::kNe>(b);
      case CmpOp::kLt:
      case CmpOp::kLo:
        return setpStep<T, CmpOp::kLt>(b);
      case CmpOp::kLe:
      case CmpOp::kLs:
        return setpStep<T, CmpOp::kLe>(b);
      case CmpOp::kGt:
      case CmpOp::kHi:
        return setpStep<T, CmpOp::kGt>(b);
      case CmpOp::kGe:
      case CmpOp::kHs:
        return setpStep<T, CmpOp::kGe>(b);
      default:
        return nullptr;  // the unordered and NaN tests run the generic path
    }
  }

  template <class A, class B>
  static FastStep f32BinaryStep(Op op) {
    switch (op) {
      case Op::kAdd:
        return &f32Binary<FloatOp::kAdd, A, B>;
      case Op::kSub:
        return &f32Binary<FloatOp::kSub, A, B>;
      case Op::kMul:
        return &f32Binary<FloatOp::kMul, A, B>;
      default:
        return nullptr;
    }
  }

  static bool hostHasFma() {
    static const bool fma = __builtin_cpu_supports("fma");
    return fma;
  }

  static FastStep chooseF32(const Instr& in) {
    if (in.flags != 0 || (in.round != Round::kDefault && in.round != Round::kRN)) return nullptr;
    const Operand &a = in.ops[1], &b = in.ops[2], &c = in.ops[3];
    if (!regOrImm(a) || !regOrImm(b)) return nullptr;
    if (in.op == Op::kFma || in.op == Op::kMad) {
      if (!isReg(a) || !regOrImm(c)) return nullptr;
      const bool hostFma = hostHasFma();
      return byKinds(b, c, [hostFma](auto bKind, auto cKind) -> FastStep {
        using B = typename decltype(bKind)::type;
        using C = typename decltype(cKind)::type;
        return hostFma ? &f32FmaInstruction<Reg, B, C> : &f32Fma<Reg, B, C>;
      });
    }
    if (isImm(a) && isImm(b)) return nullptr;
    return byKinds(a, b, [&](auto aKind, auto bKind) {
      return f32BinaryStep<typename decltype(aKind)::type, typename decltype(bKind)::type>(in.op);
    });
  }

  template <Space SP, unsigned EB, bool SIGNED, class ADDRESS>
  static FastStep loadStep(const Instr& in) {
    return in.vec == 1 ? &load<SP, EB, SIGNED, ADDRESS, true>
                       : &load<SP, EB, SIGNED, ADDRESS, false>;
  }

  template <Space SP, unsigned EB, class ADDRESS>
  static FastStep storeStep(const Instr& in) {
    if (in.vec != 1) return &store<SP, EB, ADDRESS, void>;
    return isReg(in.ops[1]) ? &store<SP, EB, ADDRESS, Reg> : &store<SP, EB, ADDRESS, Imm>;
  }

  template <Space SP, class ADDRESS>
  static FastStep chooseMemory(const Instr& in) {
    const unsigned eb = typeBytes(in.type);
    const bool sgn = isSigned(in.type);
    if (in.op == Op::kLd) {
      switch (eb) {
        case 1:
          return sgn ? loadStep<SP, 1, true, ADDRESS>(in) : loadStep<SP, 1, false, ADDRESS>(in);
        case 2:
          return sgn ? loadStep<SP, 2, true, ADDRESS>(in) : loadStep<SP, 2, false, ADDRESS>(in);
        case 4:
          return sgn ? loadStep<SP, 4, true, ADDRESS>(in) : loadStep<SP, 4, false, ADDRESS>(in);
        case 8:
          return loadStep<SP, 8, false, ADDRESS>(in);
        default:
          return nullptr;
      }
    }
    switch (eb) {
      case 1:
        return storeStep<SP, 1, ADDRESS>(in);
      case 2:
        return storeStep<SP, 2, ADDRESS>(in);
      case 4:
        return storeStep<SP, 4, ADDRESS>(in);
      case 8:
        return storeStep<SP, 8, ADDRESS>(in);
      default:
        return nullptr;
    }
  }

  static FastStep chooseKernelParamLoad(const Instr& in) {
    switch (typeBytes(in.type)) {
      case 1:
        return isSigned(in.type) ? &loadKernelParam<1, true> : &loadKernelParam<1, false>;
      case 2:
        return isSigned(in.type) ? &loadKernelParam<2, true> : &loadKernelParam<2, false>;
      case 4:
        return isSigned(in.type) ? &loadKernelParam<4, true> : &loadKernelParam<4, false>;
      case 8:
        return &loadKernelParam<8, false>;
      default:
        return nullptr;
    }
  }

  template <Space SP>
  static FastStep chooseMemory(const Instr& in) {
    const Operand& a = in.ops[in.op == Op::kLd ? 1 : 0];
    if (SP == Space::kParam && in.op == Op::kLd && in.vec == 1 &&
        a.symbol == SymbolKind::kKernelParam)
      return chooseKernelParamLoad(in);
    const bool registerBased = a.symbol == SymbolKind::kNone && a.index != Operand::kNoReg;
    return registerBased ? chooseMemory<SP, RegAddress>(in) : chooseMemory<SP, OtherAddress>(in);
  }

  static FastStep choose(const Instr& in) {
    const Operand& d = in.ops[0];
    switch (in.op) {
      case Op::kLd:
      case Op::kSt: {
        // Vectors of up to four registers; .v8 and anything holding a vector element that is not
        // a plain register keep the generic path.
        const Operand& data = in.ops[in.op == Op::kLd ? 0 : 1];
        if (in.vec != 1 && in.vec != 2 && in.vec != 4) return nullptr;
        if (in.vec == 1 && !(in.op == Op::kLd ? isReg(data) : regOrImm(data))) return nullptr;
        if (in.vec > 1 && data.kind != OperandKind::kVector) return nullptr;
        switch (in.space) {
          case Space::kShared:
            return chooseMemory<Space::kShared>(in);
          case Space::kGlobal:
            return chooseMemory<Space::kGlobal>(in);
          case Space::kGeneric:
            return chooseMemory<Space::kGeneric>(in);
          case Space::kParam:
            return chooseMemory<Space::kParam>(in);
          case Space::kLocal:
            return chooseMemory<Space::kLocal>(in);
          case Space::kConst:
            return chooseMemory<Space::kConst>(in);
        }
        return nullptr;
      }
      case Op::kMov:
        if (!isReg(d) || in.type == Type::kPred) return nullptr;
        if (in.ops[1].kind == OperandKind::kSpecial) return chooseSpecial(in);
        if (!regOrImm(in.ops[1])) return nullptr;
        return isReg(in.ops[1]) ? &mov<Reg> : &mov<Imm>;
      case Op::kCvta:
      case Op::kCvtaTo: {
        if (!isReg(d) || !isReg(in.ops[1])) return nullptr;
        const bool to = in.op == Op::kCvtaTo;
        switch (in.space) {
          case Space::kShared:
            return to ? &cvta<Space::kShared, true> : &cvta<Space::kShared, false>;
          case Space::kLocal:
            return to ? &cvta<Space::kLocal, true> : &cvta<Space::kLocal, false>;
          default:
            return &cvta<Space::kGlobal, false>;
        }
      }
      case Op::kSelp:
        if (!isReg(d) || !regOrImm(in.ops[1]) || !regOrImm(in.ops[2]) || !isReg(in.ops[3]))
          return nullptr;
        return byKinds(in.ops[1], in.ops[2], [](auto a, auto b) -> FastStep {
          return &selp<typename decltype(a)::type, typename decltype(b)::type>;
        });
      case Op::kSetp:
        if (!isReg(d) || !isReg(in.ops[1]) || !regOrImm(in.ops[2]) || in.boolOp != BoolOp::kNone ||
            in.flags != 0 || (in.ops[5].kind != OperandKind::kNone && !isReg(in.ops[5])))
          return nullptr;
        switch (in.type) {
          case Type::kU32:
          case Type::kB32:
            return chooseSetp<uint32_t>(in);
          case Type::kS32:
            return chooseSetp<int32_t>(in);
          case Type::kU64:
          case Type::kB64:
            return chooseSetp<uint64_t>(in);
          case Type::kS64:
            return chooseSetp<int64_t>(in);
          case Type::kF32:
            return chooseSetp<float>(in);
          default:
            return nullptr;
        }
      case Op::kAdd:
      case Op::kSub:
      case Op::kMul:
      case Op::kMad:
      case Op::kFma:
      case Op::kAnd:
      case Op::kOr:
      case Op::kXor:
      case Op::kShl:
      case Op::kShr:
      case Op::kMin:
      case Op::kMax:
      case Op::kDiv:
      case Op::kRem:
        break;
      default:
        return nullptr;
    }
    if (!isReg(d)) return nullptr;
    if (in.type == Type::kF32) return chooseF32(in);
    if (!isReg(in.ops[1]) || !regOrImm(in.ops[2])) return nullptr;
    if (in.op == Op::kFma) return nullptr;
    if ((in.op == Op::kDiv || in.op == Op::kRem) && isFloat(in.type)) return nullptr;
    // mul and mad: .lo, or mul.wide of 32-bit sources; .hi, .cc and .sat run the generic path.
    const bool wide = in.flags == kWide;
    if (in.op == Op::kMul || in.op == Op::kMad) {
      if (in.flags != kLo && !(wide && in.op == Op::kMul)) return nullptr;
    } else if (in.flags != 0) {
      return nullptr;
    }
    if (in.op == Op::kMad && !regOrImm(in.ops[3])) return nullptr;
    const bool bReg = isReg(in.ops[2]);
    switch (in.type) {
      case Type::kU32:
      case Type::kB32:
        if (wide) return bReg ? &mulWide<uint32_t, Reg> : &mulWide<uint32_t, Imm>;
        if (in.op == Op::kMad) return chooseMad<uint32_t>(in);
        return chooseInt<uint32_t>(in);
      case Type::kS32:
        if (wide) return bReg ? &mulWide<int32_t, Reg> : &mulWide<int32_t, Imm>;
        if (in.op == Op::kMad) return chooseMad<uint32_t>(in);
        return chooseInt<int32_t>(in);
      case Type::kU64:
      case Type::kB64:
        if (wide) return nullptr;
        if (in.op == Op::kMad) return chooseMad<uint64_t>(in);
        return chooseInt<uint64_t>(in);
      case Type::kS64:
        if (wide) return nullptr;
        if (in.op == Op::kMad) return chooseMad<uint64_t>(in);
        return chooseInt<int64_t>(in);
      default:
        return nullptr;
    }
  }
};

FastStep chooseFastStep(const Instr& in) { return FastSteps::choose(in); }

}  // namespace gpupool::ptx::execution
