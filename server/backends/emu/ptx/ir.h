// Decoded program: the interpreter's input. Built and validated by ir_builder.cpp, immutable
// afterwards (except the bound global addresses). Program counters index ModuleImage::code.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ptx_module.h"
#include "texture_sampling.h"

namespace gpupool::ptx {

enum class Type : uint8_t {
  kNone,
  kPred,
  kB8,
  kB16,
  kB32,
  kB64,
  kU8,
  kU16,
  kU32,
  kU64,
  kS8,
  kS16,
  kS32,
  kS64,
  kF16,
  kF16x2,
  kBF16,
  kBF16x2,
  kF32,
  kF64,
};

inline unsigned typeBytes(Type t) {
  switch (t) {
    case Type::kB8:
    case Type::kU8:
    case Type::kS8:
      return 1;
    case Type::kB16:
    case Type::kU16:
    case Type::kS16:
    case Type::kF16:
    case Type::kBF16:
      return 2;
    case Type::kB32:
    case Type::kU32:
    case Type::kS32:
    case Type::kF32:
    case Type::kF16x2:
    case Type::kBF16x2:
      return 4;
    case Type::kB64:
    case Type::kU64:
    case Type::kS64:
    case Type::kF64:
      return 8;
    case Type::kPred:
      return 1;
    default:
      return 0;
  }
}
inline bool isSigned(Type t) {
  return t == Type::kS8 || t == Type::kS16 || t == Type::kS32 || t == Type::kS64;
}
inline bool isFloat(Type t) {
  return t == Type::kF16 || t == Type::kF16x2 || t == Type::kBF16 || t == Type::kBF16x2 ||
         t == Type::kF32 || t == Type::kF64;
}

enum class Op : uint8_t {
  kMov,
  kLd,
  kSt,
  kAdd,
  kSub,
  kMul,
  kMad,
  kFma,
  kDiv,
  kRem,
  kMin,
  kMax,
  kNeg,
  kAbs,
  kAnd,
  kOr,
  kXor,
  kNot,
  kCnot,
  kShl,
  kShr,
  kSetp,
  kSet,  // set: a comparison written as a number (all ones, 1.0 or 0) into an integer or float
  kSelp,
  kCvt,
  kCvtPack,  // cvt.pack.sat: two s32 saturated to `mode` bits each, packed (type: kS32 signed)
  kCvta,
  kCvtaTo,
  kBra,
  kRet,
  kExit,
  kCall,
  kBar,
  kBarWarpSync,
  kMembar,
  kAtom,
  kRed,
  kShfl,
  kVote,
  kActivemask,
  kRedux,
  kMatch,
  kEx2,
  kLg2,
  kSin,
  kCos,
  kRcp,
  kRsqrt,
  kSqrt,
  kTanh,
  kCopysign,
  kBfe,
  kBfi,
  kBfind,
  kClz,
  kPopc,
  kBrev,
  kPrmt,
  kShf,
  kTestp,
  kAddc,
  kSubc,
  kMadc,
  kTrap,
  kNop,
  kCpAsync,
  kIsspacep,  // mode 1: .shared::cluster (any CTA of the cluster), 0: this CTA only
  kMul24,
  kMad24,
  kSad,
  kBmsk,
  kElect,
  kLop3,
  kDp4a,
  kDp2a,
  kFns,
  kMbarrier,
  kPacked16,  // add/sub/min/max on .u16x2/.s16x2: two halfwords at once
  kVabsdiff4,
  kVideoShift,  // vshl/vshr (mode: VideoShiftMode): ops {d, a, b} or {d, a, b, c} with
                // .add/.min/.max
  // tex.{1d,2d,3d,a1d,a2d,cube,acube}.v4 and tld4.{r,g,b,a}.{2d,a2d}.v4 (mode bits 4-6: the
  // channel gathered plus one): ops {data vector, texture handle, coordinate vector}
  kTex,
  kSuld,  // suld.b: ops {data, surface handle, coordinate vector}
  kSust,  // sust.b: ops {data, surface handle, coordinate vector}
  // txq / suq (mode: the TexQuery, plus kTexQueryOfSurface for suq): ops {d, handle} or, with
  // txq.level, {d, handle, level of detail}
  kTexQuery,
  // Warp-wide matrix instructions (mma.sync, wmma.*, ldmatrix, stmatrix, movmatrix): Instr::call
  // indexes ModuleImage::matrixInstrs; semantics in matrix_instructions.cc.
  kMatrix,
  // cp.async.bulk (non-tensor), cp.reduce.async.bulk and cp.async.bulk.prefetch (Instr::mode:
  // BulkCopyKind): ops {dst address, src address, size, mbarrier address (or none)}; prefetch:
  // ops {src address, size}. Reductions: Instr::type is the element type, Instr::call the AtomOp.
  kBulkCopy,
  // Thread-block clusters (cluster.h). barrier.cluster.arrive/wait (Instr::mode:
  // ClusterBarrierMode): ops none; mapa: ops {d, shared address, target rank} (Instr::space
  // kShared for .shared::cluster, kGeneric for a generic address); getctarank: ops {d, address}.
  kClusterBarrier,
  kMapa,
  kGetCtaRank,
};
enum class ClusterBarrierMode : uint8_t { kArrive, kWait };

enum class Space : uint8_t { kGeneric, kGlobal, kShared, kLocal, kParam, kConst };

enum class Round : uint8_t { kDefault, kRN, kRZ, kRM, kRP, kRNI, kRZI, kRMI, kRPI };

enum Flag : uint32_t {
  kFtz = 1u << 0,
  kSat = 1u << 1,
  kApprox = 1u << 2,
  kFull = 1u << 3,
  kHi = 1u << 4,
  kLo = 1u << 5,
  kWide = 1u << 6,
  kCC = 1u << 7,
  kUni = 1u << 8,
  kShiftAmt = 1u << 9,
  kWrap = 1u << 10,
  kClamp = 1u << 11,
  kLeft = 1u << 12,
  kNoFtz = 1u << 13,
  kArrive = 1u << 14,
  kRelu = 1u << 15,
  kParity = 1u << 16,        // mbarrier.test_wait/try_wait.parity
  kExpectTx = 1u << 17,      // mbarrier.arrive{_drop}.expect_tx: ops[2] is the transaction count
  kPropagateNan = 1u << 18,  // min.NaN/max.NaN: a NaN operand makes the result NaN
  // cp.async.bulk{.tensor} .multicast::cluster: ops[4] is the 16-bit mask of the cluster's CTAs
  // whose shared memory (and mbarrier) at the same offsets receive the data.
  kMulticast = 1u << 19,
  // cp{.reduce}.async.bulk.tensor .im2col (loads: the im2col offsets' vector, .b16, in ops[5]) and
  // .im2col_no_offs (stores and reductions): the map is an im2col one, walked in im2col order.
  kIm2col = 1u << 20,
};

enum class CmpOp : uint8_t {
  kEq,
  kNe,
  kLt,
  kLe,
  kGt,
  kGe,
  kLo,
  kLs,
  kHi,
  kHs,
  kEqu,
  kNeu,
  kLtu,
  kLeu,
  kGtu,
  kGeu,
  kNum,
  kNan
};
enum class BoolOp : uint8_t { kNone, kAnd, kOr, kXor };
enum class AtomOp : uint8_t { kAdd, kMin, kMax, kInc, kDec, kAnd, kOr, kXor, kExch, kCas };
enum class ShflMode : uint8_t { kUp, kDown, kBfly, kIdx };
enum class VoteMode : uint8_t { kAll, kAny, kUni, kBallot };
// bar / barrier: wait, arrive without waiting, or wait and reduce a predicate over the arrivals.
enum class BarMode : uint8_t { kSync, kArrive, kRedPopc, kRedAnd, kRedOr };
enum class MbarrierOp : uint8_t {
  kInit,
  kArrive,
  kArriveDrop,
  kTestWait,
  kTryWait,
  kInval,
  kPendingCount,
  kExpectTx,   // ops {none, address, transaction bytes}
  kCompleteTx  // ops {none, address, transaction bytes}
};
// Op::kBulkCopy's direction. A .shared::cluster address may name another CTA's shared memory
// (cluster.h).
enum class BulkCopyKind : uint8_t {
  kGlobalToShared,
  kSharedToShared,
  kSharedToGlobal,
  kPrefetch,
  kReduceSharedToShared,
  kReduceSharedToGlobal,
  // cp.async.bulk.tensor: ops {shared address, tensor map's generic address (register),
  // coordinate vector (.s32), mbarrier address (load) or none (store)}; kIm2col for im2col modes.
  kTensorLoad,
  kTensorStore,
  // cp.reduce.async.bulk.tensor: as kTensorStore, each element combined with memory's by the
  // AtomOp in Instr::call.
  kTensorReduce
};
// cvt with an fp8 pair (Instr::mode; 0 for every other cvt): to e4m3x2/e5m2x2 from f32 or f16x2
// (Instr::type), or from them to f16x2. kToTf32: cvt.{rna,rn,rz}.tf32.f32 (Instr::round kRN, kRZ,
// or kDefault for .rna).
enum class Fp8Cvt : uint8_t { kNone, kToE4m3, kToE5m2, kFromE4m3, kFromE5m2, kToTf32 };
// Op::kNop's mode for nanosleep: the thread backs off, so its warp lets the block's others run.
inline constexpr uint8_t kNopYields = 1;
// Op::kVideoShift's mode: the direction in bit 0, the secondary operation on c in bits 1-2, and
// bit 3 for .clamp (else .wrap).
enum class VideoShiftMode : uint8_t { kLeft = 0, kRight = 1 };
enum class VideoSecondaryOp : uint8_t { kNone = 0, kAdd = 1, kMin = 2, kMax = 3 };

enum class Packed16Op : uint8_t { kAdd, kSub, kMin, kMax };
enum class ReduxOp : uint8_t { kAdd, kMin, kMax, kAnd, kOr, kXor };
// tex/suld/sust geometry (Instr::mode, low nibble); surfaces keep their SurfaceBoundary
// (texture_sampling.h) in the high nibble.
enum class TexGeometry : uint8_t { k1d, k2d, k3d, kA1d, kA2d, kCube, kACube };
// suq's mark in Op::kTexQuery's mode (the TexQuery is in texture_sampling.h).
inline constexpr uint8_t kTexQueryOfSurface = 0x80;
enum class TestpOp : uint8_t { kFinite, kInfinite, kNumber, kNotANumber, kNormal, kSubnormal };

enum class Special : uint8_t {
  kTidX,
  kTidY,
  kTidZ,
  kNtidX,
  kNtidY,
  kNtidZ,
  kCtaidX,
  kCtaidY,
  kCtaidZ,
  kNctaidX,
  kNctaidY,
  kNctaidZ,
  kLaneId,
  kWarpId,
  kNWarpId,
  kSmId,
  kNSmId,
  kLanemaskEq,
  kLanemaskLt,
  kLanemaskLe,
  kLanemaskGt,
  kLanemaskGe,
  kClock,
  kClock64,
  kGlobalTimer,
  kDynamicSmemSize,
  kTotalSmemSize,
  kWarpSize,
  kGridId,
  kReservedSmemBegin,
  kReservedSmemEnd,
  kReservedSmemCap,
  kReservedSmem0,
  kReservedSmem1,
  kGridWorkspaceLo,  // %envreg2: cooperative groups' grid workspace address, low word
  kGridWorkspaceHi,  // %envreg1: high word (load_env_reg64<1, 2> in driver_abi.h)
  // Thread-block clusters: a launch without one runs every CTA as a cluster of 1x1x1.
  kClusterIdX,
  kClusterIdY,
  kClusterIdZ,
  kNClusterIdX,
  kNClusterIdY,
  kNClusterIdZ,
  kClusterCtaidX,
  kClusterCtaidY,
  kClusterCtaidZ,
  kClusterNctaidX,
  kClusterNctaidY,
  kClusterNctaidZ,
  kClusterCtaRank,
  kClusterNctaRank,
  kIsExplicitCluster,
};

enum class SymbolKind : uint8_t {
  kNone,
  kGlobal,       // module .global/.const variable: index into ModuleImage::globals
  kShared,       // .shared variable: index into ModuleImage::sharedVars (offset is per kernel)
  kLocal,        // offset inside the current function's .local frame
  kKernelParam,  // offset inside the kernel parameter block
  kFrameParam,   // offset inside the current call frame's parameter area
  kFunction,     // index into ModuleImage::functions (its fake code address)
};

enum class OperandKind : uint8_t {
  kNone,
  kReg,
  kImm,
  kSpecial,
  kSymbol,
  kVector,
  kSink,
  kAddress,
  kLabel
};

struct Operand {
  OperandKind kind = OperandKind::kNone;
  bool negate = false;                    // !p
  SymbolKind symbol = SymbolKind::kNone;  // Symbol and symbol-based Address
  uint8_t count = 0;                      // Vector: element count
  static constexpr uint32_t kNoReg = 0xffffffffu;
  uint32_t index =
      kNoReg;        // register / special id / symbol index / label pc / first vector element
  uint64_t imm = 0;  // immediate bits, or offset added to a symbol / address base
};

struct Instr {
  Op op = Op::kNop;
  Type type = Type::kNone;
  Type type2 = Type::kNone;  // cvt/cvt-like source type
  Space space = Space::kGeneric;
  Round round = Round::kDefault;
  uint8_t mode =
      0;  // CmpOp / AtomOp / ShflMode / VoteMode / ReduxOp / TestpOp / match all(1)/any(0)
  BoolOp boolOp = BoolOp::kNone;
  uint8_t vec = 1;
  uint32_t flags = 0;
  uint32_t guard = Operand::kNoReg;
  bool guardNegated = false;
  uint8_t numOps = 0;
  Operand ops[6];         // a dual destination (p|q) puts its second register in ops[5]
  uint32_t function = 0;  // owning function
  uint32_t line = 0;
  uint32_t call = 0;  // Call: index into ModuleImage::calls; Matrix: into matrixInstrs
  bool has(Flag f) const { return (flags & f) != 0; }
};

// ---- warp-wide matrix instructions ----------------------------------------------------------
enum class MatrixKind : uint8_t {
  kMma,        // mma.sync: ops {d vector, a vector, b vector, c vector}
  kWmmaLoad,   // wmma.load.{a,b,c}: ops {fragment vector, address, stride (or none)}
  kWmmaStore,  // wmma.store.d: ops {address, fragment vector, stride (or none)}
  kWmmaMma,    // wmma.mma: ops like kMma
  kLdmatrix,   // ldmatrix: ops {destination vector, address}
  kStmatrix,   // stmatrix: ops {address, source vector}
  kMovmatrix,  // movmatrix: ops {destination, source}
};
// Element types of matrix fragments. kF16/kBF16 come two to a 32-bit register, 8-bit integers
// four, 4-bit integers eight, b1 thirty-two; kTF32 and 32-bit types one; kF64 one 64-bit register.
enum class MatrixType : uint8_t {
  kF16,
  kBF16,
  kTF32,
  kF32,
  kF64,
  kS8,
  kU8,
  kS4,
  kU4,
  kB1,
  kS32,
  kE4M3,  // fp8 inputs (sm_89+ mma.sync)
  kE5M2,
};
enum class MatrixUse : uint8_t { kA, kB, kC, kD };
enum class MatrixBitOp : uint8_t { kNone, kXorPopc, kAndPopc };

struct MatrixInstr {
  MatrixKind kind = MatrixKind::kMma;
  uint8_t m = 0, n = 0;
  uint16_t k = 0;  // ldmatrix/stmatrix: m = n = 8, k = number of 8x8 matrices
  MatrixType a = MatrixType::kF16, b = MatrixType::kF16;  // multiplicands (wmma.load/store: `a`
  MatrixType c = MatrixType::kF32, d = MatrixType::kF32;  // is the element type moved)
  MatrixUse use = MatrixUse::kA;                          // wmma.load/store: which fragment
  bool wmma = false;       // wmma.* fragment layout (unspecified by the ISA: the emu's own)
  bool rowMajorA = true;   // mma/wmma.mma: A row-major (mma.sync requires .row except m8n8k4)
  bool rowMajorB = false;  // mma/wmma.mma: B row-major (mma.sync requires .col)
  bool rowMajor = true;    // wmma.load/store: memory layout
  bool transpose = false;  // ldmatrix/stmatrix .trans
  bool satfinite = false;
  MatrixBitOp bitOp = MatrixBitOp::kNone;
};

namespace execution {
class BlockRunner;
}
// A routine specialized for one instruction's form (fast_steps.h): runs it for the lanes of
// `exec` of the runner's current warp.
using FastStep = void (*)(execution::BlockRunner&, const Instr&, uint32_t exec);

struct ParamSlot {
  uint32_t offset = 0, size = 0;
};

struct CallSite {
  int32_t callee = -1;  // function index, or -1 for an indirect call through ops[0] of the instr
  std::vector<ParamSlot> args;     // caller-frame slots of the arguments, in order
  std::vector<ParamSlot> results;  // caller-frame slots receiving the return values
};

enum class Builtin : uint8_t { kNone, kVprintf, kMalloc, kFree, kAssertFail, kGraphSetConditional };

struct FunctionImage {
  std::string name;
  bool isEntry = false;
  bool defined = false;
  Builtin builtin = Builtin::kNone;
  uint32_t entryPc = 0, endPc = 0;
  uint32_t numRegs = 0;
  std::vector<uint8_t> regUnits;  // per register: 32-bit units it takes (2 for 64-bit, 0 for .pred)
  std::vector<ParamSlot> params;  // entry: kernel param block; func: frame param area
  std::vector<ParamSlot> returns;  // func: frame param area
  std::vector<uint32_t> paramAligns;
  uint32_t paramBytes = 0;       // entry: param block size
  uint32_t frameParamBytes = 0;  // func: own params + returns + call-site params
  uint32_t localBytes = 0;
  uint32_t maxThreads = 0;
  uint32_t requiredCluster[3] = {0, 0, 0};
  bool explicitCluster = false;
  uint32_t maxClusterRank = 0;
  std::vector<uint32_t> sharedUsed;      // shared variable indices referenced directly
  std::vector<uint32_t> referencesUsed;  // texture/surface reference indices named directly
  std::vector<uint32_t> callees;         // direct callees; indirectCalls means "any function"
  bool indirectCalls = false;
};

struct Relocation {
  uint64_t offset = 0;  // byte offset inside the variable image
  uint8_t size = 8;
  SymbolKind target = SymbolKind::kGlobal;  // Global or Function
  uint32_t index = 0;
  uint64_t addend = 0;
};

struct GlobalImage {
  GlobalVariable info;
  std::vector<uint8_t> bytes;  // initial contents, zero where uninitialized
  std::vector<Relocation> relocations;
};

struct SharedVariable {
  std::string name;
  uint64_t size = 0;  // 0 for the extern dynamic array
  uint32_t align = 1;
  bool dynamic = false;
};

// Shared memory starts with a system-reserved region (%reserved_smem_offset_*, used by cooperative
// groups), as on sm_80+ GPUs; user variables follow it and only they count against the limits.
inline constexpr uint32_t kReservedSharedBytes = 1024;

struct ModuleImage {
  uint32_t targetSm = 0, ptxVersion = 0;
  std::vector<Instr> code;
  std::vector<FastStep> fastSteps;      // per pc: the instruction's fast step, or null
  std::vector<Operand> vectorElements;  // Vector operands point here
  std::vector<CallSite> calls;
  std::vector<MatrixInstr> matrixInstrs;
  std::vector<FunctionImage> functions;
  std::vector<GlobalImage> globals;
  std::vector<GlobalVariable> globalList;  // globals[i].info, for Module::globals()
  std::vector<SharedVariable> sharedVars;
  std::vector<TextureReference> references;  // .texref / .surfref, for Module::references()
  std::vector<KernelInfo> kernels;
  std::vector<uint32_t> kernelFunction;                    // kernels[i] -> functions index
  std::vector<std::vector<uint32_t>> kernelSharedOffsets;  // per kernel, per shared var
  std::vector<uint32_t> kernelDynamicSharedOffset;  // per kernel: where dynamic shared starts
  std::vector<std::string> instructionText;         // per pc, for diagnostics
  std::vector<uint64_t> globalAddresses;
  bool bound = false;
};

// Builds the image from PTX text; fills error and returns false on failure.
Status buildModuleImage(std::string_view ptx, ModuleImage* out);

}  // namespace gpupool::ptx
