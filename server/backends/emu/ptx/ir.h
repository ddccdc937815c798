// Decoded program: the interpreter's input. Built and validated by ir_builder.cpp, immutable
// afterwards (except the bound global addresses). Program counters index ModuleImage::code.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ptx_module.h"

namespace gpupool::ptx {

enum class Type : uint8_t {
  None,
  Pred,
  B8,
  B16,
  B32,
  B64,
  U8,
  U16,
  U32,
  U64,
  S8,
  S16,
  S32,
  S64,
  F16,
  F16x2,
  BF16,
  BF16x2,
  F32,
  F64,
};

inline unsigned typeBytes(Type t) {
  switch (t) {
    case Type::B8:
    case Type::U8:
    case Type::S8:
      return 1;
    case Type::B16:
    case Type::U16:
    case Type::S16:
    case Type::F16:
    case Type::BF16:
      return 2;
    case Type::B32:
    case Type::U32:
    case Type::S32:
    case Type::F32:
    case Type::F16x2:
    case Type::BF16x2:
      return 4;
    case Type::B64:
    case Type::U64:
    case Type::S64:
    case Type::F64:
      return 8;
    case Type::Pred:
      return 1;
    default:
      return 0;
  }
}
inline bool isSigned(Type t) {
  return t == Type::S8 || t == Type::S16 || t == Type::S32 || t == Type::S64;
}
inline bool isFloat(Type t) {
  return t == Type::F16 || t == Type::F16x2 || t == Type::BF16 || t == Type::BF16x2 ||
         t == Type::F32 || t == Type::F64;
}

enum class Op : uint8_t {
  Mov,
  Ld,
  St,
  Add,
  Sub,
  Mul,
  Mad,
  Fma,
  Div,
  Rem,
  Min,
  Max,
  Neg,
  Abs,
  And,
  Or,
  Xor,
  Not,
  Cnot,
  Shl,
  Shr,
  Setp,
  Selp,
  Cvt,
  Cvta,
  CvtaTo,
  Bra,
  Ret,
  Exit,
  Call,
  Bar,
  BarWarpSync,
  Membar,
  Atom,
  Red,
  Shfl,
  Vote,
  Activemask,
  Redux,
  Match,
  Ex2,
  Lg2,
  Sin,
  Cos,
  Rcp,
  Rsqrt,
  Sqrt,
  Tanh,
  Copysign,
  Bfe,
  Bfi,
  Bfind,
  Clz,
  Popc,
  Brev,
  Prmt,
  Shf,
  Testp,
  Addc,
  Subc,
  Madc,
  Trap,
  Nop,
  CpAsync,
  Isspacep,
  Mul24,
  Mad24,
  Sad,
  Bmsk,
};

enum class Space : uint8_t { Generic, Global, Shared, Local, Param, Const };

enum class Round : uint8_t { Default, RN, RZ, RM, RP, RNI, RZI, RMI, RPI };

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
};

enum class CmpOp : uint8_t {
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,
  Lo,
  Ls,
  Hi,
  Hs,
  Equ,
  Neu,
  Ltu,
  Leu,
  Gtu,
  Geu,
  Num,
  Nan
};
enum class BoolOp : uint8_t { None, And, Or, Xor };
enum class AtomOp : uint8_t { Add, Min, Max, Inc, Dec, And, Or, Xor, Exch, Cas };
enum class ShflMode : uint8_t { Up, Down, Bfly, Idx };
enum class VoteMode : uint8_t { All, Any, Uni, Ballot };
enum class ReduxOp : uint8_t { Add, Min, Max, And, Or, Xor };
enum class TestpOp : uint8_t { Finite, Infinite, Number, NotANumber, Normal, Subnormal };

enum class Special : uint8_t {
  TidX,
  TidY,
  TidZ,
  NtidX,
  NtidY,
  NtidZ,
  CtaidX,
  CtaidY,
  CtaidZ,
  NctaidX,
  NctaidY,
  NctaidZ,
  LaneId,
  WarpId,
  NWarpId,
  SmId,
  NSmId,
  LanemaskEq,
  LanemaskLt,
  LanemaskLe,
  LanemaskGt,
  LanemaskGe,
  Clock,
  Clock64,
  GlobalTimer,
  DynamicSmemSize,
  TotalSmemSize,
  WarpSize,
  GridId,
  ReservedSmemBegin,
  ReservedSmemEnd,
  ReservedSmemCap,
  ReservedSmem0,
  ReservedSmem1,
};

