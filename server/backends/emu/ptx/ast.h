// Syntax tree produced by the parser: PTX as written, names unresolved.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpupool::ptx {

struct AstOperand {
  enum class Kind : uint8_t {
    kName,     // register, special register, symbol or label; `negated` for !p
    kInteger,  // integer literal (negative literals are stored two's complement)
    kF32Bits,  // 0f literal
    kF64Bits,  // 0d literal
    kDecimal,  // decimal float literal
    kVector,   // {a, b, _}
    kAddress,  // [base + offset]; base may be empty for an absolute address
    kList,     // (a, b) in call
    kSink,     // _
    kDual,     // p|q
  };
  Kind kind = Kind::kName;
  bool negated = false;
  std::string name;      // Name, Address base, Dual first
  std::string name2;     // Dual second
  uint64_t integer = 0;  // literal bits or Address offset
  double real = 0;
  std::vector<AstOperand> elements;  // Vector / List
};

struct AstInstruction {
  std::string guard;  // predicate register, empty when unguarded
  bool guardNegated = false;
  std::string opcode;  // full dotted opcode, e.g. "ld.global.nc.v4.f32"
  std::vector<AstOperand> operands;
  uint32_t line = 0;
};

// One element of a variable initializer.
struct AstInitializer {
  enum class Kind : uint8_t { kInteger, kF32Bits, kF64Bits, kDecimal, kSymbol };
  Kind kind = Kind::kInteger;
  uint64_t integer = 0;  // literal bits, or byte offset added to a symbol
  double real = 0;
  std::string symbol;  // Symbol: address of this global or function (generic() or plain)
};

struct AstVariable {
  std::string space;         // ".reg", ".shared", ".local", ".param", ".global", ".const"
  std::string type;          // ".b32", ".f32", ".pred", ...
  uint32_t vectorWidth = 1;  // .v2/.v4 variables
  uint32_t align = 0;        // 0 = natural
  std::string name;
  uint32_t rangeCount = 0;           // %r<N> declares %r0..%r(N-1)
  std::vector<uint64_t> dimensions;  // array dimensions; a 0 entry means [] (extern/unsized)
  bool isExtern = false;
  bool isManaged = false;  // .attribute(.managed): a __managed__ variable
  std::vector<AstInitializer> initializer;
  bool hasInitializer = false;
  uint32_t line = 0;
};

struct AstStatement {
  enum class Kind : uint8_t { kInstruction, kLabel, kVariable, kOpenScope, kCloseScope };
  Kind kind = Kind::kInstruction;
  AstInstruction instruction;
  AstVariable variable;
  std::string label;
  uint32_t line = 0;
};

struct AstFunction {
  std::string name;
  bool isEntry = false;
  bool hasBody = false;  // false for prototypes such as `.extern .func vprintf(...)`
  std::vector<AstVariable> returnParams;
  std::vector<AstVariable> params;
  uint32_t maxThreads = 0;  // product of .maxntid / .reqntid, 0 when absent
  // Thread-block cluster directives: .reqnctapercluster's shape (0s when absent),
  // .explicitcluster, .maxclusterrank (0 when absent).
  uint32_t requiredCluster[3] = {0, 0, 0};
  bool explicitCluster = false;
  uint32_t maxClusterRank = 0;
  std::vector<AstStatement> body;
  uint32_t line = 0;
};

struct AstModule {
  uint32_t versionMajor = 0, versionMinor = 0;
  uint32_t targetSm = 0;
  bool debug = false;
  uint32_t addressSize = 64;
  std::vector<AstVariable> variables;  // module-scope .global/.const/.shared
  std::vector<AstFunction> functions;
};

}  // namespace gpupool::ptx
