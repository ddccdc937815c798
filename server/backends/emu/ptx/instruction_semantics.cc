// Semantics of the non-control instructions for the lanes of one scheduled group: moves,
// loads/stores, conversions, integer/float arithmetic, comparisons, atomics.
#include <algorithm>
#include <atomic>

#include "block_runner.h"
#include "device_element_access.h"
#include "tensor_map.h"

namespace gpupool::ptx::execution {

template <class Fn>
void BlockRunner::floatBinary(const Instr& in, uint32_t exec, Fn fn) {
  RoundingScope scope(in.round);
  const Operand &d = in.ops[0], &A = in.ops[1], &B = in.ops[2];
  switch (in.type) {
    case Type::kF32:
      forLanes(exec, [&](int l) {
        set(d, l,
            finishF32(fn(inF32(value(A, l), in.flags), inF32(value(B, l), in.flags)), in.flags));
      });
      break;
    case Type::kF64:
      forLanes(exec, [&](int l) {
        set(d, l, finishF64(fn(f64(value(A, l)), f64(value(B, l))), in.flags));
      });
      break;
    case Type::kF16:
    case Type::kBF16:
      forLanes(exec, [&](int l) {
        set(d, l,
            halfResult(fn(toDouble(value(A, l), in.type), toDouble(value(B, l), in.type)), in.type,
                       in.flags));
      });
      break;
    case Type::kF16x2:
    case Type::kBF16x2: {
      Type h = in.type == Type::kF16x2 ? Type::kF16 : Type::kBF16;
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
    case Type::kF32:
      forLanes(exec,
               [&](int l) { set(d, l, finishF32(fn(inF32(value(A, l), in.flags)), in.flags)); });
      break;
    case Type::kF64:
      forLanes(exec, [&](int l) { set(d, l, finishF64(fn(f64(value(A, l))), in.flags)); });
      break;
    case Type::kF16:
    case Type::kBF16:
      forLanes(exec, [&](int l) {
        set(d, l, halfResult(fn(toDouble(value(A, l), in.type)), in.type, in.flags));
      });
      break;
    case Type::kF16x2:
    case Type::kBF16x2: {
      Type h = in.type == Type::kF16x2 ? Type::kF16 : Type::kBF16;
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

// set's result in its destination type: all ones for integers, 1.0 for floats; with an x2 source
// each half on its own (0xFFFF per half for .u32/.s32, 1.0 per half for .f16x2/.bf16x2).
uint64_t setResult(Type dtype, bool r, bool pair, bool r2) {
  constexpr uint64_t kHalfOne = 0x3C00, kBfloatOne = 0x3F80;
  switch (dtype) {
    case Type::kF32:
      return r ? bits(1.0f) : 0;
    case Type::kF16:
      return r ? kHalfOne : 0;
    case Type::kBF16:
      return r ? kBfloatOne : 0;
    case Type::kF16x2:
      return (r ? kHalfOne : 0) | (r2 ? kHalfOne << 16 : 0);
    case Type::kBF16x2:
      return (r ? kBfloatOne : 0) | (r2 ? kBfloatOne << 16 : 0);
    default:
      if (pair) return (r ? 0xFFFFu : 0) | (r2 ? 0xFFFF0000u : 0);
      return r ? 0xFFFFFFFFu : 0;
  }
}

uint64_t atomicCombine(const Instr& in, uint64_t old, uint64_t b, uint64_t c) {
  const Type t = in.type;
  const unsigned bytes = typeBytes(t);
  const uint64_t m = widthMask(bytes);
  auto sext = [&](uint64_t v) { return static_cast<int64_t>(extend(v, bytes, true)); };
  switch (static_cast<AtomOp>(in.mode)) {
    case AtomOp::kAdd:
      switch (t) {
        case Type::kF32:
          return bits(f32(old) + f32(b));
        case Type::kF64:
          return bits(f64(old) + f64(b));
        case Type::kF16:
          return doubleToHalf(halfToDouble(static_cast<uint16_t>(old)) +
                              halfToDouble(static_cast<uint16_t>(b)));
        case Type::kBF16:
          return doubleToBfloat(bfloatToDouble(static_cast<uint16_t>(old)) +
                                bfloatToDouble(static_cast<uint16_t>(b)));
        case Type::kF16x2:
        case Type::kBF16x2: {
          uint64_t r = 0;
          for (int k = 0; k < 2; ++k) {
            uint16_t x = static_cast<uint16_t>(old >> (16 * k)),
                     y = static_cast<uint16_t>(b >> (16 * k));
            uint16_t s = t == Type::kF16x2 ? doubleToHalf(halfToDouble(x) + halfToDouble(y))
                                           : doubleToBfloat(bfloatToDouble(x) + bfloatToDouble(y));
            r |= uint64_t{s} << (16 * k);
          }
          return r;
        }
        default:
          return (old + b) & m;
      }
    case AtomOp::kMin:
      if (t == Type::kF32) return bits(floatMin(f32(old), f32(b)));
      if (t == Type::kF64) return bits(floatMin(f64(old), f64(b)));
      if (isSigned(t)) return sext(old) < sext(b) ? old : b & m;
      return (old & m) < (b & m) ? old : b & m;
    case AtomOp::kMax:
      if (t == Type::kF32) return bits(floatMax(f32(old), f32(b)));
      if (t == Type::kF64) return bits(floatMax(f64(old), f64(b)));
      if (isSigned(t)) return sext(old) > sext(b) ? old : b & m;
      return (old & m) > (b & m) ? old : b & m;
    case AtomOp::kInc:
      return (old & m) >= (b & m) ? 0 : (old + 1) & m;
    case AtomOp::kDec:
      return ((old & m) == 0 || (old & m) > (b & m)) ? b & m : (old - 1) & m;
    case AtomOp::kAnd:
      return old & b & m;
    case AtomOp::kOr:
      return (old | b) & m;
    case AtomOp::kXor:
      return (old ^ b) & m;
    case AtomOp::kExch:
      return b & m;
    case AtomOp::kCas:
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

// atomicUpdate at the element width `bytes` (2, 4 or 8); returns the old value.
uint64_t atomicUpdateBytes(uint8_t* p, const Instr& in, uint64_t b, uint64_t c, unsigned bytes) {
  return bytes == 2   ? atomicUpdate<uint16_t>(p, in, b, c)
         : bytes == 4 ? atomicUpdate<uint32_t>(p, in, b, c)
                      : atomicUpdate<uint64_t>(p, in, b, c);
}

}  // namespace

void BlockRunner::atomic(const Instr& in, uint32_t exec) {
  const bool isRed = in.op == Op::kRed;
  const Operand& addrOp = in.ops[isRed ? 0 : 1];
  const Operand& bOp = in.ops[isRed ? 1 : 2];
  const unsigned bytes = typeBytes(in.type);
  forLanes(exec, [&](int l) {
    uint64_t addr = address(addrOp, l);
    if (addr % bytes) fault(CUDA_ERROR_MISALIGNED_ADDRESS, l, curPc_, "misaligned atomic address");
    uint8_t* p = access(in.space, addr, bytes, l);
    uint64_t b = value(bOp, l);
    uint64_t c = (!isRed && in.numOps > 3) ? value(in.ops[3], l) : 0;
    uint64_t old = atomicUpdateBytes(p, in, b, c, bytes);
    if (!isRed) set(in.ops[0], l, old);
  });
}

// The 64-bit mbarrier object (opaque to programs): pending arrivals of the current phase in bits
// 0-19, the expected arrival count in bits 20-39, the signed transaction count (tx-count) in bits
// 40-60, the low bits of the phase number in bits 61-63. A phase completes when both its pending
// arrivals and its tx-count are zero (PTX ISA, "mbarrier"); the next phase then expects the
// expected count and starts with a tx-count of zero. A state token is the phase number (high
// word) and the pending count right after the arrival (low word).
namespace {
constexpr uint64_t kMbarrierCountMax = (uint64_t{1} << 20) - 1;  // the ISA's count range
constexpr int64_t kMbarrierTxMax = (int64_t{1} << 20) - 1;       // and tx-count range
struct MbarrierState {
  uint64_t pending, expected, phase;
  int64_t tx;
};
MbarrierState mbarrierState(uint64_t w) {
  int64_t tx = static_cast<int64_t>((w >> 40) & ((uint64_t{1} << 21) - 1));
  if (tx >= (int64_t{1} << 20)) tx -= int64_t{1} << 21;
  return {w & kMbarrierCountMax, (w >> 20) & kMbarrierCountMax, w >> 61, tx};
}
uint64_t mbarrierWord(const MbarrierState& m) {
  return (m.pending & kMbarrierCountMax) | ((m.expected & kMbarrierCountMax) << 20) |
         ((static_cast<uint64_t>(m.tx) & ((uint64_t{1} << 21) - 1)) << 40) | ((m.phase & 7) << 61);
}
// Completes the phase when nothing is pending any more.
void mbarrierCompletePhase(MbarrierState& m) {
  if (m.pending != 0 || m.tx != 0) return;
  m.phase = (m.phase + 1) & 7;
  m.pending = m.expected;
}
}  // namespace

void BlockRunner::mbarrierCompleteTx(uint64_t addr, uint64_t bytes, int l) {
  if (addr % 8) fault(CUDA_ERROR_MISALIGNED_ADDRESS, l, curPc_, "misaligned mbarrier address");
  uint8_t* p = access(Space::kShared, addr, 8, l);
  uint64_t word;
  std::memcpy(&word, p, 8);
  MbarrierState m = mbarrierState(word);
  if (m.expected == 0)
    fault(CUDA_ERROR_LAUNCH_FAILED, l, curPc_, "complete_tx on an uninitialized mbarrier");
  m.tx -= static_cast<int64_t>(bytes);
  if (bytes > static_cast<uint64_t>(kMbarrierTxMax) || m.tx < -kMbarrierTxMax)
    fault(CUDA_ERROR_LAUNCH_FAILED, l, curPc_, "mbarrier tx-count out of range");
  mbarrierCompletePhase(m);
  word = mbarrierWord(m);
  std::memcpy(p, &word, 8);
}

namespace {
// The element type a tensor reduction combines in, from the map's: the pairs with PTX's atomic
// operations the emu is sure of (integer adds, bitwise and min/max; float adds; inc/dec on u32);
// kNone for the rest, which the copy refuses rather than guess at (FTZ and TF32 types, f64,
// 8- and 16-bit integers, float min/max).
Type tensorReduceType(uint32_t dataType, AtomOp op) {
  const bool integerOp = op == AtomOp::kAdd || op == AtomOp::kMin || op == AtomOp::kMax ||
                         op == AtomOp::kAnd || op == AtomOp::kOr || op == AtomOp::kXor;
  switch (dataType) {
    case CU_TENSOR_MAP_DATA_TYPE_UINT32:
      return integerOp || op == AtomOp::kInc || op == AtomOp::kDec ? Type::kU32 : Type::kNone;
    case CU_TENSOR_MAP_DATA_TYPE_INT32:
      return integerOp ? Type::kS32 : Type::kNone;
    case CU_TENSOR_MAP_DATA_TYPE_UINT64:
      return integerOp ? Type::kU64 : Type::kNone;
    case CU_TENSOR_MAP_DATA_TYPE_INT64:
      return integerOp && op != AtomOp::kAdd ? Type::kS64 : Type::kNone;
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
      return op == AtomOp::kAdd ? Type::kF32 : Type::kNone;
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
      return op == AtomOp::kAdd ? Type::kF16 : Type::kNone;
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16:
      return op == AtomOp::kAdd ? Type::kBF16 : Type::kNone;
    default:
      return Type::kNone;
  }
}

// cp.async.bulk.tensor .im2col's traversal: pixelsPerColumn pixels from the coordinates' pixel on,
// W fastest, then H, D and N. A spatial position steps by its traversal stride (elementStrides,
// the convolution's stride); one that reaches the bounding box's upper end (globalDim +
// pixelBoxUpperCorner, exclusive) wraps to its lower corner and carries into the next dimension,
// the last one into N. (CUTLASS counts a dimension's output positions as ceil((globalDim + upper -
// lower) / stride) and gives an output position's pixel as lower + position * stride: the same
// walk.) Each pixel is read at its position plus the instruction's im2col offsets,
// channelsPerPixel elements from channel start[0] on; whatever lies outside the tensor is out of
// bounds. Calls move(n, address, inside) for the box's elements in order.
template <class Move>
void im2colWalk(const TensorMapLayout& m, const int64_t* start, const int64_t* offsets,
                unsigned elem, Move&& move) {
  const unsigned spatial = m.rank - 2, batch = m.rank - 1;
  int64_t pos[4] = {};  // the spatial dimensions 1..rank-2, then N
  int64_t end[3] = {};
  for (unsigned i = 0; i < spatial; ++i) {
    pos[i] = start[i + 1];
    end[i] = static_cast<int64_t>(m.globalDim[i + 1]) + m.pixelBoxUpper[i];
  }
  pos[spatial] = start[batch];
  uint64_t n = 0;
  for (uint32_t p = 0; p < m.pixelsPerColumn; ++p) {
    bool inside = pos[spatial] >= 0 && static_cast<uint64_t>(pos[spatial]) < m.globalDim[batch];
    uint64_t pixel =
        m.globalAddress + static_cast<uint64_t>(pos[spatial]) * m.globalStrides[batch - 1];
    for (unsigned i = 0; i < spatial; ++i) {
      const int64_t c = pos[i] + offsets[i];
      inside &= c >= 0 && static_cast<uint64_t>(c) < m.globalDim[i + 1];
      pixel += static_cast<uint64_t>(c) * m.globalStrides[i];
    }
    for (uint32_t k = 0; k < m.channelsPerPixel; ++k) {
      const int64_t c = start[0] + k;
      move(n++, pixel + static_cast<uint64_t>(c) * elem,
           inside && c >= 0 && static_cast<uint64_t>(c) < m.globalDim[0]);
    }
    for (unsigned i = 0; i < spatial; ++i) {
      pos[i] += m.elementStrides[i + 1];
      if (pos[i] < end[i]) break;
      pos[i] = m.pixelBoxLower[i];
      if (i + 1 == spatial) ++pos[spatial];
    }
  }
}
}  // namespace

void BlockRunner::tensorCopy(const Instr& in, int l) {
  const auto kind = static_cast<BulkCopyKind>(in.mode);
  const bool reduce = kind == BulkCopyKind::kTensorReduce;
  const bool load = kind != BulkCopyKind::kTensorStore && !reduce;
  const bool im2col = in.has(kIm2col);
  const uint64_t mapAddress = value(in.ops[1], l);
  if (mapAddress % 64)
    fault(CUDA_ERROR_MISALIGNED_ADDRESS, l, curPc_, "tensor map address not 64-byte aligned");
  TensorMapLayout m;
  if (!decodeTensorMap(access(Space::kGeneric, mapAddress, kTensorMapBytes, l), &m))
    fault(CUDA_ERROR_ILLEGAL_INSTRUCTION, l, curPc_,
          "cp.async.bulk.tensor: the operand is not a tensor map the pool encoded");
  const unsigned rank = in.ops[2].count;
  if (m.rank != rank)
    fault(CUDA_ERROR_ILLEGAL_INSTRUCTION, l, curPc_,
          "cp.async.bulk.tensor: the tensor map's rank differs from the instruction's");
  if ((m.mode == kTensorMapIm2col) != im2col)
    fault(CUDA_ERROR_ILLEGAL_INSTRUCTION, l, curPc_,
          im2col ? "cp.async.bulk.tensor in an im2col mode: the tensor map is a tiled one"
                 : "cp.async.bulk.tensor .tile: the tensor map is an im2col one");
  const uint64_t shared = address(in.ops[0], l);
  if (shared % 128)
    fault(CUDA_ERROR_MISALIGNED_ADDRESS, l, curPc_,
          "cp.async.bulk.tensor needs a 128-byte aligned shared memory address");
  const unsigned elem = tensorMapElementBytes(m.dataType);
  Instr combine;  // a reduction's element operation: in.call on the map's element type
  if (reduce) {
    combine.mode = static_cast<uint8_t>(in.call);
    combine.type = tensorReduceType(m.dataType, static_cast<AtomOp>(in.call));
    if (combine.type == Type::kNone)
      fault(CUDA_ERROR_ILLEGAL_INSTRUCTION, l, curPc_,
            "cp.reduce.async.bulk.tensor: the emu does not combine elements of this tensor map's "
            "type (CUtensorMapDataType " +
                std::to_string(m.dataType) + ") with this operation");
  }
  int64_t start[5] = {};
  for (unsigned i = 0; i < rank; ++i)
    start[i] = static_cast<int32_t>(value(element(in.ops[2], i), l));
  uint64_t count[5] = {1, 1, 1, 1, 1}, step[5] = {1, 1, 1, 1, 1}, total = 1;
  if (im2col) {
    total = uint64_t{m.pixelsPerColumn} * m.channelsPerPixel;
  } else {
    for (unsigned i = 0; i < rank; ++i) {
      step[i] = i == 0 ? 1 : m.elementStrides[i];  // dimension 0 has no element stride
      count[i] = (m.boxDim[i] + step[i] - 1) / step[i];
      total *= count[i];
    }
  }
  // Bank swizzle: 16-byte chunk bits 4.. of the shared address XOR its 128-byte row bits 7...
  const unsigned swizzleBits = m.swizzle == CU_TENSOR_MAP_SWIZZLE_32B    ? 1
                               : m.swizzle == CU_TENSOR_MAP_SWIZZLE_64B  ? 2
                               : m.swizzle == CU_TENSOR_MAP_SWIZZLE_128B ? 3
                                                                         : 0;
  const uint64_t swizzleMask = (uint64_t{1} << swizzleBits) - 1;
  // The boxes written: this CTA's, or with .multicast::cluster the one at the same offset in each
  // CTA of the mask.
  uint8_t* boxes[kMaxClusterCtas];
  uint64_t at[kMaxClusterCtas];
  const unsigned targets = multicastTargets(in, shared, l, at);
  for (unsigned t = 0; t < targets; ++t) boxes[t] = access(Space::kShared, at[t], total * elem, l);
  uint8_t* box = boxes[0];
  const bool nanFill = load && m.oobFill == CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA;
  const uint64_t nan = elem == 2 ? 0x7fffu : elem == 4 ? 0x7fffffffu : 0x7fffffffffffffffu;
  // The box's n-th element (row-major in shared memory) and its place in the tensor.
  auto move = [&](uint64_t n, uint64_t global, bool inside) {
    const uint64_t linear = shared + n * elem;
    const uint64_t offset = (linear ^ (((linear >> 7) & swizzleMask) << 4)) - shared;
    uint8_t* slot = box + offset;
    if (load) {
      if (inside)
        std::memcpy(slot, access(Space::kGlobal, global, elem, l), elem);
      else if (nanFill)
        std::memcpy(slot, &nan, elem);
      else
        std::memset(slot, 0, elem);
      for (unsigned t = 1; t < targets; ++t) std::memcpy(boxes[t] + offset, slot, elem);
    } else if (inside && reduce) {
      uint64_t b = 0;
      std::memcpy(&b, slot, elem);
      atomicUpdateBytes(access(Space::kGlobal, global, elem, l), combine, b, 0, elem);
    } else if (inside) {
      std::memcpy(access(Space::kGlobal, global, elem, l), slot, elem);
    }
  };
  if (im2col) {
    int64_t offsets[3] = {};
    for (unsigned i = 0; load && i + 2 < rank; ++i)  // .im2col_no_offs: none
      offsets[i] = static_cast<int16_t>(value(element(in.ops[5], i), l));
    im2colWalk(m, start, offsets, elem, move);
  } else {
    uint64_t index[5] = {};
    for (uint64_t n = 0; n < total; ++n) {
      bool inside = true;
      uint64_t global = m.globalAddress;
      for (unsigned i = 0; i < rank; ++i) {
        const int64_t c = start[i] + static_cast<int64_t>(index[i] * step[i]);
        inside &= c >= 0 && static_cast<uint64_t>(c) < m.globalDim[i];
        global += static_cast<uint64_t>(c) * (i == 0 ? elem : m.globalStrides[i - 1]);
      }
      move(n, global, inside);
      for (unsigned i = 0; i < rank && ++index[i] == count[i]; ++i) index[i] = 0;
    }
  }
  // The transaction is the whole box, out-of-bounds elements included.
  if (load) {
    std::unique_lock lock = clusterMbarrierLock();
    const unsigned barriers = multicastTargets(in, address(in.ops[3], l), l, at);
    for (unsigned t = 0; t < barriers; ++t) mbarrierCompleteTx(at[t], total * elem, l);
  }
}

void BlockRunner::bulkCopy(const Instr& in, uint32_t exec) {
  const auto kind = static_cast<BulkCopyKind>(in.mode);
  forLanes(exec, [&](int l) {
    if (kind == BulkCopyKind::kTensorLoad || kind == BulkCopyKind::kTensorStore ||
        kind == BulkCopyKind::kTensorReduce) {
      tensorCopy(in, l);
      return;
    }
    if (kind == BulkCopyKind::kPrefetch) {  // a hint; its operands must still be valid
      const uint64_t src = address(in.ops[0], l), size = value(in.ops[1], l) & 0xffffffffu;
      if (src % 16 || size % 16)
        fault(CUDA_ERROR_MISALIGNED_ADDRESS, l, curPc_,
              "cp.async.bulk.prefetch needs a 16-byte aligned address and size");
      if (size) access(Space::kGlobal, src, size, l);
      return;
    }
    const uint64_t dst = address(in.ops[0], l), src = address(in.ops[1], l);
    const uint64_t size = value(in.ops[2], l) & 0xffffffffu;
    if (dst % 16 || src % 16 || size % 16)
      fault(CUDA_ERROR_MISALIGNED_ADDRESS, l, curPc_,
            "cp.async.bulk needs 16-byte aligned addresses and a size that is a multiple of 16");
    const bool toGlobal =
        kind == BulkCopyKind::kSharedToGlobal || kind == BulkCopyKind::kReduceSharedToGlobal;
    const Space dstSpace = toGlobal ? Space::kGlobal : Space::kShared;
    const Space srcSpace = kind == BulkCopyKind::kGlobalToShared ? Space::kGlobal : Space::kShared;
    if (kind == BulkCopyKind::kReduceSharedToShared ||
        kind == BulkCopyKind::kReduceSharedToGlobal) {
      // Element by element, each an atomic read-modify-write as red would do it.
      Instr element = in;
      element.mode = static_cast<uint8_t>(in.call);
      const unsigned bytes = typeBytes(in.type);
      uint8_t* d = size ? access(dstSpace, dst, size, l) : nullptr;
      const uint8_t* s = size ? access(srcSpace, src, size, l) : nullptr;
      for (uint64_t at = 0; at < size; at += bytes) {
        uint64_t b = 0;
        std::memcpy(&b, s + at, bytes);
        atomicUpdateBytes(d + at, element, b, 0, bytes);
      }
    } else if (size) {
      uint64_t to[kMaxClusterCtas];
      const unsigned targets = multicastTargets(in, dst, l, to);
      const uint8_t* from = access(srcSpace, src, size, l);
      for (unsigned t = 0; t < targets; ++t)
        std::memmove(access(dstSpace, to[t], size, l), from, size);
    }
    if (!toGlobal) {
      std::unique_lock lock = clusterMbarrierLock();
      uint64_t barriers[kMaxClusterCtas];
      const unsigned count = multicastTargets(in, address(in.ops[3], l), l, barriers);
      for (unsigned t = 0; t < count; ++t) mbarrierCompleteTx(barriers[t], size, l);
    }
  });
}

void BlockRunner::fp8Convert(const Instr& in, uint32_t exec) {
  const auto kind = static_cast<Fp8Cvt>(in.mode);
  const bool e4m3 = kind == Fp8Cvt::kToE4m3 || kind == Fp8Cvt::kFromE4m3;
  const bool relu = in.flags & kRelu;
  forLanes(exec, [&](int l) {
    const uint64_t a = value(in.ops[1], l);
    uint64_t result;
    if (kind == Fp8Cvt::kToTf32) {
      // Rounding on the magnitude bits: a carry into the exponent is the next binade (or inf).
      const uint32_t x = static_cast<uint32_t>(a);
      const bool nan = (x & 0x7fffffffu) > 0x7f800000u;
      const uint32_t increment = in.round == Round::kRZ   ? 0
                                 : in.round == Round::kRN ? 0xfffu + ((x >> 13) & 1)
                                                          : 0x1000u;  // .rna: ties away
      const bool inf = (x & 0x7fffffffu) == 0x7f800000u;
      result = nan ? 0x7fffffffu : inf ? x : ((x + increment) & ~0x1fffu);
    } else if (kind == Fp8Cvt::kFromE4m3 || kind == Fp8Cvt::kFromE5m2) {
      // Every fp8 value is exact in f16; .relu clamps negatives (not NaN) to zero.
      auto half = [&](unsigned k) -> uint64_t {
        const double v = fromFp8(static_cast<uint8_t>(a >> (8 * k)), e4m3);
        if (std::isnan(v)) return 0x7fff;
        return doubleToHalf(relu && v < 0 ? 0.0 : v);
      };
      result = (half(1) << 16) | half(0);
    } else if (in.type2 == Type::kF32) {  // a to the high byte, b to the low one
      const double hi = std::bit_cast<float>(static_cast<uint32_t>(a));
      const double lo = std::bit_cast<float>(static_cast<uint32_t>(value(in.ops[2], l)));
      result = (uint64_t{toFp8(hi, e4m3, relu)} << 8) | toFp8(lo, e4m3, relu);
    } else {  // f16x2: each half to the byte in its place
      result = (uint64_t{toFp8(halfToDouble(static_cast<uint16_t>(a >> 16)), e4m3, relu)} << 8) |
               toFp8(halfToDouble(static_cast<uint16_t>(a)), e4m3, relu);
    }
    set(in.ops[0], l, result);
  });
}

void BlockRunner::mbarrier(const Instr& in, uint32_t exec) {
  std::unique_lock lock = clusterMbarrierLock();
  const auto op = static_cast<MbarrierOp>(in.mode);
  bool anyWaiting = false;
  forLanes(exec, [&](int l) {
    if (op == MbarrierOp::kPendingCount) {
      set(in.ops[0], l, value(in.ops[2], l) & 0xffffffffu);
      return;
    }
    const uint64_t addr = address(in.ops[1], l);
    if (addr % 8) fault(CUDA_ERROR_MISALIGNED_ADDRESS, l, curPc_, "misaligned mbarrier address");
    if (op == MbarrierOp::kCompleteTx) {
      uint64_t sharedAddr = addr;
      if (in.space == Space::kGeneric) {
        if (addr < kSharedWindow || addr >= kSharedWindow + kWindowSize)
          fault(CUDA_ERROR_ILLEGAL_ADDRESS, l, curPc_, "mbarrier outside shared memory");
        sharedAddr = addr - kSharedWindow;
      }
      mbarrierCompleteTx(sharedAddr, value(in.ops[2], l) & 0xffffffffu, l);
      return;
    }
    uint8_t* p = access(in.space, addr, 8, l);
    uint64_t word;
    std::memcpy(&word, p, 8);
    MbarrierState m = mbarrierState(word);
    auto expectTx = [&](uint64_t bytes) {
      m.tx += static_cast<int64_t>(bytes);
      if (bytes > static_cast<uint64_t>(kMbarrierTxMax) || m.tx > kMbarrierTxMax)
        fault(CUDA_ERROR_LAUNCH_FAILED, l, curPc_, "mbarrier tx-count out of range");
    };
    switch (op) {
      case MbarrierOp::kInit: {
        const uint64_t count = value(in.ops[2], l) & 0xffffffffu;
        if (count == 0 || count > kMbarrierCountMax)
          fault(CUDA_ERROR_LAUNCH_FAILED, l, curPc_, "mbarrier.init count out of range");
        m = {count, count, 0, 0};
        break;
      }
      case MbarrierOp::kInval:
        m = {0, 0, 0, 0};
        break;
      case MbarrierOp::kExpectTx:
        if (m.expected == 0)
          fault(CUDA_ERROR_LAUNCH_FAILED, l, curPc_, "expect_tx on an uninitialized mbarrier");
        expectTx(value(in.ops[2], l) & 0xffffffffu);
        mbarrierCompletePhase(m);
        break;
      case MbarrierOp::kArrive:
      case MbarrierOp::kArriveDrop: {
        const bool withTx = in.flags & kExpectTx;
        const uint64_t count =
            withTx || in.ops[2].kind == OperandKind::kNone ? 1 : value(in.ops[2], l) & 0xffffffffu;
        if (m.expected == 0 || count == 0 || count > m.pending)
          fault(CUDA_ERROR_LAUNCH_FAILED, l, curPc_,
                "mbarrier arrival on an uninitialized barrier or beyond its pending count");
        if (withTx) expectTx(value(in.ops[2], l) & 0xffffffffu);  // before the arrival
        if (op == MbarrierOp::kArriveDrop) m.expected -= count;
        m.pending -= count;
        set(in.ops[0], l, (m.phase << 32) | m.pending);
        mbarrierCompletePhase(m);
        break;
      }
      case MbarrierOp::kTestWait:
      case MbarrierOp::kTryWait: {
        const uint64_t operandValue = value(in.ops[2], l);
        // A token names the phase it arrived in; a parity names the current phase (parity equal
        // to the current phase's: not complete) or the preceding one (complete).
        const bool complete = (in.flags & kParity) ? (m.phase & 1) != (operandValue & 1)
                                                   : m.phase != ((operandValue >> 32) & 7);
        set(in.ops[0], l, complete ? 1 : 0);
        anyWaiting |= !complete;
        return;
      }
      case MbarrierOp::kPendingCount:
      case MbarrierOp::kCompleteTx:
        return;
    }
    word = mbarrierWord(m);
    std::memcpy(p, &word, 8);
  });
  // A thread polling an incomplete phase waits for other warps: let them run.
  if (anyWaiting) yieldWarp_ = true;
}

void BlockRunner::integerOp(const Instr& in, uint32_t exec) {
  const Operand &d = in.ops[0], &A = in.ops[1], &B = in.ops[2], &C = in.ops[3];
  const bool cc = in.flags & kCC;
  const bool isPred = in.type == Type::kPred;
  withIntType(in.type, [&](auto tag) {
    using T = decltype(tag);
    using U = std::make_unsigned_t<T>;
    constexpr unsigned W = sizeof(T) * 8;
    using Wide = std::conditional_t<W == 64, unsigned __int128, uint64_t>;
    auto get = [&](const Operand& o, int l) { return static_cast<T>(value(o, l)); };
    auto put = [&](int l, T v) { set(d, l, raw<T>(v)); };
    switch (in.op) {
      case Op::kAdd:
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
      case Op::kSub:
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
      case Op::kAddc:
        forLanes(exec, [&](int l) {
          Wide s = Wide{static_cast<U>(get(A, l))} + static_cast<U>(get(B, l)) + w_->carry[l];
          if (cc) w_->carry[l] = static_cast<uint8_t>(s >> W);
          put(l, static_cast<T>(static_cast<U>(s)));
        });
        break;
      case Op::kSubc:
        forLanes(exec, [&](int l) {
          Wide a = static_cast<U>(get(A, l)), b = Wide{static_cast<U>(get(B, l))} + w_->carry[l];
          if (cc) w_->carry[l] = a < b;
          put(l, static_cast<T>(static_cast<U>(a - b)));
        });
        break;
      case Op::kMul:
      case Op::kMad:
      case Op::kMadc:
        forLanes(exec, [&](int l) {
          T a = get(A, l), b = get(B, l);
          if ((in.flags & kWide) && W <= 32) {
            using WT = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
            WT p = static_cast<WT>(a) * static_cast<WT>(b);
            if (in.op != Op::kMul)
              p += static_cast<WT>(extend(value(C, l), 2 * W / 8, std::is_signed_v<T>));
            set(d, l, static_cast<uint64_t>(p) & widthMask(2 * W / 8));
            return;
          }
          U part = (in.flags & kHi) ? static_cast<U>(mulHi<T>(a, b))
                                    : static_cast<U>(static_cast<U>(a) * static_cast<U>(b));
          if (in.op == Op::kMul) {
            put(l, static_cast<T>(part));
            return;
          }
          U c = static_cast<U>(get(C, l));
          Wide s = Wide{part} + c + (in.op == Op::kMadc ? w_->carry[l] : 0);
          if (cc) w_->carry[l] = static_cast<uint8_t>(s >> W);
          put(l, static_cast<T>(static_cast<U>(s)));
        });
        break;
      case Op::kMul24:
      case Op::kMad24:
        forLanes(exec, [&](int l) {
          int64_t a = static_cast<int64_t>(extend(value(A, l), 3, std::is_signed_v<T>));
          int64_t b = static_cast<int64_t>(extend(value(B, l), 3, std::is_signed_v<T>));
          int64_t p = a * b;
          uint32_t r = (in.flags & kHi) ? static_cast<uint32_t>(p >> 16) : static_cast<uint32_t>(p);
          if (in.op == Op::kMad24) r += static_cast<uint32_t>(value(C, l));
          set(d, l, r);
        });
        break;
      case Op::kSad:
        forLanes(exec, [&](int l) {
          T a = get(A, l), b = get(B, l);
          U diff = a > b ? static_cast<U>(static_cast<U>(a) - static_cast<U>(b))
                         : static_cast<U>(static_cast<U>(b) - static_cast<U>(a));
          put(l, static_cast<T>(static_cast<U>(diff + static_cast<U>(get(C, l)))));
        });
        break;
      case Op::kDiv:
        forLanes(exec, [&](int l) { put(l, intDiv<T>(get(A, l), get(B, l))); });
        break;
      case Op::kRem:
        forLanes(exec, [&](int l) { put(l, intRem<T>(get(A, l), get(B, l))); });
        break;
      case Op::kMin:
        forLanes(exec, [&](int l) { put(l, std::min(get(A, l), get(B, l))); });
        break;
      case Op::kMax:
        forLanes(exec, [&](int l) { put(l, std::max(get(A, l), get(B, l))); });
        break;
      case Op::kNeg:
        forLanes(exec, [&](int l) {
          put(l, static_cast<T>(static_cast<U>(0 - static_cast<U>(get(A, l)))));
        });
        break;
      case Op::kAbs:
        forLanes(exec, [&](int l) {
          T a = get(A, l);
          put(l, a < 0 ? static_cast<T>(static_cast<U>(0 - static_cast<U>(a))) : a);
        });
        break;
      case Op::kAnd:
        forLanes(exec, [&](int l) { put(l, static_cast<T>(get(A, l) & get(B, l))); });
        break;
      case Op::kOr:
        forLanes(exec, [&](int l) { put(l, static_cast<T>(get(A, l) | get(B, l))); });
        break;
      case Op::kXor:
        forLanes(exec, [&](int l) { put(l, static_cast<T>(get(A, l) ^ get(B, l))); });
        break;
      case Op::kNot:
        forLanes(exec, [&](int l) {
          put(l, isPred ? static_cast<T>((get(A, l) & 1) ^ 1) : static_cast<T>(~get(A, l)));
        });
        break;
      case Op::kCnot:
        forLanes(exec, [&](int l) { put(l, static_cast<T>(get(A, l) == 0 ? 1 : 0)); });
        break;
      case Op::kShl:
        forLanes(exec, [&](int l) {
          uint32_t n = static_cast<uint32_t>(value(B, l));
          put(l, n >= W ? T{0} : static_cast<T>(static_cast<U>(static_cast<U>(get(A, l)) << n)));
        });
        break;
      case Op::kShr:
        forLanes(exec, [&](int l) {
          uint32_t n = static_cast<uint32_t>(value(B, l));
          T a = get(A, l);
          if constexpr (std::is_signed_v<T>)
            put(l, n >= W ? static_cast<T>(a < 0 ? -1 : 0) : static_cast<T>(a >> n));
          else
            put(l, n >= W ? T{0} : static_cast<T>(a >> n));
        });
        break;
      case Op::kPopc:
        forLanes(exec, [&](int l) {
          set(d, l, static_cast<uint32_t>(std::popcount(static_cast<U>(get(A, l)))));
        });
        break;
      case Op::kClz:
        forLanes(exec, [&](int l) {
          set(d, l, static_cast<uint32_t>(std::countl_zero(static_cast<U>(get(A, l)))));
        });
        break;
      case Op::kBrev:
        forLanes(exec, [&](int l) {
          U a = static_cast<U>(get(A, l)), r = 0;
          for (unsigned i = 0; i < W; ++i) r = static_cast<U>(r | (((a >> i) & 1) << (W - 1 - i)));
          put(l, static_cast<T>(r));
        });
        break;
      case Op::kBfind:
        forLanes(exec, [&](int l) { set(d, l, findMsb<T>(get(A, l), in.flags & kShiftAmt)); });
        break;
      case Op::kBfe:
        forLanes(exec, [&](int l) {
          put(l, bitFieldExtract<T>(get(A, l), static_cast<uint32_t>(value(B, l)),
                                    static_cast<uint32_t>(value(C, l))));
        });
        break;
      case Op::kBfi:
        forLanes(exec, [&](int l) {
          put(l,
              static_cast<T>(bitFieldInsert<U>(static_cast<U>(get(A, l)), static_cast<U>(get(B, l)),
                                               static_cast<uint32_t>(value(C, l)),
                                               static_cast<uint32_t>(value(in.ops[4], l)))));
        });
        break;
      case Op::kPrmt:
        forLanes(exec, [&](int l) {
          set(d, l,
              permute(static_cast<uint32_t>(value(A, l)), static_cast<uint32_t>(value(B, l)),
                      static_cast<uint32_t>(value(C, l)), in.mode));
        });
        break;
      case Op::kBmsk:
        forLanes(exec, [&](int l) {
          set(d, l,
              bitMask(static_cast<uint32_t>(value(A, l)), static_cast<uint32_t>(value(B, l)),
                      in.flags & kClamp));
        });
        break;
      case Op::kShf:
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
    case Op::kMov: {
      const Operand& s = in.ops[1];
      const unsigned bytes = typeBytes(in.type);
      if (d.kind == OperandKind::kVector) {  // unpack
        const unsigned eb = bytes * 8 / d.count;
        forLanes(exec, [&](int l) {
          uint64_t v = value(s, l);
          for (unsigned k = 0; k < d.count; ++k)
            set(element(d, k), l, (v >> (k * eb)) & widthMask(eb / 8));
        });
      } else if (s.kind == OperandKind::kVector) {  // pack
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
    case Op::kLd: {
      const unsigned eb = typeBytes(in.type), n = in.vec;
      const bool sgn = isSigned(in.type);
      forLanes(exec, [&](int l) {
        const uint8_t* p = access(in.space, address(in.ops[1], l), uint64_t{eb} * n, l);
        if (n == 1) {
          set(d, l, extend(loadDeviceElement(p, eb), eb, sgn));
          return;
        }
        uint64_t v[8];
        loadDeviceVector(p, eb, n, v);
        for (unsigned k = 0; k < n; ++k) set(element(d, k), l, extend(v[k], eb, sgn));
      });
      return;
    }
    case Op::kSt: {
      const unsigned eb = typeBytes(in.type), n = in.vec;
      const Operand& s = in.ops[1];
      forLanes(exec, [&](int l) {
        uint8_t* p = access(in.space, address(d, l), uint64_t{eb} * n, l);
        if (n == 1) {
          storeDeviceElement(p, eb, value(s, l));
          return;
        }
        uint64_t v[8];
        for (unsigned k = 0; k < n; ++k) v[k] = value(element(s, k), l);
        storeDeviceVector(p, eb, n, v);
      });
      return;
    }
    case Op::kCvt:
      if (in.mode != static_cast<uint8_t>(Fp8Cvt::kNone)) {
        fp8Convert(in, exec);
      } else if (in.type == Type::kF16x2 || in.type == Type::kBF16x2) {
        Type h = in.type == Type::kF16x2 ? Type::kF16 : Type::kBF16;
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
    case Op::kCvta:
    case Op::kCvtaTo: {
      const bool to = in.op == Op::kCvtaTo;
      const uint64_t window = cvtaWindow(in.space);
      forLanes(exec, [&](int l) {
        set(d, l, cvtaAddress(value(in.ops[1], l), window, to) & widthMask(typeBytes(in.type)));
      });
      return;
    }
    case Op::kMapa:
    case Op::kGetCtaRank: {
      // A generic address must lie in the shared window; its offset there is the shared one.
      const bool generic = in.space == Space::kGeneric;
      forLanes(exec, [&](int l) {
        uint64_t a = value(in.ops[1], l);
        if (generic) {
          if (a < kSharedWindow || a >= kSharedWindow + kWindowSize)
            fault(CUDA_ERROR_ILLEGAL_ADDRESS, l, curPc_,
                  std::string(in.op == Op::kMapa ? "mapa" : "getctarank") +
                      ": the generic address is not one of shared memory");
          a -= kSharedWindow;
        }
        if (in.op == Op::kGetCtaRank) {
          set(d, l, sharedRankOf(a));
          return;
        }
        const uint64_t mapped = mapSharedRank(a, value(in.ops[2], l) & 0xffffffffu, l);
        set(d, l, (generic ? mapped + kSharedWindow : mapped) & widthMask(typeBytes(in.type)));
      });
      return;
    }
    case Op::kIsspacep:
      forLanes(exec, [&](int l) {
        uint64_t v = value(in.ops[1], l);
        bool r;
        switch (in.space) {
          case Space::kShared:
            // Another CTA's memory (cluster.h) is shared::cluster, not shared::cta.
            r = v >= kSharedWindow && v < kSharedWindow + kWindowSize &&
                (in.mode == 1 || sharedRankOf(v - kSharedWindow) == clusterRank_);
            break;
          case Space::kLocal:
            r = v >= kLocalWindow && v < kLocalWindow + kWindowSize;
            break;
          case Space::kParam:
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
    case Op::kSelp:
      forLanes(exec, [&](int l) {
        set(d, l, (value(in.ops[3], l) & 1) ? value(in.ops[1], l) : value(in.ops[2], l));
      });
      return;
    case Op::kSetp:
    case Op::kSet: {
      const CmpOp cmp = static_cast<CmpOp>(in.mode);
      forLanes(exec, [&](int l) {
        uint64_t a = value(in.ops[1], l), b = value(in.ops[2], l);
        bool r = false, r2 = false;
        bool pair = false;
        switch (in.type) {
          case Type::kF32:
            r = floatCompare(cmp, inF32(a, in.flags), inF32(b, in.flags));
            break;
          case Type::kF64:
            r = floatCompare(cmp, f64(a), f64(b));
            break;
          case Type::kF16:
          case Type::kBF16:
            r = floatCompare(cmp, toDouble(a, in.type), toDouble(b, in.type));
            break;
          case Type::kF16x2:
          case Type::kBF16x2: {
            Type h = in.type == Type::kF16x2 ? Type::kF16 : Type::kBF16;
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
        const bool c = in.boolOp != BoolOp::kNone && (value(in.ops[3], l) & 1);
        auto combine = [&](bool x) {
          return in.boolOp == BoolOp::kNone  ? x
                 : in.boolOp == BoolOp::kAnd ? (x && c)
                 : in.boolOp == BoolOp::kOr  ? (x || c)
                                             : (x != c);
        };
        if (in.op == Op::kSet) {
          set(d, l, setResult(in.type2, combine(r), pair, combine(r2)));
          return;
        }
        if (pair) {  // p|q: the low and the high half
          set(d, l, combine(r));
          set(in.ops[5], l, combine(r2));
          return;
        }
        set(d, l, combine(r));
        set(in.ops[5], l, combine(!r));
      });
      return;
    }
    case Op::kCvtPack: {
      const unsigned width = in.mode;
      const bool signedConvert = in.type == Type::kS32;
      const int64_t lo = signedConvert ? -(int64_t{1} << (width - 1)) : 0;
      const int64_t hi =
          signedConvert ? (int64_t{1} << (width - 1)) - 1 : (int64_t{1} << width) - 1;
      const uint32_t mask = static_cast<uint32_t>((uint64_t{1} << width) - 1);
      forLanes(exec, [&](int l) {
        auto saturate = [&](const Operand& o) {
          int64_t v = static_cast<int32_t>(value(o, l));
          return static_cast<uint32_t>(std::clamp(v, lo, hi)) & mask;
        };
        uint32_t r = (saturate(in.ops[1]) << width) | saturate(in.ops[2]);
        if (in.numOps == 4) r |= static_cast<uint32_t>(value(in.ops[3], l)) << (2 * width);
        set(d, l, r);
      });
      return;
    }
    case Op::kActivemask:
      forLanes(exec, [&](int l) { set(d, l, group); });
      return;
    case Op::kAtom:
    case Op::kRed:
      atomic(in, exec);
      return;
    case Op::kMembar:
      std::atomic_thread_fence(std::memory_order_seq_cst);
      return;
    case Op::kNop:
      if (in.mode == kNopYields) yieldWarp_ = true;
      return;
    case Op::kCpAsync:
      forLanes(exec, [&](int l) {
        uint64_t size = value(in.ops[2], l);
        uint64_t srcSize = in.numOps > 3 ? std::min(value(in.ops[3], l), size) : size;
        uint8_t* dst = access(Space::kShared, address(in.ops[0], l), size, l);
        if (srcSize)
          std::memcpy(dst, access(Space::kGlobal, address(in.ops[1], l), srcSize, l), srcSize);
        std::memset(dst + srcSize, 0, size - srcSize);
      });
      return;
    case Op::kTestp: {
      const TestpOp t = static_cast<TestpOp>(in.mode);
      forLanes(exec, [&](int l) {
        double v = in.type == Type::kF32 ? static_cast<double>(f32(value(in.ops[1], l)))
                                         : f64(value(in.ops[1], l));
        int cls =
            in.type == Type::kF32 ? std::fpclassify(f32(value(in.ops[1], l))) : std::fpclassify(v);
        bool r = t == TestpOp::kFinite       ? std::isfinite(v)
                 : t == TestpOp::kInfinite   ? std::isinf(v)
                 : t == TestpOp::kNumber     ? !std::isnan(v)
                 : t == TestpOp::kNotANumber ? std::isnan(v)
                 : t == TestpOp::kNormal     ? cls == FP_NORMAL
                                             : cls == FP_SUBNORMAL;
        set(d, l, r);
      });
      return;
    }
    case Op::kMbarrier:
      mbarrier(in, exec);
      return;
    case Op::kBulkCopy:
      bulkCopy(in, exec);
      return;
    case Op::kPacked16:
      forLanes(exec, [&](int l) {
        const auto a = static_cast<uint32_t>(value(in.ops[1], l));
        const auto b = static_cast<uint32_t>(value(in.ops[2], l));
        uint32_t r = 0;
        for (unsigned k = 0; k < 2; ++k) {
          const int64_t x = packedPart(a, k, 16, isSigned(in.type));
          const int64_t y = packedPart(b, k, 16, isSigned(in.type));
          int64_t v = 0;
          switch (static_cast<Packed16Op>(in.mode)) {
            case Packed16Op::kAdd:
              v = x + y;
              break;
            case Packed16Op::kSub:
              v = x - y;
              break;
            case Packed16Op::kMin:
              v = std::min(x, y);
              break;
            case Packed16Op::kMax:
              v = std::max(x, y);
              break;
          }
          r |= (static_cast<uint32_t>(v) & 0xffffu) << (16 * k);
        }
        set(d, l, r);
      });
      return;
    case Op::kVideoShift:
      forLanes(exec, [&](int l) {
        const auto raw = static_cast<uint32_t>(value(in.ops[1], l));
        const int64_t a = isSigned(in.type2) ? static_cast<int64_t>(static_cast<int32_t>(raw))
                                             : static_cast<int64_t>(raw);
        uint32_t b = static_cast<uint32_t>(value(in.ops[2], l));
        b = (in.mode & 8) ? std::min<uint32_t>(b, 32) : (b & 31);
        int64_t shifted;
        if (in.mode & 1) {
          shifted =
              isSigned(in.type2) ? a >> b : static_cast<int64_t>(static_cast<uint64_t>(a) >> b);
        } else {
          shifted = static_cast<int64_t>(static_cast<uint64_t>(a) << b);
        }
        const bool signedResult = isSigned(in.type);
        int64_t result = shifted;
        const auto secondary = static_cast<VideoSecondaryOp>((in.mode >> 1) & 3);
        if (secondary != VideoSecondaryOp::kNone) {
          const auto craw = static_cast<uint32_t>(value(in.ops[3], l));
          const int64_t c = signedResult ? static_cast<int64_t>(static_cast<int32_t>(craw))
                                         : static_cast<int64_t>(craw);
          result = secondary == VideoSecondaryOp::kAdd   ? shifted + c
                   : secondary == VideoSecondaryOp::kMin ? std::min(shifted, c)
                                                         : std::max(shifted, c);
        }
        set(d, l, static_cast<uint64_t>(result) & 0xffffffffu);
      });
      return;
    case Op::kVabsdiff4:
      forLanes(exec, [&](int l) {
        const auto a = static_cast<uint32_t>(value(in.ops[1], l));
        const auto b = static_cast<uint32_t>(value(in.ops[2], l));
        const bool sat = in.flags & kSat, signedResult = isSigned(in.type);
        int64_t sum = 0;
        uint32_t bytes = 0;
        for (unsigned k = 0; k < 4; ++k) {
          int64_t v =
              packedPart(a, k, 8, isSigned(in.type2)) - packedPart(b, k, 8, isSigned(in.type2));
          if (v < 0) v = -v;  // 0..255
          sum += v;
          if (sat) v = std::min<int64_t>(v, signedResult ? 127 : 255);
          bytes |= (static_cast<uint32_t>(v) & 0xffu) << (8 * k);
        }
        if (in.mode == 0) {
          set(d, l, bytes);
          return;
        }
        int64_t total =
            sum + (signedResult ? static_cast<int64_t>(static_cast<int32_t>(
                                      static_cast<uint32_t>(value(in.ops[3], l))))
                                : static_cast<int64_t>(static_cast<uint32_t>(value(in.ops[3], l))));
        if (sat)
          total = signedResult ? std::clamp<int64_t>(total, INT32_MIN, INT32_MAX)
                               : std::clamp<int64_t>(total, 0, UINT32_MAX);
        set(d, l, static_cast<uint32_t>(total));
      });
      return;
    case Op::kLop3:
      forLanes(exec, [&](int l) {
        set(d, l,
            logicOp3(static_cast<uint32_t>(value(in.ops[1], l)),
                     static_cast<uint32_t>(value(in.ops[2], l)),
                     static_cast<uint32_t>(value(in.ops[3], l)),
                     static_cast<uint32_t>(value(in.ops[4], l))));
      });
      return;
    case Op::kDp4a:
    case Op::kDp2a:
      forLanes(exec, [&](int l) {
        const auto a = static_cast<uint32_t>(value(in.ops[1], l));
        const auto b = static_cast<uint32_t>(value(in.ops[2], l));
        const auto c = static_cast<uint32_t>(value(in.ops[3], l));
        const bool aSigned = isSigned(in.type), bSigned = isSigned(in.type2);
        set(d, l,
            in.op == Op::kDp4a ? dotProduct4(a, aSigned, b, bSigned, c)
                               : dotProduct2(a, aSigned, b, bSigned, in.flags & kHi, c));
      });
      return;
    case Op::kFns:
      forLanes(exec, [&](int l) {
        set(d, l,
            findNthSet(static_cast<uint32_t>(value(in.ops[1], l)),
                       static_cast<uint32_t>(value(in.ops[2], l)),
                       static_cast<int32_t>(static_cast<uint32_t>(value(in.ops[3], l)))));
      });
      return;
    case Op::kTex:
    case Op::kSuld:
    case Op::kSust:
      textureAccess(in, exec);
      return;
    case Op::kTexQuery:
      textureQuery(in, exec);
      return;
    case Op::kCopysign:
      forLanes(exec, [&](int l) {
        uint64_t a = value(in.ops[1], l), b = value(in.ops[2], l);
        uint64_t sign = in.type == Type::kF32 ? 0x80000000ull : 0x8000000000000000ull;
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
    case Op::kAdd:
      floatBinary(in, exec, [](auto a, auto b) { return a + b; });
      return;
    case Op::kSub:
      floatBinary(in, exec, [](auto a, auto b) { return a - b; });
      return;
    case Op::kMul:
      floatBinary(in, exec, [](auto a, auto b) { return a * b; });
      return;
    case Op::kDiv:
      floatBinary(in, exec, [](auto a, auto b) { return a / b; });
      return;
    case Op::kMin:
      if (in.flags & kPropagateNan)
        floatBinary(in, exec, [](auto a, auto b) { return floatMinNan(a, b); });
      else
        floatBinary(in, exec, [](auto a, auto b) { return floatMin(a, b); });
      return;
    case Op::kMax:
      if (in.flags & kPropagateNan)
        floatBinary(in, exec, [](auto a, auto b) { return floatMaxNan(a, b); });
      else
        floatBinary(in, exec, [](auto a, auto b) { return floatMax(a, b); });
      return;
    case Op::kFma:
    case Op::kMad: {
      RoundingScope scope(in.round);
      const Operand &A = in.ops[1], &B = in.ops[2], &C = in.ops[3];
      switch (in.type) {
        case Type::kF32:
          forLanes(exec, [&](int l) {
            set(d, l,
                finishF32(std::fma(inF32(value(A, l), in.flags), inF32(value(B, l), in.flags),
                                   inF32(value(C, l), in.flags)),
                          in.flags));
          });
          break;
        case Type::kF64:
          forLanes(exec, [&](int l) {
            set(d, l,
                finishF64(std::fma(f64(value(A, l)), f64(value(B, l)), f64(value(C, l))),
                          in.flags));
          });
          break;
        default: {
          const bool pair = in.type == Type::kF16x2 || in.type == Type::kBF16x2;
          Type h = (in.type == Type::kBF16 || in.type == Type::kBF16x2) ? Type::kBF16 : Type::kF16;
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
    case Op::kNeg:
    case Op::kAbs: {
      const unsigned bytes = typeBytes(in.type);
      const uint64_t sign = bytes == 8                            ? 0x8000000000000000ull
                            : bytes == 4 && in.type == Type::kF32 ? 0x80000000ull
                            : in.type == Type::kF16x2 || in.type == Type::kBF16x2 ? 0x80008000ull
                                                                                  : 0x8000ull;
      forLanes(exec, [&](int l) {
        uint64_t a = value(in.ops[1], l);
        if (in.type == Type::kF32 && (in.flags & kFtz)) a = bits(flush(f32(a)));
        set(d, l, in.op == Op::kNeg ? a ^ sign : a & ~sign);
      });
      return;
    }
    case Op::kSqrt:
      floatUnary(in, exec, [](auto a) { return std::sqrt(a); });
      return;
    case Op::kRcp:
      floatUnary(in, exec, [](auto a) { return decltype(a){1} / a; });
      return;
    case Op::kRsqrt:
      floatUnary(in, exec, [](auto a) { return decltype(a){1} / std::sqrt(a); });
      return;
    case Op::kEx2:
      floatUnary(in, exec, [](auto a) { return std::exp2(a); });
      return;
    case Op::kLg2:
      floatUnary(in, exec, [](auto a) { return std::log2(a); });
      return;
    case Op::kSin:
      floatUnary(in, exec, [](auto a) { return std::sin(a); });
      return;
    case Op::kCos:
      floatUnary(in, exec, [](auto a) { return std::cos(a); });
      return;
    case Op::kTanh:
      floatUnary(in, exec, [](auto a) { return std::tanh(a); });
      return;
    default:
      break;
  }
}

}  // namespace gpupool::ptx::execution
