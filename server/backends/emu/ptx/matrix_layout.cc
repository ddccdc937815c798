#include "matrix_layout.h"

#include <cstdio>
#include <optional>
#include <vector>

namespace gpupool::ptx {
namespace {

std::optional<MatrixType> parseMatrixType(std::string_view s) {
  static const std::pair<std::string_view, MatrixType> kTypes[] = {
      {"f16", MatrixType::kF16},   {"bf16", MatrixType::kBF16}, {"tf32", MatrixType::kTF32},
      {"f32", MatrixType::kF32},   {"f64", MatrixType::kF64},   {"s8", MatrixType::kS8},
      {"u8", MatrixType::kU8},     {"s4", MatrixType::kS4},     {"u4", MatrixType::kU4},
      {"b1", MatrixType::kB1},     {"s32", MatrixType::kS32},   {"b16", MatrixType::kF16},
      {"e4m3", MatrixType::kE4M3}, {"e5m2", MatrixType::kE5M2}};
  for (auto& [n, t] : kTypes)
    if (s == n) return t;
  return std::nullopt;
}

bool isIntegerInput(MatrixType t) {
  return t == MatrixType::kS8 || t == MatrixType::kU8 || t == MatrixType::kS4 ||
         t == MatrixType::kU4;
}

// One row of the table of mma.sync / wmma.mma shapes the emu executes.
struct MatrixShapeRow {
  bool wmma;
  uint8_t m, n;
  uint16_t k;
  MatrixType input;  // A and B (8/4-bit integers: either signedness, mixed allowed)
};

// PTX ISA, "Matrix shape" tables of mma and wmma, sm_75..sm_90, minus what the emu refuses
// (see decodeMatrixOpcode).
constexpr MatrixShapeRow kMatrixShapes[] = {
    {false, 16, 8, 8, MatrixType::kF16},   {false, 16, 8, 16, MatrixType::kF16},
    {false, 16, 8, 8, MatrixType::kBF16},  {false, 16, 8, 16, MatrixType::kBF16},
    {false, 16, 8, 4, MatrixType::kTF32},  {false, 16, 8, 8, MatrixType::kTF32},
    {false, 8, 8, 4, MatrixType::kF64},    {false, 8, 8, 16, MatrixType::kS8},
    {false, 16, 8, 16, MatrixType::kS8},   {false, 16, 8, 32, MatrixType::kS8},
    {false, 8, 8, 32, MatrixType::kS4},    {false, 16, 8, 32, MatrixType::kS4},
    {false, 16, 8, 64, MatrixType::kS4},   {false, 8, 8, 128, MatrixType::kB1},
    {false, 16, 8, 128, MatrixType::kB1},  {false, 16, 8, 256, MatrixType::kB1},
    {false, 16, 8, 32, MatrixType::kE4M3}, {true, 16, 16, 16, MatrixType::kF16},
    {true, 32, 8, 16, MatrixType::kF16},   {true, 8, 32, 16, MatrixType::kF16},
    {true, 16, 16, 16, MatrixType::kBF16}, {true, 32, 8, 16, MatrixType::kBF16},
    {true, 8, 32, 16, MatrixType::kBF16},  {true, 16, 16, 8, MatrixType::kTF32},
    {true, 16, 16, 16, MatrixType::kS8},   {true, 32, 8, 16, MatrixType::kS8},
    {true, 8, 32, 16, MatrixType::kS8},    {true, 8, 8, 4, MatrixType::kF64},
    {true, 8, 8, 32, MatrixType::kS4},     {true, 8, 8, 128, MatrixType::kB1},
};

MatrixType shapeClass(MatrixType t) {
  if (t == MatrixType::kU8) return MatrixType::kS8;
  if (t == MatrixType::kU4) return MatrixType::kS4;
  if (t == MatrixType::kE5M2) return MatrixType::kE4M3;  // fp8 of either kind, mixed allowed
  return t;
}

bool knownShape(bool wmma, unsigned m, unsigned n, unsigned k, MatrixType input) {
  for (const auto& row : kMatrixShapes)
    if (row.wmma == wmma && row.m == m && row.n == n && row.k == k &&
        row.input == shapeClass(input))
      return true;
  return false;
}

// The accumulator types each input type allows.
bool accumulatorFits(MatrixType input, MatrixType acc) {
  switch (input) {
    case MatrixType::kF16:
    case MatrixType::kE4M3:
    case MatrixType::kE5M2:
      return acc == MatrixType::kF16 || acc == MatrixType::kF32;
    case MatrixType::kBF16:
    case MatrixType::kTF32:
      return acc == MatrixType::kF32;
    case MatrixType::kF64:
      return acc == MatrixType::kF64;
    default:
      return acc == MatrixType::kS32;
  }
}

}  // namespace

unsigned matrixTypeBits(MatrixType t) {
  switch (t) {
    case MatrixType::kF16:
    case MatrixType::kBF16:
      return 16;
    case MatrixType::kF64:
      return 64;
    case MatrixType::kS8:
    case MatrixType::kU8:
    case MatrixType::kE4M3:
    case MatrixType::kE5M2:
      return 8;
    case MatrixType::kS4:
    case MatrixType::kU4:
      return 4;
    case MatrixType::kB1:
      return 1;
    default:
      return 32;
  }
}

unsigned matrixRegisterBits(MatrixType t) { return t == MatrixType::kF64 ? 64 : 32; }

MatrixType fragmentType(const MatrixInstr& in, MatrixUse use) {
  switch (use) {
    case MatrixUse::kA:
      return in.a;
    case MatrixUse::kB:
      return in.b;
    case MatrixUse::kC:
      return in.c;
    case MatrixUse::kD:
      return in.d;
  }
  return in.a;
}

unsigned fragmentRows(const MatrixInstr& in, MatrixUse use) {
  if (in.kind == MatrixKind::kLdmatrix || in.kind == MatrixKind::kStmatrix ||
      in.kind == MatrixKind::kMovmatrix)
    return 8u * in.k;  // the 8x8 matrices stacked
  return use == MatrixUse::kB ? in.k : in.m;
}

unsigned fragmentCols(const MatrixInstr& in, MatrixUse use) {
  if (in.kind == MatrixKind::kLdmatrix || in.kind == MatrixKind::kStmatrix ||
      in.kind == MatrixKind::kMovmatrix)
    return 8;
  return use == MatrixUse::kA ? in.k : in.n;
}

unsigned fragmentElements(const MatrixInstr& in, MatrixUse use) {
  // wmma's .f16 multiplicand fragments are eight .f16x2 registers in every shape (the ISA's
  // fragment table), whatever the matrix size.
  if (in.wmma && (use == MatrixUse::kA || use == MatrixUse::kB) &&
      fragmentType(in, use) == MatrixType::kF16)
    return 16;
  return fragmentRows(in, use) * fragmentCols(in, use) / 32;
}

unsigned fragmentRegisters(const MatrixInstr& in, MatrixUse use) {
  const MatrixType t = fragmentType(in, use);
  const unsigned perRegister = matrixRegisterBits(t) / matrixTypeBits(t);
  return (fragmentElements(in, use) + perRegister - 1) / perRegister;
}

MatrixPosition fragmentPosition(const MatrixInstr& in, MatrixUse use, unsigned lane,
                                unsigned element) {
  const unsigned group = lane >> 2, inGroup = lane & 3;  // the ISA's groupID, threadID_in_group
  const unsigned rows = fragmentRows(in, use), cols = fragmentCols(in, use);
  if (in.kind == MatrixKind::kLdmatrix || in.kind == MatrixKind::kStmatrix ||
      in.kind == MatrixKind::kMovmatrix) {
    // Register j holds 8x8 matrix j: lane l has row l/4, columns 2(l%4) and 2(l%4)+1; .trans
    // (and movmatrix's result) holds the transpose.
    const unsigned matrix = element / 2, half = element % 2;
    const bool transposed = in.kind == MatrixKind::kMovmatrix ? use == MatrixUse::kD : in.transpose;
    const unsigned r = group, c = inGroup * 2 + half;
    return {static_cast<uint16_t>(matrix * 8 + (transposed ? c : r)),
            static_cast<uint16_t>(transposed ? r : c)};
  }
  if (in.wmma) {
    // The emu's wmma layout: element e of lane l is element (32e + l) of the matrix in row-major
    // order, wrapping around where the fragment holds more elements than its share.
    const unsigned linear = (element * 32 + lane) % (rows * cols);
    return {static_cast<uint16_t>(linear / cols), static_cast<uint16_t>(linear % cols)};
  }
  const MatrixType t = fragmentType(in, use);
  if (use == MatrixUse::kC || use == MatrixUse::kD) {
    // c0,c1: row groupID; c2,c3 (m16 only): row groupID + 8; columns 2*threadID_in_group + i.
    return {static_cast<uint16_t>(group + 8 * (element >> 1)),
            static_cast<uint16_t>(inGroup * 2 + (element & 1))};
  }
  const unsigned perRegister = matrixRegisterBits(t) / matrixTypeBits(t);
  const unsigned reg = element / perRegister, i = element % perRegister;
  // Each register covers 4 * perRegister consecutive k; lane l takes perRegister of them at
  // threadID_in_group * perRegister. For m16 A, odd registers hold rows groupID + 8.
  if (use == MatrixUse::kA) {
    const unsigned kBlock = in.m == 16 ? reg >> 1 : reg;
    const unsigned row = in.m == 16 ? group + 8 * (reg & 1) : group;
    return {static_cast<uint16_t>(row),
            static_cast<uint16_t>(inGroup * perRegister + i + kBlock * 4 * perRegister)};
  }
  return {static_cast<uint16_t>(inGroup * perRegister + i + reg * 4 * perRegister),
          static_cast<uint16_t>(group)};
}

std::string decodeMatrixOpcode(std::string_view opcode, MatrixInstr* out, bool* invalid) {
  *invalid = false;
  std::vector<std::string_view> parts;
  for (size_t start = 0;;) {
    const size_t dot = opcode.find('.', start);
    parts.push_back(opcode.substr(start, dot == std::string_view::npos ? dot : dot - start));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  const std::string_view base = parts[0];
  const std::string op(opcode);
  auto bad = [&](const std::string& why) {
    *invalid = true;
    return op + ": " + why;
  };
  MatrixInstr m;
  std::vector<MatrixType> types;
  std::vector<bool> layouts;  // true = .row
  bool sync = false, haveShape = false;
  int count = 0, use = -1;
  bool load = false, store = false, mmaWord = false, rounding = false;
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string_view p = parts[i];
    if (auto t = parseMatrixType(p)) {
      types.push_back(*t);
    } else if (p == "sync") {
      sync = true;
    } else if (p == "aligned" || p == "global" || p == "shared" || p == "shared::cta") {
    } else if (p == "row" || p == "col") {
      layouts.push_back(p == "row");
    } else if (p == "satfinite") {
      m.satfinite = true;
    } else if (p == "trans") {
      m.transpose = true;
    } else if (p == "x1" || p == "x2" || p == "x4") {
      count = p[1] - '0';
    } else if (p == "xor" || p == "and") {
      m.bitOp = p == "xor" ? MatrixBitOp::kXorPopc : MatrixBitOp::kAndPopc;
    } else if (p == "popc") {
    } else if (p == "rn") {
      rounding = true;
    } else if (base == "wmma" && (p == "a" || p == "b" || p == "c" || p == "d")) {
      use = p[0] - 'a';
    } else if (base == "wmma" && (p == "load" || p == "store" || p == "mma")) {
      load = p == "load";
      store = p == "store";
      mmaWord = p == "mma";
    } else if (p.size() > 3 && p[0] == 'm' && p.find('n') != std::string_view::npos &&
               p.find('k') != std::string_view::npos && !haveShape) {
      unsigned mm = 0, nn = 0, kk = 0;
      if (std::sscanf(std::string(p).c_str(), "m%un%uk%u", &mm, &nn, &kk) != 3)
        return op + ": unsupported matrix shape ." + std::string(p);
      m.m = static_cast<uint8_t>(mm);
      m.n = static_cast<uint8_t>(nn);
      m.k = static_cast<uint16_t>(kk);
      haveShape = true;
    } else if (p == "m8n8" || p == "m16n16" || p == "m16n8" || p == "m8n16") {
      if (p != "m8n8")
        return op + ": only the .m8n8 shape of " + std::string(base) + " is supported";
      m.m = m.n = 8;
      haveShape = true;
    } else if (p == "sp" || p == "sp::ordered_metadata") {
      return op + ": sparse mma (mma.sp) is not supported";
    } else if (p.rfind("kind::", 0) == 0 || p.rfind("block_scale", 0) == 0 ||
               p.rfind("scale_vec", 0) == 0) {
      return op + ": block-scaled and .kind:: mma forms are not supported";
    } else if (p.rfind("e2m", 0) == 0 || p.rfind("e3m", 0) == 0) {
      return op + ": fp6/fp4 matrix inputs (." + std::string(p) + ") are not supported";
    } else if (p == "rz" || p == "rm" || p == "rp") {
      return op + ": directed rounding of f64 mma is not supported";
    } else {
      return op + ": unsupported modifier ." + std::string(p);
    }
  }
  if (!sync) return bad("needs .sync");
  if (!haveShape) return bad("needs a shape");

  if (base == "ldmatrix" || base == "stmatrix" || base == "movmatrix") {
    m.kind = base == "ldmatrix"   ? MatrixKind::kLdmatrix
             : base == "stmatrix" ? MatrixKind::kStmatrix
                                  : MatrixKind::kMovmatrix;
    if (m.kind == MatrixKind::kMovmatrix) {
      if (!m.transpose) return bad("needs .trans");
      count = 1;
    } else if (count == 0) {
      return bad("needs .x1, .x2 or .x4");
    }
    if (types.size() != 1 || opcode.find(".b16") == std::string_view::npos)
      return bad("needs .b16");
    m.k = static_cast<uint16_t>(count);
    m.a = m.b = m.c = m.d = MatrixType::kF16;  // moved as raw 16-bit data
    *out = m;
    return "";
  }

  m.wmma = base == "wmma";
  if (!m.wmma) {
    if (base != "mma") return op + ": unsupported instruction";
    m.kind = MatrixKind::kMma;
    if (m.m == 8 && m.n == 8 && m.k == 4 && types.size() == 4 && types[1] == MatrixType::kF16)
      return op +
             ": mma.sync.m8n8k4 with .f16 inputs (Volta quad-pair fragments) is not "
             "supported";
    if (types.size() != 4) return bad("needs .dtype.atype.btype.ctype");
    m.d = types[0];
    m.a = types[1];
    m.b = types[2];
    m.c = types[3];
    if (layouts.size() != 2 || !layouts[0] || layouts[1])
      return bad("needs .row.col (the only layouts of this shape)");
  } else if (load || store) {
    m.kind = load ? MatrixKind::kWmmaLoad : MatrixKind::kWmmaStore;
    if (use < 0 || (store && use != 3) || (load && use == 3))
      return bad("wmma.load needs .a, .b or .c and wmma.store needs .d");
    m.use = static_cast<MatrixUse>(use);
    if (types.size() != 1 || layouts.size() != 1) return bad("needs one layout and one type");
    m.rowMajor = layouts[0];
    const MatrixType t = types[0];
    if (m.use == MatrixUse::kA || m.use == MatrixUse::kB) {
      if (!knownShape(true, m.m, m.n, m.k, t)) return op + ": unsupported wmma shape or type";
      m.a = m.b = t;
      if ((t == MatrixType::kS4 || t == MatrixType::kU4 || t == MatrixType::kB1) &&
          m.rowMajor != (m.use == MatrixUse::kA))
        return bad("sub-byte fragments need .row for a and .col for b");
    } else {
      bool any = false;
      for (const auto& row : kMatrixShapes)
        any |= row.wmma && row.m == m.m && row.n == m.n && row.k == m.k &&
               accumulatorFits(row.input, t);
      if (!any) return op + ": unsupported wmma shape or type";
      m.c = m.d = t;
    }
    *out = m;
    return "";
  } else if (mmaWord) {
    m.kind = MatrixKind::kWmmaMma;
    if (layouts.size() != 2) return bad("needs .alayout.blayout");
    m.rowMajorA = layouts[0];
    m.rowMajorB = layouts[1];
    if (types.size() == 2) {  // .f16 forms: .dtype.ctype
      m.a = m.b = MatrixType::kF16;
      m.d = types[0];
      m.c = types[1];
    } else if (types.size() == 4) {
      m.d = types[0];
      m.a = types[1];
      m.b = types[2];
      m.c = types[3];
    } else {
      return bad("needs .dtype.ctype or .dtype.atype.btype.ctype");
    }
    if ((m.a == MatrixType::kS4 || m.a == MatrixType::kU4 || m.a == MatrixType::kB1) &&
        (!m.rowMajorA || m.rowMajorB))
      return bad("sub-byte wmma.mma needs .row.col");
  } else {
    return bad("needs .load, .store or .mma");
  }
  // mma.sync and wmma.mma: shape, types and modifiers.
  if (!knownShape(m.wmma, m.m, m.n, m.k, m.a))
    return op + ": unsupported matrix shape or input type (the emu runs the shapes of " +
           "docs/architecture.md)";
  if (shapeClass(m.a) != shapeClass(m.b)) return bad("a and b types do not match");
  if (!accumulatorFits(m.a, m.c) || !accumulatorFits(m.a, m.d))
    return bad("accumulator type does not fit the input type");
  if (m.a != MatrixType::kF16 && m.c != m.d) return bad("dtype and ctype must match");
  if (shapeClass(m.a) == MatrixType::kE4M3 && m.wmma) return bad("wmma has no fp8 inputs");
  // Floating-point wmma.mma once took .satfinite (deprecated since PTX 6.4).
  if (m.satfinite && !isIntegerInput(m.a))
    return op + ": .satfinite on floating-point matrix products is not supported";
  if ((m.a == MatrixType::kB1) != (m.bitOp != MatrixBitOp::kNone))
    return bad(".b1 needs .xor.popc or .and.popc (and only .b1 takes them)");
  if (rounding && m.a != MatrixType::kF64) return bad(".rn needs .f64");
  *out = m;
  return "";
}

}  // namespace gpupool::ptx
