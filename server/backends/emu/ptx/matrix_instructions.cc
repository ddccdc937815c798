// Semantics of the warp-wide matrix instructions (mma.sync, wmma.load/store/mma, ldmatrix,
// stmatrix, movmatrix). The warp is gathered first (BlockRunner::collective), so one call sees
// every lane's fragment registers; which lane holds which element is matrix_layout.cc's job. Each
// instruction rebuilds whole matrices from the fragments, computes, and spreads the result back.
//
// Numerics: products of .f16, .bf16, .tf32 and fp8 (.e4m3, .e5m2) inputs are exact in double; they
// are summed with C in double in k order and rounded once to the accumulator type (round to nearest
// even; NaN results become the canonical 0x7fffffff / 0x7fff). .tf32 inputs use the upper 19 bits
// of their register, as tensor cores do. .f64 (m8n8k4) chains fused multiply-adds in k order.
// Integer forms sum exactly and wrap to 32 bits, or clamp with .satfinite; .b1 adds popc(a xor/and
// b).
#include <cmath>

#include "block_runner.h"
#include "half_float.h"
#include "matrix_layout.h"

namespace gpupool::ptx::execution {
namespace {

uint64_t matrixBitMask(unsigned bits) {
  return bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
}

bool matrixIsFloat(MatrixType t) {
  return t == MatrixType::kF16 || t == MatrixType::kBF16 || t == MatrixType::kTF32 ||
         t == MatrixType::kF32 || t == MatrixType::kF64 || t == MatrixType::kE4M3 ||
         t == MatrixType::kE5M2;
}

double matrixFloatValue(MatrixType t, uint64_t bits) {
  switch (t) {
    case MatrixType::kF16:
      return halfToDouble(static_cast<uint16_t>(bits));
    case MatrixType::kBF16:
      return bfloatToDouble(static_cast<uint16_t>(bits));
    case MatrixType::kTF32:
      return std::bit_cast<float>(static_cast<uint32_t>(bits) & 0xffffe000u);
    case MatrixType::kF32:
      return std::bit_cast<float>(static_cast<uint32_t>(bits));
    case MatrixType::kE4M3:
    case MatrixType::kE5M2:
      return fromFp8(static_cast<uint8_t>(bits), t == MatrixType::kE4M3);
    default:
      return std::bit_cast<double>(bits);
  }
}

int64_t matrixIntegerValue(MatrixType t, uint64_t bits) {
  switch (t) {
    case MatrixType::kS8:
      return static_cast<int8_t>(bits);
    case MatrixType::kS4:
      return static_cast<int64_t>(bits & 7) - static_cast<int64_t>(bits & 8);
    case MatrixType::kS32:
      return static_cast<int32_t>(bits);
    default:  // u8, u4, b1: the bits as they are
      return static_cast<int64_t>(bits);
  }
}

uint64_t matrixFloatBits(MatrixType t, double v) {
  switch (t) {
    case MatrixType::kF16:
      return doubleToHalf(v);
    case MatrixType::kF64:
      return std::bit_cast<uint64_t>(v);
    default:
      return std::isnan(v) ? 0x7fffffffu : std::bit_cast<uint32_t>(static_cast<float>(v));
  }
}

}  // namespace

uint64_t BlockRunner::fragmentRegister(Warp& w, const Operand& fragment, unsigned reg, int lane) {
  R_ = w.regs[w.depth[lane]].data();
  return value(fragment.kind == OperandKind::kVector ? element(fragment, reg) : fragment, lane);
}

void BlockRunner::setFragmentRegister(Warp& w, const Operand& fragment, unsigned reg, int lane,
                                      uint64_t v) {
  R_ = w.regs[w.depth[lane]].data();
  set(fragment.kind == OperandKind::kVector ? element(fragment, reg) : fragment, lane, v);
}

uint64_t BlockRunner::readMatrixBits(Space space, uint64_t address, uint64_t bit, unsigned bits,
                                     int lane) {
  const uint64_t at = address + bit / 8;
  if (bits < 8) return (*access(space, at, 1, lane) >> (bit % 8)) & matrixBitMask(bits);
  uint64_t v = 0;
  std::memcpy(&v, access(space, at, bits / 8, lane), bits / 8);
  return v;
}

void BlockRunner::writeMatrixBits(Space space, uint64_t address, uint64_t bit, unsigned bits,
                                  int lane, uint64_t v) {
  const uint64_t at = address + bit / 8;
  if (bits < 8) {
    uint8_t* p = access(space, at, 1, lane);
    const unsigned shift = static_cast<unsigned>(bit % 8);
    const uint8_t mask = static_cast<uint8_t>(matrixBitMask(bits) << shift);
    *p = static_cast<uint8_t>((*p & ~mask) | ((v << shift) & mask));
    return;
  }
  std::memcpy(access(space, at, bits / 8, lane), &v, bits / 8);
}

void BlockRunner::matrixCollective(Warp& w, uint32_t lanes) {
  const int first = std::countr_zero(lanes);
  const uint32_t pc = w.pc[first];
  const Instr& in = code_[pc];
  const MatrixInstr& m = img_.matrixInstrs[in.call];
  curPc_ = pc;
  if (lanes != 0xffffffffu)
    fault(CUDA_ERROR_ILLEGAL_INSTRUCTION, first, pc,
          "a warp-wide matrix instruction (.aligned) executed by only some lanes of the warp");

  // Whole matrix <-> fragments. Where a fragment holds an element twice (wmma .f16 A/B), the
  // lowest lane and element wins.
  auto gather = [&](const Operand& fragment, MatrixUse use) {
    const MatrixType t = fragmentType(m, use);
    const unsigned bits = matrixTypeBits(t), perRegister = matrixRegisterBits(t) / bits;
    const unsigned cols = fragmentCols(m, use), count = fragmentElements(m, use);
    std::vector<uint64_t> matrix(fragmentRows(m, use) * cols, 0);
    std::vector<uint8_t> seen(matrix.size(), 0);
    for (int l = 0; l < 32; ++l) {
      uint64_t regs[32];
      for (unsigned r = 0; r < fragmentRegisters(m, use); ++r)
        regs[r] = fragmentRegister(w, fragment, r, l);
      for (unsigned e = 0; e < count; ++e) {
        const MatrixPosition p = fragmentPosition(m, use, static_cast<unsigned>(l), e);
        const size_t at = size_t{p.row} * cols + p.col;
        if (seen[at]) continue;
        seen[at] = 1;
        matrix[at] = (regs[e / perRegister] >> ((e % perRegister) * bits)) & matrixBitMask(bits);
      }
    }
    return matrix;
  };
  auto scatter = [&](const Operand& fragment, MatrixUse use, const std::vector<uint64_t>& matrix) {
    const MatrixType t = fragmentType(m, use);
    const unsigned bits = matrixTypeBits(t), perRegister = matrixRegisterBits(t) / bits;
    const unsigned cols = fragmentCols(m, use), count = fragmentElements(m, use);
    for (int l = 0; l < 32; ++l) {
      uint64_t regs[32] = {};
      for (unsigned e = 0; e < count; ++e) {
        const MatrixPosition p = fragmentPosition(m, use, static_cast<unsigned>(l), e);
        regs[e / perRegister] |= (matrix[size_t{p.row} * cols + p.col] & matrixBitMask(bits))
                                 << ((e % perRegister) * bits);
      }
      for (unsigned r = 0; r < fragmentRegisters(m, use); ++r)
        setFragmentRegister(w, fragment, r, l, regs[r]);
    }
  };
  auto laneAddress = [&](const Operand& o, int l) {
    R_ = w.regs[w.depth[l]].data();
    return address(o, l);
  };

  switch (m.kind) {
    case MatrixKind::kMma:
    case MatrixKind::kWmmaMma: {
      const std::vector<uint64_t> a = gather(in.ops[1], MatrixUse::kA);
      const std::vector<uint64_t> b = gather(in.ops[2], MatrixUse::kB);
      const std::vector<uint64_t> c = gather(in.ops[3], MatrixUse::kC);
      std::vector<uint64_t> d(c.size());
      const unsigned rows = m.m, cols = m.n, depth = m.k;
      for (unsigned i = 0; i < rows; ++i) {
        for (unsigned j = 0; j < cols; ++j) {
          const size_t at = size_t{i} * cols + j;
          if (matrixIsFloat(m.a)) {
            double sum = matrixFloatValue(m.c, c[at]);
            for (unsigned k = 0; k < depth; ++k) {
              const double x = matrixFloatValue(m.a, a[size_t{i} * depth + k]);
              const double y = matrixFloatValue(m.b, b[size_t{k} * cols + j]);
              sum = m.a == MatrixType::kF64 ? std::fma(x, y, sum) : sum + x * y;
            }
            d[at] = matrixFloatBits(m.d, sum);
            continue;
          }
          int64_t sum = matrixIntegerValue(MatrixType::kS32, c[at]);
          for (unsigned k = 0; k < depth; ++k) {
            const uint64_t x = a[size_t{i} * depth + k], y = b[size_t{k} * cols + j];
            if (m.a == MatrixType::kB1)
              sum += m.bitOp == MatrixBitOp::kXorPopc ? (x ^ y) & 1 : x & y & 1;
            else
              sum += matrixIntegerValue(m.a, x) * matrixIntegerValue(m.b, y);
          }
          if (m.satfinite) sum = std::clamp<int64_t>(sum, INT32_MIN, INT32_MAX);
          d[at] = static_cast<uint32_t>(sum);
        }
      }
      scatter(in.ops[0], MatrixUse::kD, d);
      break;
    }
    case MatrixKind::kWmmaLoad:
    case MatrixKind::kWmmaStore: {
      const bool load = m.kind == MatrixKind::kWmmaLoad;
      const MatrixUse use = load ? m.use : MatrixUse::kD;
      const Operand& fragment = in.ops[load ? 0 : 2];
      const Operand& strideOp = in.ops[load ? 2 : 3];
      const MatrixType t = fragmentType(m, use);
      const unsigned bits = matrixTypeBits(t), perRegister = matrixRegisterBits(t) / bits;
      const unsigned rows = fragmentRows(m, use), cols = fragmentCols(m, use);
      for (int l = 0; l < 32; ++l) {
        const uint64_t base = laneAddress(in.ops[1], l);
        // Without a stride the matrix is packed: the leading dimension is its row (or column).
        const uint64_t stride = strideOp.kind == OperandKind::kNone
                                    ? (m.rowMajor ? cols : rows)
                                    : static_cast<uint32_t>(value(strideOp, l));
        uint64_t regs[32] = {};
        for (unsigned r = 0; r < fragmentRegisters(m, use) && !load; ++r)
          regs[r] = fragmentRegister(w, fragment, r, l);
        for (unsigned e = 0; e < fragmentElements(m, use); ++e) {
          const MatrixPosition p = fragmentPosition(m, use, static_cast<unsigned>(l), e);
          const uint64_t index =
              m.rowMajor ? uint64_t{p.row} * stride + p.col : uint64_t{p.col} * stride + p.row;
          const unsigned shift = (e % perRegister) * bits;
          if (load)
            regs[e / perRegister] |= readMatrixBits(in.space, base, index * bits, bits, l) << shift;
          else
            writeMatrixBits(in.space, base, index * bits, bits, l,
                            (regs[e / perRegister] >> shift) & matrixBitMask(bits));
        }
        for (unsigned r = 0; r < fragmentRegisters(m, use) && load; ++r)
          setFragmentRegister(w, fragment, r, l, regs[r]);
      }
      break;
    }
    case MatrixKind::kLdmatrix:
    case MatrixKind::kStmatrix: {
      // Lanes 8j..8j+7 give the addresses of the eight 16-byte rows of matrix j.
      const bool load = m.kind == MatrixKind::kLdmatrix;
      std::vector<uint64_t> matrix =
          load ? std::vector<uint64_t>(size_t{m.k} * 64, 0) : gather(in.ops[2], MatrixUse::kA);
      for (unsigned row = 0; row < 8u * m.k; ++row) {
        const int l = static_cast<int>(row);
        const uint64_t at = laneAddress(in.ops[1], l);
        if (at % 16)
          fault(CUDA_ERROR_MISALIGNED_ADDRESS, l, pc,
                "ldmatrix/stmatrix row address is not 16-byte aligned");
        uint8_t* p = access(in.space, at, 16, l);
        for (unsigned col = 0; col < 8; ++col) {
          uint16_t h = 0;
          if (load) {
            std::memcpy(&h, p + col * 2, 2);
            matrix[row * 8 + col] = h;
          } else {
            h = static_cast<uint16_t>(matrix[row * 8 + col]);
            std::memcpy(p + col * 2, &h, 2);
          }
        }
      }
      if (load) scatter(in.ops[0], MatrixUse::kA, matrix);
      break;
    }
    case MatrixKind::kMovmatrix:
      scatter(in.ops[0], MatrixUse::kD, gather(in.ops[1], MatrixUse::kA));
      break;
  }
  forLanes(lanes, [&](int l) {
    w.state[l] = LaneState::kRun;
    ++w.pc[l];
  });
}

}  // namespace gpupool::ptx::execution