enum class SymbolKind : uint8_t {
  None,
  Global,       // module .global/.const variable: index into ModuleImage::globals
  Shared,       // .shared variable: index into ModuleImage::sharedVars (offset is per kernel)
  Local,        // offset inside the current function's .local frame
  KernelParam,  // offset inside the kernel parameter block
  FrameParam,   // offset inside the current call frame's parameter area
  Function,     // index into ModuleImage::functions (its fake code address)
};

enum class OperandKind : uint8_t { None, Reg, Imm, Special, Symbol, Vector, Sink, Address, Label };

struct Operand {
  OperandKind kind = OperandKind::None;
  bool negate = false;                   // !p
  SymbolKind symbol = SymbolKind::None;  // Symbol and symbol-based Address
  uint8_t count = 0;                     // Vector: element count
  static constexpr uint32_t kNoReg = 0xffffffffu;
  uint32_t index =
      kNoReg;        // register / special id / symbol index / label pc / first vector element
  uint64_t imm = 0;  // immediate bits, or offset added to a symbol / address base
};

struct Instr {
  Op op = Op::Nop;
  Type type = Type::None;
  Type type2 = Type::None;  // cvt/cvt-like source type
  Space space = Space::Generic;
  Round round = Round::Default;
  uint8_t mode =
      0;  // CmpOp / AtomOp / ShflMode / VoteMode / ReduxOp / TestpOp / match all(1)/any(0)
  BoolOp boolOp = BoolOp::None;
  uint8_t vec = 1;
  uint32_t flags = 0;
  uint32_t guard = Operand::kNoReg;
  bool guardNegated = false;
  uint8_t numOps = 0;
  Operand ops[6];         // a dual destination (p|q) puts its second register in ops[5]
  uint32_t function = 0;  // owning function
  uint32_t line = 0;
  uint32_t call = 0;  // Call: index into ModuleImage::calls
  bool has(Flag f) const { return (flags & f) != 0; }
};

struct ParamSlot {
  uint32_t offset = 0, size = 0;
};

struct CallSite {
  int32_t callee = -1;  // function index, or -1 for an indirect call through ops[0] of the instr
  std::vector<ParamSlot> args;     // caller-frame slots of the arguments, in order
  std::vector<ParamSlot> results;  // caller-frame slots receiving the return values
};

enum class Builtin : uint8_t { None, Vprintf, Malloc, Free, AssertFail };

struct FunctionImage {
  std::string name;
  bool isEntry = false;
  bool defined = false;
  Builtin builtin = Builtin::None;
  uint32_t entryPc = 0, endPc = 0;
  uint32_t numRegs = 0;
  std::vector<ParamSlot> params;   // entry: kernel param block; func: frame param area
  std::vector<ParamSlot> returns;  // func: frame param area
  std::vector<uint32_t> paramAligns;
  uint32_t paramBytes = 0;       // entry: param block size
  uint32_t frameParamBytes = 0;  // func: own params + returns + call-site params
  uint32_t localBytes = 0;
  uint32_t maxThreads = 0;
  std::vector<uint32_t> sharedUsed;  // shared variable indices referenced directly
  std::vector<uint32_t> callees;     // direct callees; indirectCalls means "any function"
  bool indirectCalls = false;
};

struct Relocation {
  uint64_t offset = 0;  // byte offset inside the variable image
  uint8_t size = 8;
  SymbolKind target = SymbolKind::Global;  // Global or Function
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
  std::vector<Operand> vectorElements;  // Vector operands point here
  std::vector<CallSite> calls;
  std::vector<FunctionImage> functions;
  std::vector<GlobalImage> globals;
  std::vector<GlobalVariable> globalList;  // globals[i].info, for Module::globals()
  std::vector<SharedVariable> sharedVars;
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
