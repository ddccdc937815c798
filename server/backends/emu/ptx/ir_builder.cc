// Semantic pass: AST -> ModuleImage. Resolves scoped registers, labels, symbols and parameter
// layouts, decodes opcodes into typed Instr records, and rejects anything the interpreter cannot
// execute, so that launches never meet an unknown instruction.
#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "half_float.h"
#include "ir.h"
#include "matrix_layout.h"
#include "parser.h"
#include "register_estimate.h"
#include "texture_sampling.h"

namespace gpupool::ptx {
namespace {

// Thrown from deep inside the builder; buildModuleImage() turns it into its Status.
struct LoadFailure {
  Status status;
};

[[noreturn]] void failInvalid(const std::string& m) {
  throw LoadFailure{Status::error(CUDA_ERROR_INVALID_PTX, m)};
}
[[noreturn]] void failUnsupported(const std::string& m) {
  throw LoadFailure{Status::error(CUDA_ERROR_NOT_SUPPORTED, m)};
}

Type parseType(std::string_view s) {
  static const std::pair<std::string_view, Type> kTypes[] = {
      {"pred", Type::kPred}, {"b8", Type::kB8},         {"b16", Type::kB16},
      {"b32", Type::kB32},   {"b64", Type::kB64},       {"u8", Type::kU8},
      {"u16", Type::kU16},   {"u32", Type::kU32},       {"u64", Type::kU64},
      {"s8", Type::kS8},     {"s16", Type::kS16},       {"s32", Type::kS32},
      {"s64", Type::kS64},   {"f16", Type::kF16},       {"f16x2", Type::kF16x2},
      {"bf16", Type::kBF16}, {"bf16x2", Type::kBF16x2}, {"f32", Type::kF32},
      {"f64", Type::kF64}};
  if (!s.empty() && s[0] == '.') s.remove_prefix(1);
  for (auto& [n, t] : kTypes)
    if (s == n) return t;
  return Type::kNone;
}

uint32_t naturalSize(const AstVariable& v) {
  Type t = parseType(v.type);
  if (t == Type::kNone) failUnsupported("unsupported variable type " + v.type + " for " + v.name);
  return typeBytes(t) * v.vectorWidth;
}

uint64_t variableSize(const AstVariable& v) {
  uint64_t n = naturalSize(v);
  for (uint64_t d : v.dimensions) n *= d;
  return n;
}

uint32_t variableAlign(const AstVariable& v) { return std::max<uint32_t>(v.align, naturalSize(v)); }

uint64_t alignUp(uint64_t v, uint64_t a) { return a ? (v + a - 1) / a * a : v; }

std::optional<Special> parseSpecial(std::string_view n) {
  static const std::pair<std::string_view, Special> kSpecials[] = {
      {"%tid.x", Special::kTidX},
      {"%tid.y", Special::kTidY},
      {"%tid.z", Special::kTidZ},
      {"%ntid.x", Special::kNtidX},
      {"%ntid.y", Special::kNtidY},
      {"%ntid.z", Special::kNtidZ},
      {"%ctaid.x", Special::kCtaidX},
      {"%ctaid.y", Special::kCtaidY},
      {"%ctaid.z", Special::kCtaidZ},
      {"%nctaid.x", Special::kNctaidX},
      {"%nctaid.y", Special::kNctaidY},
      {"%nctaid.z", Special::kNctaidZ},
      {"%laneid", Special::kLaneId},
      {"%warpid", Special::kWarpId},
      {"%nwarpid", Special::kNWarpId},
      {"%smid", Special::kSmId},
      {"%nsmid", Special::kNSmId},
      {"%lanemask_eq", Special::kLanemaskEq},
      {"%lanemask_lt", Special::kLanemaskLt},
      {"%lanemask_le", Special::kLanemaskLe},
      {"%lanemask_gt", Special::kLanemaskGt},
      {"%lanemask_ge", Special::kLanemaskGe},
      {"%clock", Special::kClock},
      {"%clock64", Special::kClock64},
      {"%globaltimer", Special::kGlobalTimer},
      {"%dynamic_smem_size", Special::kDynamicSmemSize},
      {"%total_smem_size", Special::kTotalSmemSize},
      {"WARP_SZ", Special::kWarpSize},
      {"%gridid", Special::kGridId},
      {"%reserved_smem_offset_begin", Special::kReservedSmemBegin},
      {"%reserved_smem_offset_end", Special::kReservedSmemEnd},
      {"%reserved_smem_offset_cap", Special::kReservedSmemCap},
      {"%reserved_smem_offset_0", Special::kReservedSmem0},
      {"%reserved_smem_offset_1", Special::kReservedSmem1},
      // Cooperative groups read the grid workspace of a cooperative launch from these; the pool
      // refuses cooperative launches, so it is always null (grid.sync() then traps, as CUDA's
      // does in a non-cooperative launch).
      {"%envreg1", Special::kGridWorkspaceHi},
      {"%envreg2", Special::kGridWorkspaceLo},
      {"%clusterid.x", Special::kClusterIdX},
      {"%clusterid.y", Special::kClusterIdY},
      {"%clusterid.z", Special::kClusterIdZ},
      {"%nclusterid.x", Special::kNClusterIdX},
      {"%nclusterid.y", Special::kNClusterIdY},
      {"%nclusterid.z", Special::kNClusterIdZ},
      {"%cluster_ctaid.x", Special::kClusterCtaidX},
      {"%cluster_ctaid.y", Special::kClusterCtaidY},
      {"%cluster_ctaid.z", Special::kClusterCtaidZ},
      {"%cluster_nctaid.x", Special::kClusterNctaidX},
      {"%cluster_nctaid.y", Special::kClusterNctaidY},
      {"%cluster_nctaid.z", Special::kClusterNctaidZ},
      {"%cluster_ctarank", Special::kClusterCtaRank},
      {"%cluster_nctarank", Special::kClusterNctaRank},
      {"%is_explicit_cluster", Special::kIsExplicitCluster}};
  for (auto& [name, s] : kSpecials)
    if (n == name) return s;
  return std::nullopt;
}

std::vector<std::string_view> splitDots(std::string_view s) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    parts.push_back(
        s.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return parts;
}

std::string formatOperand(const AstOperand& o) {
  switch (o.kind) {
    case AstOperand::Kind::kName:
      return (o.negated ? "!" : "") + o.name;
    case AstOperand::Kind::kInteger:
      return std::to_string(static_cast<int64_t>(o.integer));
    case AstOperand::Kind::kF32Bits: {
      char b[16];
      snprintf(b, sizeof b, "0f%08X", static_cast<unsigned>(o.integer));
      return b;
    }
    case AstOperand::Kind::kF64Bits: {
      char b[24];
      snprintf(b, sizeof b, "0d%016llX", static_cast<unsigned long long>(o.integer));
      return b;
    }
    case AstOperand::Kind::kDecimal:
      return std::to_string(o.real);
    case AstOperand::Kind::kSink:
      return "_";
    case AstOperand::Kind::kDual:
      return o.name + "|" + o.name2;
    case AstOperand::Kind::kAddress: {
      std::string s = o.name.empty() ? std::to_string(o.integer) : o.name;
      if (!o.name.empty() && o.integer) s += "+" + std::to_string(static_cast<int64_t>(o.integer));
      return o.negated ? s : "[" + s + "]";
    }
    case AstOperand::Kind::kVector:
    case AstOperand::Kind::kList: {
      std::string s = o.kind == AstOperand::Kind::kVector ? "{" : "(";
      for (size_t i = 0; i < o.elements.size(); ++i)
        s += (i ? ", " : "") + formatOperand(o.elements[i]);
      return s + (o.kind == AstOperand::Kind::kVector ? "}" : ")");
    }
  }
  return "?";
}

std::string formatInstruction(const AstInstruction& in) {
  std::string s;
  if (!in.guard.empty()) s += "@" + std::string(in.guardNegated ? "!" : "") + in.guard + " ";
  s += in.opcode;
  for (size_t i = 0; i < in.operands.size(); ++i)
    s += (i ? ", " : " ") + formatOperand(in.operands[i]);
  return s + ";";
}

struct ModuleSymbol {
  SymbolKind kind;
  uint32_t index;
};

class Builder {
 public:
  explicit Builder(ModuleImage* img) : img_(*img) {}

  void build(const AstModule& ast) {
    img_.targetSm = ast.targetSm;
    img_.ptxVersion = ast.versionMajor * 10 + ast.versionMinor;
    // Module variables first, then function symbols, so bodies and initializers can refer to both.
    for (const auto& v : ast.variables) addModuleVariable(v);
    for (const auto& f : ast.functions) declareFunction(f);
    for (const auto& f : ast.functions)
      if (f.hasBody) buildFunction(f);
    for (auto& [vi, gi] : globalInitializers_) buildInitializer(vi, gi);
    for (auto& f : img_.functions) {
      if (f.builtin == Builtin::kNone && !f.defined && referenced_.count(f.name)) {
        // The device runtime (cudadevrt) is what a kernel that launches kernels calls.
        if (f.name.rfind("cuda", 0) == 0)
          failUnsupported(
              "dynamic parallelism (device-side launch) is not supported: the kernel "
              "calls the device runtime's " +
              f.name);
        failUnsupported("call to unsupported external function " + f.name);
      }
    }
    buildKernels();
    for (const auto& g : img_.globals) img_.globalList.push_back(g.info);
  }

 private:
  // ---- module scope -------------------------------------------------------------------------
  void addModuleVariable(const AstVariable& v) {
    if (v.type == ".texref" || v.type == ".surfref" || v.type == ".samplerref") {
      addTextureReference(v);
    } else if (v.space == ".global" || v.space == ".const") {
      GlobalImage g;
      g.info.name = v.name;
      g.info.size = variableSize(v);
      g.info.align = variableAlign(v);
      g.info.isConst = v.space == ".const";
      g.info.isManaged = v.isManaged;
      if (std::count(v.dimensions.begin(), v.dimensions.end(), 0)) {
        // `.global .b8 x[] = {...}`: size from the initializer.
        g.info.size = naturalSize(v) * std::max<size_t>(1, v.initializer.size());
      }
      g.bytes.assign(g.info.size, 0);
      uint32_t index = static_cast<uint32_t>(img_.globals.size());
      img_.globals.push_back(std::move(g));
      defineSymbol(v.name, {SymbolKind::kGlobal, index});
      if (v.hasInitializer) globalInitializers_.push_back({&v, index});
    } else if (v.space == ".shared") {
      addSharedVariable(v, v.name);
    } else if (v.space == ".tex") {
      failUnsupported("textures are not supported: .tex " + v.name);
    } else {
      failInvalid("line " + std::to_string(v.line) + ": unexpected module-scope " + v.space + " " +
                  v.name);
    }
  }

  // `.global .texref name;` / `.global .surfref name;`: a reference the host binds
  // (cuModuleGetTexRef, cuTexRefSet*), named only by tex/suld/sust (decodeTextureAccess).
  void addTextureReference(const AstVariable& v) {
    if (v.type == ".samplerref")
      failUnsupported("sampler references are not supported: .samplerref " + v.name);
    if (v.space != ".global")
      failInvalid("line " + std::to_string(v.line) + ": " + v.type + " " + v.name +
                  " must be declared .global");
    if (!v.dimensions.empty() || v.hasInitializer || v.vectorWidth != 1)
      failUnsupported("texture or surface reference arrays and initializers are not supported: " +
                      v.name);
    if (moduleSymbols_.count(v.name) || textureReferences_.count(v.name))
      failInvalid("duplicate symbol " + v.name);
    const auto index = static_cast<uint32_t>(img_.references.size());
    img_.references.push_back({v.name, v.type == ".surfref"});
    textureReferences_.emplace(v.name, index);
  }

  uint32_t addSharedVariable(const AstVariable& v, const std::string& symbolName) {
    SharedVariable s;
    s.name = v.name;
    s.align = variableAlign(v);
    s.dynamic = std::count(v.dimensions.begin(), v.dimensions.end(), 0) > 0;
    s.size = s.dynamic ? 0 : variableSize(v);
    uint32_t index = static_cast<uint32_t>(img_.sharedVars.size());
    img_.sharedVars.push_back(s);
    if (!symbolName.empty()) defineSymbol(symbolName, {SymbolKind::kShared, index});
    return index;
  }

  void defineSymbol(const std::string& name, ModuleSymbol s) {
    if (textureReferences_.count(name)) failInvalid("duplicate symbol " + name);
    auto [it, inserted] = moduleSymbols_.emplace(name, s);
    if (!inserted) {
      // A function may be declared and later defined; anything else is a redefinition.
      if (!(it->second.kind == SymbolKind::kFunction && s.kind == SymbolKind::kFunction))
        failInvalid("duplicate symbol " + name);
    }
  }

  void declareFunction(const AstFunction& f) {
    auto it = moduleSymbols_.find(f.name);
    uint32_t index;
    if (it != moduleSymbols_.end()) {
      if (it->second.kind != SymbolKind::kFunction) failInvalid("duplicate symbol " + f.name);
      index = it->second.index;
    } else {
      index = static_cast<uint32_t>(img_.functions.size());
      img_.functions.emplace_back();
      defineSymbol(f.name, {SymbolKind::kFunction, index});
    }
    FunctionImage& fn = img_.functions[index];
    if (f.hasBody && fn.defined) failInvalid("function " + f.name + " defined twice");
    fn.name = f.name;
    fn.isEntry = f.isEntry;
    fn.maxThreads = f.maxThreads;
    std::copy(std::begin(f.requiredCluster), std::end(f.requiredCluster), fn.requiredCluster);
    fn.explicitCluster = f.explicitCluster;
    fn.maxClusterRank = f.maxClusterRank;
    if (f.name == "vprintf") fn.builtin = Builtin::kVprintf;
    if (f.name == "malloc") fn.builtin = Builtin::kMalloc;
    if (f.name == "free") fn.builtin = Builtin::kFree;
    if (f.name == "__assertfail") fn.builtin = Builtin::kAssertFail;
    if (f.name == "cudaGraphSetConditional") fn.builtin = Builtin::kGraphSetConditional;
    if (f.hasBody) fn.defined = true;
    // Parameter layout: entry params form the kernel param block; func returns+params open the
    // frame parameter area.
    fn.params.clear();
    fn.returns.clear();
    fn.paramAligns.clear();
    uint64_t offset = 0;
    for (const auto& r : f.returnParams) {
      offset = alignUp(offset, variableAlign(r));
      fn.returns.push_back({static_cast<uint32_t>(offset), static_cast<uint32_t>(variableSize(r))});
      offset += variableSize(r);
    }
    for (const auto& p : f.params) {
      uint32_t a = variableAlign(p);
      offset = alignUp(offset, a);
      fn.params.push_back({static_cast<uint32_t>(offset), static_cast<uint32_t>(variableSize(p))});
      fn.paramAligns.push_back(a);
      offset += variableSize(p);
    }
    fn.paramBytes = static_cast<uint32_t>(offset);
    fn.frameParamBytes = static_cast<uint32_t>(offset);
  }

  // ---- function bodies ----------------------------------------------------------------------
  struct ScopedName {
    OperandKind kind;  // Reg or Symbol
    SymbolKind symbol;
    uint32_t index;
    uint64_t offset;
  };
  using Scope = std::unordered_map<std::string, ScopedName>;

  void buildFunction(const AstFunction& f) {
    uint32_t fi = moduleSymbols_.at(f.name).index;
    FunctionImage& fn = img_.functions[fi];
    curFunction_ = fi;
    numRegs_ = 0;
    regUnits_.clear();
    localBytes_ = 0;
    frameBytes_ = fn.frameParamBytes;
    scopes_.clear();
    labels_.clear();
    sharedUsed_.clear();
    referencesUsed_.clear();
    paramSizes_.clear();
    fn.entryPc = static_cast<uint32_t>(img_.code.size());
    // Parameters are visible in the outermost scope.
    scopes_.emplace_back();
    SymbolKind pk = f.isEntry ? SymbolKind::kKernelParam : SymbolKind::kFrameParam;
    for (size_t i = 0; i < f.params.size(); ++i)
      scopes_.back()[f.params[i].name] = {OperandKind::kSymbol, pk, 0, fn.params[i].offset};
    for (size_t i = 0; i < f.returnParams.size(); ++i)
      scopes_.back()[f.returnParams[i].name] = {OperandKind::kSymbol, SymbolKind::kFrameParam, 0,
                                                fn.returns[i].offset};
    // Labels are function-wide: assign their PCs first so forward branches resolve.
    uint32_t pc = fn.entryPc;
    for (const auto& s : f.body) {
      if (s.kind == AstStatement::Kind::kLabel) labels_[s.label] = pc;
      if (s.kind == AstStatement::Kind::kInstruction) ++pc;
    }
    for (const auto& s : f.body) {
      switch (s.kind) {
        case AstStatement::Kind::kOpenScope:
          scopes_.emplace_back();
          break;
        case AstStatement::Kind::kCloseScope:
          scopes_.pop_back();
          break;
        case AstStatement::Kind::kLabel:
          break;
        case AstStatement::Kind::kVariable:
          declareLocal(s.variable);
          break;
        case AstStatement::Kind::kInstruction: {
          Instr in;
          in.function = fi;
          in.line = s.instruction.line;
          currentText_ = formatInstruction(s.instruction);
          try {
            decode(s.instruction, &in);
          } catch (LoadFailure& e) {
            e.status.message = "line " + std::to_string(s.instruction.line) + ": " +
                               e.status.message + " in `" + currentText_ + "`";
            throw;
          }
          img_.code.push_back(in);
          img_.instructionText.push_back(currentText_);
          break;
        }
      }
    }
    // Falling off the end behaves like ret.
    Instr ret;
    ret.op = Op::kRet;
    ret.function = fi;
    img_.code.push_back(ret);
    img_.instructionText.push_back("ret; // implicit");
    FunctionImage& fn2 = img_.functions[fi];
    fn2.endPc = static_cast<uint32_t>(img_.code.size());
    fn2.numRegs = numRegs_;
    fn2.regUnits = regUnits_;
    fn2.localBytes = static_cast<uint32_t>(alignUp(localBytes_, 16));
    fn2.frameParamBytes = static_cast<uint32_t>(alignUp(frameBytes_, 16));
    fn2.sharedUsed.assign(sharedUsed_.begin(), sharedUsed_.end());
    fn2.referencesUsed.assign(referencesUsed_.begin(), referencesUsed_.end());
  }

  void declareLocal(const AstVariable& v) {
    if (v.space == ".reg") {
      Type t = parseType(v.type);
      if (t == Type::kNone) failUnsupported("unsupported register type " + v.type);
      if (v.rangeCount > (1u << 20) || numRegs_ + v.rangeCount > (1u << 20))
        failInvalid("too many registers: " + v.name);
      const uint8_t units = t == Type::kPred ? 0 : typeBytes(t) > 4 ? 2 : 1;
      auto add = [&](const std::string& name) {
        scopes_.back()[name] = {OperandKind::kReg, SymbolKind::kNone, numRegs_++, 0};
        regUnits_.push_back(units);
      };
      if (v.rangeCount) {
        for (uint32_t i = 0; i < v.rangeCount; ++i) add(v.name + std::to_string(i));
      } else {
        add(v.name);
      }
    } else if (v.space == ".local") {
      localBytes_ = alignUp(localBytes_, variableAlign(v));
      scopes_.back()[v.name] = {OperandKind::kSymbol, SymbolKind::kLocal, 0, localBytes_};
      localBytes_ += variableSize(v);
    } else if (v.space == ".param") {
      frameBytes_ = alignUp(frameBytes_, variableAlign(v));
      scopes_.back()[v.name] = {OperandKind::kSymbol, SymbolKind::kFrameParam, 0, frameBytes_};
      paramSizes_[frameBytes_] = static_cast<uint32_t>(variableSize(v));
      frameBytes_ += variableSize(v);
    } else if (v.space == ".shared") {
      uint32_t index = addSharedVariable(v, "");
      scopes_.back()[v.name] = {OperandKind::kSymbol, SymbolKind::kShared, index, 0};
    } else if (v.space == ".global" || v.space == ".const") {
      addModuleVariable(v);
    } else {
      failUnsupported("unsupported declaration " + v.space + " " + v.name);
    }
  }

  const ScopedName* lookupScoped(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(name);
      if (f != it->end()) return &f->second;
    }
    return nullptr;
  }

  // Resolves a name used as a value (not an address). Literal conversion uses `literalType`.
  Operand resolveName(const std::string& name, bool allowLabel) {
    Operand o;
    if (const ScopedName* s = lookupScoped(name)) {
      if (s->kind == OperandKind::kReg) {
        o.kind = OperandKind::kReg;
        o.index = s->index;
      } else {
        o.kind = OperandKind::kSymbol;
        o.symbol = s->symbol;
        o.index = s->index;
        o.imm = s->offset;
        if (s->symbol == SymbolKind::kShared) sharedUsed_.insert(s->index);
      }
      return o;
    }
    if (auto sp = parseSpecial(name)) {
      o.kind = OperandKind::kSpecial;
      o.index = static_cast<uint32_t>(*sp);
      return o;
    }
    auto ms = moduleSymbols_.find(name);
    if (ms != moduleSymbols_.end()) {
      o.kind = OperandKind::kSymbol;
      o.symbol = ms->second.kind;
      o.index = ms->second.index;
      if (o.symbol == SymbolKind::kShared) sharedUsed_.insert(o.index);
      if (o.symbol == SymbolKind::kFunction) referenced_.insert(name);
      return o;
    }
    if (allowLabel) {
      auto l = labels_.find(name);
      if (l != labels_.end()) {
        o.kind = OperandKind::kLabel;
        o.index = l->second;
        return o;
      }
    }
    if (name.size() > 1 && name[0] == '%' &&
        (name.rfind("%envreg", 0) == 0 || name.rfind("%pm", 0) == 0 ||
         name.rfind("%cluster", 0) == 0 || name.rfind("%is_", 0) == 0))
      failUnsupported("unsupported special register " + name);
    failInvalid("undefined symbol " + name);
  }

  Operand literal(const AstOperand& a, Type t) {
    Operand o;
    o.kind = OperandKind::kImm;
    bool f32 = t == Type::kF32, f64 = t == Type::kF64, f16 = t == Type::kF16 || t == Type::kBF16;
    switch (a.kind) {
      case AstOperand::Kind::kInteger:
        o.imm = a.integer;
        if (f32) o.imm = bitsOf(static_cast<float>(static_cast<int64_t>(a.integer)));
        if (f64) o.imm = bitsOf(static_cast<double>(static_cast<int64_t>(a.integer)));
        break;
      case AstOperand::Kind::kF32Bits: {
        o.imm = a.integer;
        float f;
        uint32_t b = static_cast<uint32_t>(a.integer);
        std::memcpy(&f, &b, 4);
        if (f64) o.imm = bitsOf(static_cast<double>(f));
        if (t == Type::kF16) o.imm = floatToHalf(f);
        if (t == Type::kBF16) o.imm = floatToBfloat(f);
        break;
      }
      case AstOperand::Kind::kF64Bits: {
        o.imm = a.integer;
        double d;
        std::memcpy(&d, &a.integer, 8);
        if (f32) o.imm = bitsOf(static_cast<float>(d));
        break;
      }
      case AstOperand::Kind::kDecimal:
        o.imm = f32   ? bitsOf(static_cast<float>(a.real))
                : f16 ? floatToHalf(static_cast<float>(a.real))
                      : bitsOf(a.real);
        if (!f32 && !f64 && !f16) o.imm = static_cast<uint64_t>(static_cast<int64_t>(a.real));
        break;
      default:
        break;
    }
    return o;
  }
  static uint64_t bitsOf(float f) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
  }
  static uint64_t bitsOf(double d) {
    uint64_t b;
    std::memcpy(&b, &d, 8);
    return b;
  }

  // Converts one AST operand; `t` is the type literals are interpreted in.
  Operand operand(const AstOperand& a, Type t, bool allowLabel = false) {
    switch (a.kind) {
      case AstOperand::Kind::kName: {
        Operand o = resolveName(a.name, allowLabel);
        o.negate = a.negated;
        return o;
      }
      case AstOperand::Kind::kInteger:
      case AstOperand::Kind::kF32Bits:
      case AstOperand::Kind::kF64Bits:
      case AstOperand::Kind::kDecimal:
        return literal(a, t);
      case AstOperand::Kind::kSink: {
        Operand o;
        o.kind = OperandKind::kSink;
        return o;
      }
      case AstOperand::Kind::kVector: {
        Operand o;
        o.kind = OperandKind::kVector;
        o.count = static_cast<uint8_t>(a.elements.size());
        std::vector<Operand> elems;
        for (const auto& e : a.elements) {
          if (e.kind == AstOperand::Kind::kVector) failInvalid("nested vector operand");
          elems.push_back(operand(e, t));
        }
        o.index = static_cast<uint32_t>(img_.vectorElements.size());
        for (auto& e : elems) img_.vectorElements.push_back(e);
        return o;
      }
      case AstOperand::Kind::kAddress: {
        if (!a.elements.empty()) failUnsupported("multi-part address operands are not supported");
        Operand o;
        o.imm = a.integer;
        if (!a.name.empty()) {
          Operand base = resolveName(a.name, false);
          if (base.kind == OperandKind::kReg) {
            o.index = base.index;
          } else if (base.kind == OperandKind::kSymbol) {
            o.symbol = base.symbol;
            o.index = base.index;
            o.imm += base.imm;
          } else {
            failInvalid("bad address base " + a.name);
          }
        }
        // An unbracketed `sym+off` is a value (address of the symbol plus offset).
        o.kind = a.negated
                     ? (o.symbol != SymbolKind::kNone ? OperandKind::kSymbol : OperandKind::kImm)
                     : OperandKind::kAddress;
        return o;
      }
      case AstOperand::Kind::kDual:
      case AstOperand::Kind::kList:
        break;
    }
    failInvalid("unexpected operand " + formatOperand(a));
  }

  void requireOperands(const AstInstruction& a, size_t lo, size_t hi) {
    if (a.operands.size() < lo || a.operands.size() > hi) failInvalid("wrong number of operands");
  }

  // Destination: register, sink or vector of them; a Dual puts its second register in ops[5].
  Operand destination(const AstInstruction& a, size_t i, Instr* in, Type t) {
    const AstOperand& o = a.operands[i];
    if (o.kind == AstOperand::Kind::kDual) {
      Operand first = resolveName(o.name, false);
      Operand second = resolveName(o.name2, false);
      if (first.kind != OperandKind::kReg || second.kind != OperandKind::kReg)
        failInvalid("bad dual destination");
      in->ops[5] = second;
      return first;
    }
    Operand d = operand(o, t);
    if (d.kind == OperandKind::kVector) {
      for (uint32_t k = 0; k < d.count; ++k) {
        auto kind = img_.vectorElements[d.index + k].kind;
        if (kind != OperandKind::kReg && kind != OperandKind::kSink)
          failInvalid("vector destination must be registers");
      }
    } else if (d.kind != OperandKind::kReg && d.kind != OperandKind::kSink) {
      failInvalid("destination must be a register");
    }
    return d;
  }

  void decode(const AstInstruction& a, Instr* in);
  void decodeCall(const AstInstruction& a, Instr* in);
  template <class Take>
  void decodeFp8Cvt(const AstInstruction& a, Instr* in, Take& take, const std::vector<Type>& types);
  template <class Take>
  void decodeTextureAccess(const AstInstruction& a, Instr* in, Take& take,
                           const std::vector<Type>& types);
  template <class Take>
  void decodeTextureQuery(const AstInstruction& a, Instr* in, Take& take,
                          const std::vector<Type>& types);
  Operand textureHandle(const AstOperand& at, const std::string& opcode, bool texture);
  void decodeMatrix(const AstInstruction& a, Instr* in);
  template <class Take>
  void decodeMbarrier(const AstInstruction& a, Instr* in, Take& take, bool hasSpace);
  void decodeBulkCopy(const AstInstruction& a, Instr* in);
  void decodeBulkTensor(const AstInstruction& a, Instr* in);
  void decodeBulkTensorPrefetch(const AstInstruction& a, Instr* in);
  std::pair<Operand, Operand> tensorOperand(const AstOperand& at, unsigned rank,
                                            const std::string& op);
  unsigned tensorRank(std::string_view dims, const std::string& op);
  Operand im2colOffsets(const AstOperand& at, unsigned rank, const std::string& op);

  // ---- initializers, kernels --------------------------------------------------------------
  void buildInitializer(const AstVariable* v, uint32_t gi) {
    GlobalImage& g = img_.globals[gi];
    uint32_t elem = typeBytes(parseType(v->type));
    Type t = parseType(v->type);
    uint64_t offset = 0;
    for (const auto& init : v->initializer) {
      if (offset + elem > g.bytes.size()) failInvalid("initializer too long for " + v->name);
      uint64_t bits = init.integer;
      if (init.kind == AstInitializer::Kind::kSymbol) {
        auto it = moduleSymbols_.find(init.symbol);
        if (it == moduleSymbols_.end())
          failInvalid("undefined symbol " + init.symbol + " in initializer of " + v->name);
        if (it->second.kind != SymbolKind::kGlobal && it->second.kind != SymbolKind::kFunction)
          failUnsupported("initializer of " + v->name + " takes the address of non-global " +
                          init.symbol);
        if (it->second.kind == SymbolKind::kFunction) referenced_.insert(init.symbol);
        g.relocations.push_back(
            {offset, static_cast<uint8_t>(elem), it->second.kind, it->second.index, init.integer});
        bits = 0;
      } else {
        AstOperand lit;
        lit.kind = init.kind == AstInitializer::Kind::kInteger   ? AstOperand::Kind::kInteger
                   : init.kind == AstInitializer::Kind::kF32Bits ? AstOperand::Kind::kF32Bits
                   : init.kind == AstInitializer::Kind::kF64Bits ? AstOperand::Kind::kF64Bits
                                                                 : AstOperand::Kind::kDecimal;
        lit.integer = init.integer;
        lit.real = init.real;
        bits = literal(lit, t).imm;
      }
      std::memcpy(g.bytes.data() + offset, &bits, elem);
      offset += elem;
    }
  }

  void buildKernels() {
    for (uint32_t fi = 0; fi < img_.functions.size(); ++fi) {
      const FunctionImage& f = img_.functions[fi];
      if (!f.isEntry || !f.defined) continue;
      KernelInfo k;
      k.name = f.name;
      for (size_t i = 0; i < f.params.size(); ++i)
        k.params.push_back({f.params[i].offset, f.params[i].size, f.paramAligns[i]});
      k.paramBytes = f.paramBytes;
      k.localBytesPerThread = f.localBytes;
      k.numRegs = f.numRegs;
      k.maxThreadsPerBlock = f.maxThreads ? std::min<uint32_t>(f.maxThreads, 1024) : 1024;
      std::copy(std::begin(f.requiredCluster), std::end(f.requiredCluster), k.requiredCluster);
      k.explicitCluster = f.explicitCluster || f.requiredCluster[0] != 0;
      k.maxClusterRank = f.maxClusterRank;
      // Shared layout per kernel: the variables used by the functions it can reach.
      std::set<uint32_t> reach{fi};
      std::vector<uint32_t> work{fi};
      while (!work.empty()) {
        uint32_t c = work.back();
        work.pop_back();
        const FunctionImage& cf = img_.functions[c];
        std::vector<uint32_t> next = cf.callees;
        // An indirect call reaches any .func, never an .entry: a kernel's own .shared variables
        // (nvcc -G declares them inside the entry) are not another kernel's.
        if (cf.indirectCalls)
          for (uint32_t j = 0; j < img_.functions.size(); ++j)
            if (!img_.functions[j].isEntry) next.push_back(j);
        for (uint32_t n : next)
          if (reach.insert(n).second) work.push_back(n);
      }
      uint32_t liveUnits = 0;
      for (uint32_t r : reach) {
        if (img_.functions[r].defined)
          liveUnits = std::max(liveUnits, maxLiveRegisterUnits(img_, r));
      }
      k.allocatedRegs = estimatedRegisters(liveUnits);
      std::set<uint32_t> used;
      for (uint32_t r : reach)
        for (uint32_t s : img_.functions[r].sharedUsed) used.insert(s);
      std::vector<uint32_t> offsets(img_.sharedVars.size(), 0);
      uint64_t size = kReservedSharedBytes;
      uint32_t dynAlign = 16;
      for (uint32_t s : used) {
        const SharedVariable& sv = img_.sharedVars[s];
        if (sv.dynamic) {
          dynAlign = std::max(dynAlign, sv.align);
          continue;
        }
        size = alignUp(size, sv.align);
        offsets[s] = static_cast<uint32_t>(size);
        size += sv.size;
      }
      uint32_t dynOffset = static_cast<uint32_t>(alignUp(size, dynAlign));
      for (uint32_t s : used)
        if (img_.sharedVars[s].dynamic) offsets[s] = dynOffset;
      k.staticSharedBytes = static_cast<uint32_t>(size - kReservedSharedBytes);
      std::set<uint32_t> references;
      for (uint32_t r : reach)
        for (uint32_t t : img_.functions[r].referencesUsed) references.insert(t);
      k.references.assign(references.begin(), references.end());
      img_.kernels.push_back(k);
      img_.kernelFunction.push_back(fi);
      img_.kernelSharedOffsets.push_back(std::move(offsets));
      img_.kernelDynamicSharedOffset.push_back(dynOffset);
    }
  }

  ModuleImage& img_;
  std::unordered_map<std::string, ModuleSymbol> moduleSymbols_;
  std::vector<std::pair<const AstVariable*, uint32_t>> globalInitializers_;
  std::set<std::string> referenced_;
  std::vector<Scope> scopes_;
  std::unordered_map<std::string, uint32_t> labels_;
  std::set<uint32_t> sharedUsed_;
  std::set<uint32_t> referencesUsed_;                            // of the function being built
  std::unordered_map<std::string, uint32_t> textureReferences_;  // name -> img_.references index
  std::map<uint64_t, uint32_t> paramSizes_;
  std::string currentText_;
  uint32_t curFunction_ = 0;
  uint32_t numRegs_ = 0;
  std::vector<uint8_t> regUnits_;  // FunctionImage::regUnits of the function being built
  uint64_t localBytes_ = 0;
  uint64_t frameBytes_ = 0;
};

// ---- opcode decoding ------------------------------------------------------------------------

bool isIgnorableQualifier(std::string_view p) {
  static constexpr std::string_view kIgnored[] = {
      "nc",   "volatile", "relaxed", "acquire", "release", "acq_rel", "sc", "weak",
      "mmio", "cta",      "gpu",     "sys",     "aligned", "ca",      "cg", "cs",
      "lu",   "cv",       "wb",      "wt",      "uni",     "cluster"};
  for (auto i : kIgnored)
    if (p == i) return true;
  // Cache and eviction hints such as L1::no_allocate, L2::128B, level::eviction_priority.
  return p.find("::") != std::string_view::npos && p.rfind("shared::", 0) != 0 &&
         p.rfind("param::", 0) != 0;
}

void Builder::decode(const AstInstruction& a, Instr* in) {
  auto parts = splitDots(a.opcode);
  std::string_view base = parts[0];
  std::vector<Type> types;
  std::vector<std::string_view> words;
  std::vector<bool> used;
  bool hasSpace = false;
  for (size_t i = 1; i < parts.size(); ++i) {
    std::string_view p = parts[i];
    Type t = parseType(p);
    if (t != Type::kNone) {
      types.push_back(t);
      continue;
    }
    static const std::pair<std::string_view, Round> kRounds[] = {
        {"rn", Round::kRN},   {"rz", Round::kRZ},   {"rm", Round::kRM},   {"rp", Round::kRP},
        {"rni", Round::kRNI}, {"rzi", Round::kRZI}, {"rmi", Round::kRMI}, {"rpi", Round::kRPI}};
    bool done = false;
    for (auto& [n, r] : kRounds)
      if (p == n) {
        in->round = r;
        done = true;
      }
    static const std::pair<std::string_view, uint32_t> kFlags[] = {
        {"ftz", kFtz},     {"sat", kSat},     {"approx", kApprox},     {"full", kFull},
        {"wide", kWide},   {"cc", kCC},       {"shiftamt", kShiftAmt}, {"wrap", kWrap},
        {"clamp", kClamp}, {"noftz", kNoFtz}, {"relu", kRelu}};
    for (auto& [n, f] : kFlags)
      if (p == n) {
        in->flags |= f;
        done = true;
      }
    static const std::pair<std::string_view, Space> kSpaces[] = {
        {"global", Space::kGlobal},
        {"shared", Space::kShared},
        {"shared::cta", Space::kShared},
        // Another CTA's shared memory is a range of the CTA's own window (cluster.h).
        {"shared::cluster", Space::kShared},
        {"local", Space::kLocal},
        {"param", Space::kParam},
        {"param::entry", Space::kParam},
        {"param::func", Space::kParam},
        {"const", Space::kConst}};
    for (auto& [n, sp] : kSpaces)
      if (p == n) {
        in->space = sp;
        hasSpace = true;
        done = true;
      }
    if (p == "v2" || p == "v4" || p == "v8") {
      in->vec = static_cast<uint8_t>(p[1] - '0');
      done = true;
    }
    if (done) continue;
    if (p == "uni") in->flags |= kUni;
    if (isIgnorableQualifier(p)) continue;
    words.push_back(p);
  }
  used.assign(words.size(), false);
  auto take = [&](std::initializer_list<std::string_view> options) -> int {
    for (size_t w = 0; w < words.size(); ++w)
      for (size_t k = 0; k < options.size(); ++k)
        if (!used[w] && words[w] == options.begin()[k]) {
          used[w] = true;
          return static_cast<int>(k);
        }
    return -1;
  };
  // A qualifier that is not a type the emu knows (fp8 pairs, packed integers): refused by name,
  // since the PTX is valid.
  auto refuseUnknownType = [&](const std::string& otherwise) {
    for (auto w : words)
      if (w.find("x2") != std::string_view::npos || w.find("x4") != std::string_view::npos ||
          w.rfind("e4m3", 0) == 0 || w.rfind("e5m2", 0) == 0 || w.rfind("e2m", 0) == 0 ||
          w.rfind("e3m", 0) == 0 || w == "tf32" || w == "ue8m0x2" || w == "b128")
        failUnsupported("unsupported type ." + std::string(w) + " in " + a.opcode);
    failInvalid(otherwise);
  };
  auto type0 = [&]() {
    if (types.empty()) refuseUnknownType("missing type");
    return types[0];
  };
  auto ops = [&](size_t lo, size_t hi) { requireOperands(a, lo, hi); };
  auto src = [&](size_t i, Type t) { return operand(a.operands[i], t); };
  auto dst = [&](size_t i, Type t) { return destination(a, i, in, t); };
  auto setOps = [&](std::initializer_list<Operand> list) {
    in->numOps = 0;
    for (const auto& o : list) in->ops[in->numOps++] = o;
  };

  if (!a.guard.empty()) {
    Operand g = resolveName(a.guard, false);
    if (g.kind != OperandKind::kReg) failInvalid("guard must be a predicate register");
    in->guard = g.index;
    in->guardNegated = a.guardNegated;
  }

  auto threeOp = [&](Op op) {
    in->op = op;
    in->type = type0();
    ops(3, 3);
    setOps({dst(0, in->type), src(1, in->type), src(2, in->type)});
  };
  auto twoOp = [&](Op op) {
    in->op = op;
    in->type = type0();
    ops(2, 2);
    setOps({dst(0, in->type), src(1, in->type)});
  };

  if (base == "mov") {
    twoOp(Op::kMov);
  } else if (base == "ld" || base == "ldu") {
    in->op = Op::kLd;
    in->type = type0();
    // .L2::cache_hint adds a 64-bit cache-policy operand: checked, then ignored (a hint).
    const bool cacheHint = a.opcode.find("L2::cache_hint") != std::string::npos;
    ops(2, cacheHint ? 3 : 2);
    if (cacheHint) src(2, Type::kU64);
    Operand addr = src(1, Type::kU64);
    if (addr.kind != OperandKind::kAddress) failInvalid("ld needs an address operand");
    setOps({dst(0, in->type), addr});
  } else if (base == "st") {
    in->op = Op::kSt;
    in->type = type0();
    const bool cacheHint = a.opcode.find("L2::cache_hint") != std::string::npos;
    ops(2, cacheHint ? 3 : 2);
    if (cacheHint) src(2, Type::kU64);
    Operand addr = src(0, Type::kU64);
    if (addr.kind != OperandKind::kAddress) failInvalid("st needs an address operand");
    setOps({addr, src(1, in->type)});
  } else if ((base == "add" || base == "sub" || base == "min" || base == "max") &&
             (a.opcode.find(".u16x2") != std::string::npos ||
              a.opcode.find(".s16x2") != std::string::npos)) {
    // sm_90's packed halfword integers (what __vadd2, __vmins2 and the like compile to).
    const int packed = take({"u16x2", "s16x2"});
    if (take({"relu"}) >= 0 || (in->flags & kSat))
      failUnsupported("unsupported modifier in " + a.opcode);
    in->op = Op::kPacked16;
    in->type = packed == 1 ? Type::kS32 : Type::kU32;  // signedness of the halves
    in->mode = static_cast<uint8_t>(base == "add"   ? Packed16Op::kAdd
                                    : base == "sub" ? Packed16Op::kSub
                                    : base == "min" ? Packed16Op::kMin
                                                    : Packed16Op::kMax);
    ops(3, 3);
    setOps({dst(0, Type::kB32), src(1, Type::kB32), src(2, Type::kB32)});
  } else if (base == "vshl" || base == "vshr") {
    // Scalar video shifts, the word forms: a (.u32/.s32, sign- or zero-extended) shifted by b
    // (.u32; .clamp caps it at 32, .wrap takes it mod 32) at 64-bit precision, then optionally
    // .add/.min/.max with c. Byte and halfword selectors (operand suffixes) do not parse; .sat
    // and the merge forms are refused by name.
    if (types.size() != 3) failInvalid(std::string(base) + " needs three types");
    for (Type t : {types[0], types[1]})
      if (t != Type::kU32 && t != Type::kS32) failInvalid(std::string(base) + " needs .u32/.s32");
    if (types[2] != Type::kU32) failInvalid(std::string(base) + "'s shift is .u32");
    if (in->flags & kSat) failUnsupported(".sat video shifts are not supported: " + a.opcode);
    const bool clamp = in->flags & kClamp, wrap = in->flags & kWrap;
    if (clamp == wrap) failInvalid(std::string(base) + " needs .clamp or .wrap: " + a.opcode);
    in->flags &= ~(kClamp | kWrap);
    const int secondary = take({"add", "min", "max"});
    in->op = Op::kVideoShift;
    in->type = types[0];
    in->type2 = types[1];
    in->mode =
        static_cast<uint8_t>((base == "vshr" ? 1 : 0) | ((secondary + 1) << 1) | (clamp ? 8 : 0));
    if (secondary < 0) {
      ops(3, 3);
      setOps({dst(0, in->type), src(1, in->type2), src(2, Type::kU32)});
    } else {
      ops(4, 4);
      setOps({dst(0, in->type), src(1, in->type2), src(2, Type::kU32), src(3, in->type)});
    }
  } else if (base == "vabsdiff4") {
    // Byte-wise |a - b|: into d's bytes, or summed into c with .add. The byte selectors and the
    // destination mask (operand suffixes) are not accepted by the parser, so only the default
    // b3210 forms reach here.
    if (types.size() != 3) failInvalid("vabsdiff4 needs three types");
    for (Type t : types)
      if (t != Type::kU32 && t != Type::kS32) failInvalid("vabsdiff4 needs .u32/.s32 types");
    in->op = Op::kVabsdiff4;
    in->type = types[0];
    in->type2 = types[1];
    if (take({"add"}) >= 0) in->mode = 1;
    if (isSigned(types[1]) != isSigned(types[2]))
      failUnsupported("vabsdiff4 with mixed-signedness sources is not supported");
    ops(4, 4);
    setOps({dst(0, in->type), src(1, Type::kB32), src(2, Type::kB32), src(3, in->type)});
  } else if (base == "add" || base == "sub") {
    threeOp(base == "add" ? Op::kAdd : Op::kSub);
  } else if (base == "addc" || base == "subc") {
    threeOp(base == "addc" ? Op::kAddc : Op::kSubc);
  } else if (base == "mul" || base == "mul24") {
    int m = take({"hi", "lo"});
    if (m == 0) in->flags |= kHi;
    if (m == 1) in->flags |= kLo;
    threeOp(base == "mul" ? Op::kMul : Op::kMul24);
  } else if (base == "mad" || base == "madc" || base == "mad24") {
    int m = take({"hi", "lo"});
    if (m == 0) in->flags |= kHi;
    if (m == 1) in->flags |= kLo;
    in->op = base == "mad" ? Op::kMad : base == "madc" ? Op::kMadc : Op::kMad24;
    in->type = type0();
    ops(4, 4);
    Type ct = (in->flags & kWide) ? Type::kNone : in->type;
    Operand c = ct == Type::kNone ? src(3, Type::kU64) : src(3, ct);
    setOps({dst(0, in->type), src(1, in->type), src(2, in->type), c});
  } else if (base == "fma") {
    in->op = Op::kFma;
    in->type = type0();
    ops(4, 4);
    setOps({dst(0, in->type), src(1, in->type), src(2, in->type), src(3, in->type)});
  } else if (base == "sad") {
    in->op = Op::kSad;
    in->type = type0();
    ops(4, 4);
    setOps({dst(0, in->type), src(1, in->type), src(2, in->type), src(3, in->type)});
  } else if (base == "div" || base == "rem" || base == "min" || base == "max" || base == "and" ||
             base == "or" || base == "xor" || base == "copysign") {
    static const std::pair<std::string_view, Op> kOps[] = {
        {"div", Op::kDiv}, {"rem", Op::kRem}, {"min", Op::kMin}, {"max", Op::kMax},
        {"and", Op::kAnd}, {"or", Op::kOr},   {"xor", Op::kXor}, {"copysign", Op::kCopysign}};
    for (auto& [n, op] : kOps)
      if (base == n) threeOp(op);
    if ((base == "min" || base == "max") && take({"NaN"}) >= 0) {
      if (!isFloat(in->type)) failInvalid(".NaN needs a floating-point type in " + a.opcode);
      in->flags |= kPropagateNan;
    }
  } else if (base == "shl" || base == "shr") {
    in->op = base == "shl" ? Op::kShl : Op::kShr;
    in->type = type0();
    ops(3, 3);
    setOps({dst(0, in->type), src(1, in->type), src(2, Type::kU32)});
  } else if (base == "neg" || base == "abs" || base == "not" || base == "cnot" || base == "clz" ||
             base == "popc" || base == "brev" || base == "bfind" || base == "ex2" ||
             base == "lg2" || base == "sin" || base == "cos" || base == "rcp" || base == "rsqrt" ||
             base == "sqrt" || base == "tanh") {
    static const std::pair<std::string_view, Op> kOps[] = {
        {"neg", Op::kNeg}, {"abs", Op::kAbs},     {"not", Op::kNot},   {"cnot", Op::kCnot},
        {"clz", Op::kClz}, {"popc", Op::kPopc},   {"brev", Op::kBrev}, {"bfind", Op::kBfind},
        {"ex2", Op::kEx2}, {"lg2", Op::kLg2},     {"sin", Op::kSin},   {"cos", Op::kCos},
        {"rcp", Op::kRcp}, {"rsqrt", Op::kRsqrt}, {"sqrt", Op::kSqrt}, {"tanh", Op::kTanh}};
    for (auto& [n, op] : kOps)
      if (base == n) twoOp(op);
  } else if (base == "setp" || base == "set") {
    static constexpr std::string_view kCmp[] = {"eq",  "ne",  "lt",  "le",  "gt",  "ge",
                                                "lo",  "ls",  "hi",  "hs",  "equ", "neu",
                                                "ltu", "leu", "gtu", "geu", "num", "nan"};
    int cmp = -1;
    for (size_t w = 0; w < words.size() && cmp < 0; ++w)
      for (size_t k = 0; k < std::size(kCmp); ++k)
        if (words[w] == kCmp[k]) {
          cmp = static_cast<int>(k);
          used[w] = true;
          break;
        }
    if (cmp < 0) failInvalid(std::string(base) + " without comparison");
    in->mode = static_cast<uint8_t>(cmp);
    int b = take({"and", "or", "xor"});
    in->boolOp = b < 0 ? BoolOp::kNone : static_cast<BoolOp>(b + 1);
    const size_t count = in->boolOp == BoolOp::kNone ? 3 : 4;
    ops(count, count);
    Operand c = count == 4 ? src(3, Type::kPred) : Operand{};
    if (base == "setp") {
      in->op = Op::kSetp;
      in->type = type0();
      setOps({dst(0, Type::kPred), src(1, in->type), src(2, in->type), c});
    } else {
      // set.CmpOp[.BoolOp][.ftz].dtype.stype: d is the comparison as a number of type dtype.
      if (types.size() != 2) refuseUnknownType("set needs a destination and a source type");
      in->op = Op::kSet;
      in->type2 = types[0];
      in->type = types[1];
      const bool pairSource = in->type == Type::kF16x2 || in->type == Type::kBF16x2;
      const Type d = in->type2;
      const bool allowed =
          pairSource ? (d == in->type || d == Type::kU32 || d == Type::kS32)
          : (in->type == Type::kF16 || in->type == Type::kBF16)
              ? (d == in->type || d == Type::kU32 || d == Type::kS32 || d == Type::kF32)
              : (d == Type::kU32 || d == Type::kS32 || d == Type::kF32);
      if (!allowed) failInvalid("set cannot write ." + std::string(a.opcode));
      setOps({dst(0, d), src(1, in->type), src(2, in->type), c});
    }
    if (count == 3) in->numOps = 3;
  } else if (base == "selp") {
    in->op = Op::kSelp;
    in->type = type0();
    ops(4, 4);
    setOps({dst(0, in->type), src(1, in->type), src(2, in->type), src(3, Type::kPred)});
  } else if (base == "cvt" && (a.opcode.find(".e4m3x2") != std::string::npos ||
                               a.opcode.find(".e5m2x2") != std::string::npos)) {
    decodeFp8Cvt(a, in, take, types);
  } else if (base == "cvt" && a.opcode.find(".tf32.f32") != std::string::npos) {
    // f32 -> tf32 (wmma::__float_to_tf32): rounded to 10 mantissa bits, kept in a .b32.
    take({"tf32"});
    const bool rna = take({"rna"}) >= 0;
    if (types.size() != 1 || types[0] != Type::kF32 ||
        (!rna && in->round != Round::kRN && in->round != Round::kRZ))
      failUnsupported("unsupported tf32 conversion " + a.opcode);
    if (rna) in->round = Round::kDefault;
    in->op = Op::kCvt;
    in->mode = static_cast<uint8_t>(Fp8Cvt::kToTf32);
    in->type = Type::kB32;
    in->type2 = Type::kF32;
    ops(2, 2);
    setOps({dst(0, Type::kB32), src(1, Type::kF32)});
  } else if (base == "cvt" && take({"pack"}) >= 0) {
    // cvt.pack.sat.convertType.s32[.b32] d, a, b[, c]: a and b saturated to convertType and packed
    // into d's low bits (a above b); with c, d's other bits are c's low bits.
    const int narrow = take({"u2", "s2", "u4", "s4"});
    Type convert = narrow >= 0 ? Type::kNone : (types.empty() ? Type::kNone : types[0]);
    unsigned width = narrow >= 0 ? (narrow < 2 ? 2 : 4) : 0;
    bool signedConvert = narrow == 1 || narrow == 3;
    if (narrow < 0) {
      if (convert == Type::kU8 || convert == Type::kS8) width = 8;
      if (convert == Type::kU16 || convert == Type::kS16) width = 16;
      signedConvert = convert == Type::kS8 || convert == Type::kS16;
      if (!types.empty()) types.erase(types.begin());
    }
    if (width == 0 || !(in->flags & kSat) || types.empty() || types[0] != Type::kS32 ||
        (width == 16) != (types.size() == 1) || (width < 16 && types[1] != Type::kB32))
      failInvalid("unsupported cvt.pack form " + a.opcode);
    in->op = Op::kCvtPack;
    in->flags &= ~kSat;  // always saturating; the flag would also clamp to [0, 1]
    in->mode = static_cast<uint8_t>(width);
    in->type = signedConvert ? Type::kS32 : Type::kU32;
    if (width == 16) {
      ops(3, 3);
      setOps({dst(0, Type::kB32), src(1, Type::kS32), src(2, Type::kS32)});
    } else {
      ops(4, 4);
      setOps({dst(0, Type::kB32), src(1, Type::kS32), src(2, Type::kS32), src(3, Type::kB32)});
    }
  } else if (base == "cvt") {
    in->op = Op::kCvt;
    if (types.size() != 2) refuseUnknownType("cvt needs two types");
    in->type = types[0];
    in->type2 = types[1];
    if (in->type == Type::kF16x2 || in->type == Type::kBF16x2) {
      ops(3, 3);
      setOps({dst(0, in->type), src(1, in->type2), src(2, in->type2)});
    } else {
      ops(2, 2);
      setOps({dst(0, in->type), src(1, in->type2)});
    }
  } else if (base == "cvta") {
    in->op = take({"to"}) >= 0 ? Op::kCvtaTo : Op::kCvta;
    if (!hasSpace) failInvalid("cvta needs a state space");
    twoOp(in->op);
  } else if (base == "isspacep") {
    in->op = Op::kIsspacep;
    if (!hasSpace) failInvalid("isspacep needs a state space");
    // .shared::cluster: any CTA's shared memory in the cluster; .shared(::cta): this CTA's.
    in->mode = a.opcode.find("shared::cluster") != std::string::npos ? 1 : 0;
    ops(2, 2);
    setOps({dst(0, Type::kPred), src(1, Type::kU64)});
  } else if (base == "bra") {
    in->op = Op::kBra;
    ops(1, 1);
    Operand t = operand(a.operands[0], Type::kNone, true);
    if (t.kind != OperandKind::kLabel) failUnsupported("bra needs a label target");
    setOps({t});
  } else if (base == "ret") {
    in->op = Op::kRet;
    ops(0, 0);
  } else if (base == "exit") {
    in->op = Op::kExit;
    ops(0, 0);
  } else if (base == "trap") {
    in->op = Op::kTrap;
  } else if (base == "brkpt" || base == "nanosleep" || base == "pmevent" || base == "prefetch" ||
             base == "prefetchu" || base == "membar" || base == "fence") {
    in->op = base == "membar" || base == "fence" ? Op::kMembar : Op::kNop;
    if (base == "nanosleep") in->mode = kNopYields;
    std::fill(used.begin(), used.end(), true);  // levels (gl/cta/sys), proxy kinds: no effect here
  } else if (base == "call") {
    decodeCall(a, in);
  } else if (base == "barrier" && a.opcode.rfind("barrier.cluster.", 0) == 0) {
    // barrier.cluster.arrive / .wait (.aligned, and arrive's .relaxed/.release, wait's .acquire:
    // the emu's memory is sequentially consistent): every non-exited thread of the cluster.
    in->op = Op::kClusterBarrier;
    const int kind = take({"arrive", "wait"});
    if (kind < 0) failInvalid("barrier.cluster needs .arrive or .wait");
    in->mode =
        static_cast<uint8_t>(kind == 0 ? ClusterBarrierMode::kArrive : ClusterBarrierMode::kWait);
    ops(0, 0);
  } else if (base == "mapa" || base == "getctarank") {
    // mapa{.shared::cluster}.{u32,u64} d, a, rank; getctarank{.shared::cluster}.{u32,u64} d, a.
    const bool mapa = base == "mapa";
    in->op = mapa ? Op::kMapa : Op::kGetCtaRank;
    in->type = type0();
    if (in->type != Type::kU32 && in->type != Type::kU64)
      failInvalid(std::string(base) + " needs .u32 or .u64");
    if (!hasSpace) in->space = Space::kGeneric;
    if (in->space != Space::kShared && in->space != Space::kGeneric)
      failInvalid(std::string(base) + " takes a .shared::cluster or generic address");
    ops(mapa ? 3 : 2, mapa ? 3 : 2);
    if (mapa)
      setOps({dst(0, in->type), src(1, in->type), src(2, Type::kU32)});
    else
      setOps({dst(0, Type::kU32), src(1, in->type)});
  } else if (base == "bar" || base == "barrier") {
    if (take({"warp"}) >= 0) {
      take({"sync"});
      in->op = Op::kBarWarpSync;
      ops(1, 1);
      setOps({src(0, Type::kU32)});
    } else {
      int kind = take({"sync", "arrive", "red"});
      if (kind < 0 && base == "bar") kind = 0;  // plain `bar 0` is bar.sync
      if (kind < 0) failUnsupported("unsupported barrier form " + a.opcode);
      in->op = Op::kBar;
      // ops: [0] destination (red only, else none), [1] barrier id, [2] thread count (or none),
      // [3] predicate (red only).
      Operand none;
      if (kind == 2) {
        int r = take({"popc", "and", "or"});
        if (r < 0) failInvalid("bar.red needs .popc, .and or .or");
        in->mode = static_cast<uint8_t>(static_cast<int>(BarMode::kRedPopc) + r);
        in->type = type0();
        if ((r == 0) != (in->type == Type::kU32) || (r != 0 && in->type != Type::kPred))
          failInvalid("bar.red.popc needs .u32 and bar.red.and/.or need .pred");
        ops(3, 4);
        const size_t last = a.operands.size() - 1;
        setOps({dst(0, in->type), src(1, Type::kU32), last == 3 ? src(2, Type::kU32) : none,
                src(last, Type::kPred)});
      } else {
        in->mode = static_cast<uint8_t>(kind == 0 ? BarMode::kSync : BarMode::kArrive);
        // bar.arrive needs the thread count: the ISA leaves an arrive on a full barrier undefined.
        ops(kind == 1 ? 2 : 1, 2);
        setOps({none, src(0, Type::kU32), a.operands.size() == 2 ? src(1, Type::kU32) : none});
      }
    }
  } else if (base == "atom" || base == "red") {
    int op = take({"add", "min", "max", "inc", "dec", "and", "or", "xor", "exch", "cas"});
    if (op < 0) failUnsupported("unsupported atomic operation " + a.opcode);
    in->mode = static_cast<uint8_t>(op);
    in->type = type0();
    if (in->vec != 1) failUnsupported("vector atomics are not supported");
    if (base == "atom") {
      in->op = Op::kAtom;
      bool cas = op == static_cast<int>(AtomOp::kCas);
      ops(cas ? 4 : 3, cas ? 4 : 3);
      Operand addr = src(1, Type::kU64);
      if (addr.kind != OperandKind::kAddress) failInvalid("atom needs an address");
      if (cas)
        setOps({dst(0, in->type), addr, src(2, in->type), src(3, in->type)});
      else
        setOps({dst(0, in->type), addr, src(2, in->type)});
    } else {
      in->op = Op::kRed;
      ops(2, 2);
      Operand addr = src(0, Type::kU64);
      if (addr.kind != OperandKind::kAddress) failInvalid("red needs an address");
      setOps({addr, src(1, in->type)});
    }
  } else if (base == "shfl") {
    if (take({"sync"}) < 0) failUnsupported("shfl without .sync is not supported");
    int mode = take({"up", "down", "bfly", "idx"});
    if (mode < 0) failInvalid("shfl needs a mode");
    in->op = Op::kShfl;
    in->mode = static_cast<uint8_t>(mode);
    in->type = type0();
    ops(5, 5);
    setOps({dst(0, in->type), src(1, in->type), src(2, Type::kU32), src(3, Type::kU32),
            src(4, Type::kU32)});
  } else if (base == "vote") {
    if (take({"sync"}) < 0) failUnsupported("vote without .sync is not supported");
    int mode = take({"all", "any", "uni", "ballot"});
    if (mode < 0) failInvalid("vote needs a mode");
    in->op = Op::kVote;
    in->mode = static_cast<uint8_t>(mode);
    in->type = type0();
    ops(3, 3);
    setOps({dst(0, in->type), src(1, Type::kPred), src(2, Type::kU32)});
  } else if (base == "activemask") {
    in->op = Op::kActivemask;
    in->type = type0();
    ops(1, 1);
    setOps({dst(0, Type::kB32)});
  } else if (base == "redux") {
    take({"sync"});
    int op = take({"add", "min", "max", "and", "or", "xor"});
    if (op < 0) failUnsupported("unsupported redux operation " + a.opcode);
    in->op = Op::kRedux;
    in->mode = static_cast<uint8_t>(op);
    in->type = type0();
    if (isFloat(in->type)) failUnsupported("floating-point redux is not supported");
    ops(3, 3);
    setOps({dst(0, in->type), src(1, in->type), src(2, Type::kU32)});
  } else if (base == "match") {
    take({"sync"});
    int m = take({"any", "all"});
    if (m < 0) failInvalid("match needs any/all");
    in->op = Op::kMatch;
    in->mode = static_cast<uint8_t>(m);
    in->type = type0();
    ops(3, 3);
    setOps({dst(0, Type::kB32), src(1, in->type), src(2, Type::kU32)});
  } else if (base == "elect") {
    if (take({"sync"}) < 0) failInvalid("elect needs .sync");
    in->op = Op::kElect;
    in->type = Type::kB32;
    ops(2, 2);
    if (a.operands[0].kind != AstOperand::Kind::kDual) failInvalid("elect needs d|p");
    setOps({dst(0, Type::kB32), src(1, Type::kU32)});
  } else if (base == "lop3") {
    in->op = Op::kLop3;
    in->type = type0();
    if (in->type != Type::kB32) failInvalid("lop3 needs .b32");
    ops(5, 5);  // the PTX 8.2 form with a predicate output and input has six
    Operand lut = src(4, Type::kU32);
    if (lut.kind != OperandKind::kImm || lut.imm > 0xff) failInvalid("lop3 needs an 8-bit immLut");
    setOps({dst(0, in->type), src(1, in->type), src(2, in->type), src(3, in->type), lut});
  } else if (base == "dp4a" || base == "dp2a") {
    in->op = base == "dp4a" ? Op::kDp4a : Op::kDp2a;
    if (types.size() != 2) failInvalid(std::string(base) + " needs two types");
    for (Type t : types)
      if (t != Type::kU32 && t != Type::kS32) failInvalid(std::string(base) + " needs .u32/.s32");
    in->type = types[0];
    in->type2 = types[1];
    if (in->op == Op::kDp2a) {
      int half = take({"lo", "hi"});
      if (half < 0) failInvalid("dp2a needs .lo or .hi");
      if (half == 1) in->flags |= kHi;
    }
    ops(4, 4);
    const Type acc = isSigned(in->type) || isSigned(in->type2) ? Type::kS32 : Type::kU32;
    setOps({dst(0, acc), src(1, in->type), src(2, in->type2), src(3, acc)});
  } else if (base == "tex" || base == "tld4" || base == "suld" || base == "sust") {
    decodeTextureAccess(a, in, take, types);
  } else if (base == "txq" || base == "suq") {
    decodeTextureQuery(a, in, take, types);
  } else if (base == "fns") {
    in->op = Op::kFns;
    in->type = type0();
    ops(4, 4);
    setOps({dst(0, Type::kB32), src(1, Type::kB32), src(2, Type::kU32), src(3, Type::kS32)});
  } else if (base == "griddepcontrol" || base == "setmaxnreg") {
    // griddepcontrol: the pool runs no grid before the one it depends on has completed, so the
    // wait is satisfied and launch_dependents has nothing to release. setmaxnreg: a register
    // allocation hint; the interpreter has no register file to resize.
    in->op = Op::kNop;
    if (base == "griddepcontrol" && take({"wait", "launch_dependents"}) < 0)
      failInvalid("griddepcontrol needs .wait or .launch_dependents");
    if (base == "setmaxnreg") {
      if (take({"inc", "dec"}) < 0 || take({"sync"}) < 0)
        failInvalid("setmaxnreg needs .inc or .dec and .sync");
      ops(1, 1);
      src(0, Type::kU32);
    }
  } else if (base == "mma" || base == "wmma" || base == "ldmatrix" || base == "stmatrix" ||
             base == "movmatrix") {
    decodeMatrix(a, in);
    std::fill(used.begin(), used.end(), true);
  } else if (base == "mbarrier") {
    decodeMbarrier(a, in, take, hasSpace);  // a qualifier it does not take is refused below
  } else if (base == "bfe") {
    in->op = Op::kBfe;
    in->type = type0();
    ops(4, 4);
    setOps({dst(0, in->type), src(1, in->type), src(2, Type::kU32), src(3, Type::kU32)});
  } else if (base == "bfi") {
    in->op = Op::kBfi;
    in->type = type0();
    ops(5, 5);
    setOps({dst(0, in->type), src(1, in->type), src(2, in->type), src(3, Type::kU32),
            src(4, Type::kU32)});
  } else if (base == "bmsk") {
    if (!(in->flags & (kWrap | kClamp))) failInvalid("bmsk needs .clamp or .wrap");
    in->op = Op::kBmsk;
    in->type = type0();
    ops(3, 3);
    setOps({dst(0, in->type), src(1, Type::kU32), src(2, Type::kU32)});
  } else if (base == "prmt") {
    int m = take({"f4e", "b4e", "rc8", "ecl", "ecr", "rc16"});
    in->op = Op::kPrmt;
    in->mode = static_cast<uint8_t>(m + 1);  // 0 = default mode
    in->type = type0();
    ops(4, 4);
    setOps({dst(0, in->type), src(1, in->type), src(2, in->type), src(3, in->type)});
  } else if (base == "shf") {
    int d = take({"l", "r"});
    if (d < 0) failInvalid("shf needs .l or .r");
    if (d == 0) in->flags |= kLeft;
    in->op = Op::kShf;
    in->type = type0();
    ops(4, 4);
    setOps({dst(0, in->type), src(1, in->type), src(2, in->type), src(3, Type::kU32)});
  } else if (base == "testp") {
    int m = take({"finite", "infinite", "number", "notanumber", "normal", "subnormal"});
    if (m < 0) failInvalid("testp needs a test");
    in->op = Op::kTestp;
    in->mode = static_cast<uint8_t>(m);
    in->type = type0();
    ops(2, 2);
    setOps({dst(0, Type::kPred), src(1, in->type)});
  } else if (base == "cp" && a.opcode.find("bulk") != std::string::npos) {
    decodeBulkCopy(a, in);
    std::fill(used.begin(), used.end(), true);
  } else if (base == "cp") {
    if (take({"async"}) < 0) failUnsupported("unsupported instruction " + a.opcode);
    if (a.opcode.find(".mbarrier.arrive") != std::string::npos) {
      // The barrier sees one arrival when the thread's earlier copies complete, which they
      // already have. Without .noinc the pending count is first raised by one, so the net
      // effect is none; with .noinc it is an ordinary arrival.
      requireOperands(a, 1, 1);
      Operand barrier = operand(a.operands[0], Type::kU64);
      if (barrier.kind != OperandKind::kAddress) failInvalid("cp.async.mbarrier needs an address");
      if (a.opcode.find(".noinc") != std::string::npos) {
        in->op = Op::kMbarrier;
        in->mode = static_cast<uint8_t>(MbarrierOp::kArrive);
        in->type = Type::kB64;
        in->numOps = 3;
        in->ops[1] = barrier;
      } else {
        in->op = Op::kNop;
      }
      // The ISA gives this instruction .shared and .shared::cta barriers only.
      if (a.opcode.find("shared::cluster") != std::string::npos)
        failInvalid(a.opcode + ": cp.async.mbarrier.arrive takes a .shared::cta barrier");
    } else if (take({"commit_group", "wait_group", "wait_all"}) >= 0) {
      in->op = Op::kNop;  // copies complete synchronously, so groups are always done
    } else {
      in->op = Op::kCpAsync;
      ops(3, 4);
      Operand d = src(0, Type::kU64), s2 = src(1, Type::kU64);
      if (d.kind != OperandKind::kAddress || s2.kind != OperandKind::kAddress)
        failInvalid("cp.async needs addresses");
      if (a.operands.size() == 4)
        setOps({d, s2, src(2, Type::kU32), src(3, Type::kU32)});
      else
        setOps({d, s2, src(2, Type::kU32)});
      take({"ca", "cg"});
    }
    std::fill(used.begin(), used.end(), true);
  } else {
    failUnsupported("unsupported instruction " + std::string(a.opcode));
  }
  for (size_t w = 0; w < words.size(); ++w)
    if (!used[w])
      failUnsupported("unsupported modifier ." + std::string(words[w]) + " in " + a.opcode);
  // Register sources must be registers, immediates, specials or symbols; addresses only where
  // decoded.
  for (int i = 0; i < in->numOps; ++i) {
    const Operand& o = in->ops[i];
    if (o.kind == OperandKind::kAddress && in->op != Op::kLd && in->op != Op::kSt &&
        in->op != Op::kAtom && in->op != Op::kRed && in->op != Op::kCpAsync &&
        in->op != Op::kMbarrier && in->op != Op::kMatrix && in->op != Op::kBulkCopy)
      failInvalid("unexpected address operand");
    if (o.kind == OperandKind::kVector && in->op != Op::kMov && in->op != Op::kLd &&
        in->op != Op::kSt && in->op != Op::kTex && in->op != Op::kSuld && in->op != Op::kSust &&
        in->op != Op::kMatrix && in->op != Op::kBulkCopy)
      failInvalid("unexpected vector operand");
  }
  // .v8: the 256-bit loads and stores of 32-bit elements (sm_100); nothing else takes eight.
  if (in->vec == 8 && ((in->op != Op::kLd && in->op != Op::kSt) || typeBytes(in->type) != 4))
    failUnsupported(".v8 is supported on ld and st of 32-bit elements only: " + a.opcode);
  if ((in->op == Op::kLd || in->op == Op::kSt) && in->vec > 1) {
    const Operand& v = in->ops[in->op == Op::kLd ? 0 : 1];
    if (v.kind != OperandKind::kVector || v.count != in->vec) failInvalid("vector width mismatch");
  }
  if (isFloat(in->type) && in->type != Type::kF32 && in->type != Type::kF64 && in->op != Op::kMov &&
      in->op != Op::kLd && in->op != Op::kSt && in->op != Op::kCvt) {
    // Half-precision forms: arithmetic subset only.
    switch (in->op) {
      case Op::kAdd:
      case Op::kSub:
      case Op::kMul:
      case Op::kFma:
      case Op::kMin:
      case Op::kMax:
      case Op::kNeg:
      case Op::kAbs:
      case Op::kSetp:
      case Op::kSet:
      case Op::kSelp:
      case Op::kAtom:
      case Op::kRed:
      case Op::kEx2:
      case Op::kTanh:
        break;
      default:
        failUnsupported("unsupported half-precision instruction " + a.opcode);
    }
  }
}

// mma.sync, wmma.{load,store,mma}, ldmatrix, stmatrix, movmatrix: the opcode is decoded (and
// refused where the emu cannot run it) by decodeMatrixOpcode; here the operands are checked
// against the fragment sizes. Operand slots: see MatrixKind.
void Builder::decodeMatrix(const AstInstruction& a, Instr* in) {
  MatrixInstr m;
  bool invalid = false;
  const std::string why = decodeMatrixOpcode(a.opcode, &m, &invalid);
  if (!why.empty()) {
    if (invalid) failInvalid(why);
    failUnsupported(why);
  }
  in->op = Op::kMatrix;
  in->call = static_cast<uint32_t>(img_.matrixInstrs.size());
  auto literalType = [](MatrixType t) {
    return t == MatrixType::kF32 ? Type::kF32 : t == MatrixType::kF64 ? Type::kF64 : Type::kB32;
  };
  // A fragment: a vector of exactly as many registers as the layout gives (one may stand alone).
  auto fragment = [&](size_t i, MatrixUse use, bool dest) {
    const Type t = literalType(fragmentType(m, use));
    Operand o = dest ? destination(a, i, in, t) : operand(a.operands[i], t);
    const unsigned count = o.kind == OperandKind::kVector ? o.count : 1;
    if (count != fragmentRegisters(m, use))
      failInvalid(a.opcode + ": fragment operand " + std::to_string(i) + " needs " +
                  std::to_string(fragmentRegisters(m, use)) + " registers");
    if (o.kind != OperandKind::kVector && o.kind != OperandKind::kReg &&
        o.kind != OperandKind::kImm && o.kind != OperandKind::kSink)
      failInvalid(a.opcode + ": bad fragment operand");
    return o;
  };
  auto address = [&](size_t i) {
    Operand o = operand(a.operands[i], Type::kU64);
    if (o.kind != OperandKind::kAddress) failInvalid(a.opcode + " needs an address");
    return o;
  };
  Operand none;
  in->numOps = 4;
  switch (m.kind) {
    case MatrixKind::kMma:
    case MatrixKind::kWmmaMma:
      requireOperands(a, 4, 4);
      in->ops[0] = fragment(0, MatrixUse::kD, true);
      in->ops[1] = fragment(1, MatrixUse::kA, false);
      in->ops[2] = fragment(2, MatrixUse::kB, false);
      in->ops[3] = fragment(3, MatrixUse::kC, false);
      break;
    case MatrixKind::kWmmaLoad:
      requireOperands(a, 2, 3);
      in->ops[0] = fragment(0, m.use, true);
      in->ops[1] = address(1);
      in->ops[2] = a.operands.size() == 3 ? operand(a.operands[2], Type::kU32) : none;
      in->ops[3] = none;
      break;
    case MatrixKind::kWmmaStore:
      requireOperands(a, 2, 3);
      in->ops[0] = none;
      in->ops[1] = address(0);
      in->ops[2] = fragment(1, MatrixUse::kD, false);
      in->ops[3] = a.operands.size() == 3 ? operand(a.operands[2], Type::kU32) : none;
      break;
    case MatrixKind::kLdmatrix:
      requireOperands(a, 2, 2);
      in->ops[0] = fragment(0, MatrixUse::kA, true);
      in->ops[1] = address(1);
      in->ops[2] = in->ops[3] = none;
      break;
    case MatrixKind::kStmatrix:
      requireOperands(a, 2, 2);
      in->ops[0] = none;
      in->ops[1] = address(0);
      in->ops[2] = fragment(1, MatrixUse::kA, false);
      in->ops[3] = none;
      break;
    case MatrixKind::kMovmatrix:
      requireOperands(a, 2, 2);
      in->ops[0] = fragment(0, MatrixUse::kD, true);
      in->ops[1] = fragment(1, MatrixUse::kA, false);
      in->ops[2] = in->ops[3] = none;
      break;
  }
  if (m.kind == MatrixKind::kLdmatrix || m.kind == MatrixKind::kStmatrix) {
    if (in->space != Space::kShared && in->space != Space::kGeneric)
      failInvalid(a.opcode + " addresses shared memory");
  } else if (m.kind == MatrixKind::kWmmaLoad || m.kind == MatrixKind::kWmmaStore) {
    if (in->space != Space::kShared && in->space != Space::kGlobal && in->space != Space::kGeneric)
      failInvalid(a.opcode + " addresses global or shared memory");
  }
  img_.matrixInstrs.push_back(m);
}

// tex.{1d,2d,3d,a1d,a2d}.v4.{f32,s32,u32}.{f32,s32}, tex.{cube,acube}.v4.{f32,s32,u32}.f32 and
// suld.b / sust.b on 1d, 2d, 3d, a1d and a2d surfaces (a cubemap surface is addressed as a2d, the
// face as the layer): [handle, {coordinates}] with the handle in a register (a CUtexObject or
// CUsurfObject the kernel got as a parameter) or the name of a module's texture or surface
// reference (an immediate textureReferenceHandle). The layered forms put the layer first; cube
// takes a direction {x, y, z, ignored}, acube {layer, x, y, z}.
template <class Take>
void Builder::decodeTextureAccess(const AstInstruction& a, Instr* in, Take& take,
                                  const std::vector<Type>& types) {
  const std::string_view base = std::string_view(a.opcode).substr(0, a.opcode.find('.'));
  const bool gather = base == "tld4";
  const bool texture = base == "tex" || gather;
  // tld4 names the channel it gathers (kTex's mode bits 4-6: the channel plus one).
  const int channel = gather ? take({"r", "g", "b", "a"}) : -1;
  if (gather && channel < 0) failInvalid("tld4 needs .r, .g, .b or .a: " + a.opcode);
  const int geometry = take({"1d", "2d", "3d", "a1d", "a2d", "cube", "acube"});
  if (geometry < 0) failUnsupported("unsupported texture or surface geometry in " + a.opcode);
  const bool cube = geometry >= static_cast<int>(TexGeometry::kCube);
  if (cube && !texture) failInvalid("surfaces have no cube geometry: " + a.opcode);
  if (gather && geometry != 1 && geometry != 4)
    failUnsupported("tld4 gathers from 2D and layered 2D textures here: " + a.opcode);
  // tex.level takes a level of detail, tex.grad two derivative vectors, as more operands.
  const int lod = texture ? take({"level", "grad", "base"}) : -1;
  if (lod == 2) failUnsupported("tex.base is not supported: " + a.opcode);
  if (lod >= 0 && gather) failUnsupported("tld4 with a level of detail: " + a.opcode);
  if (lod == 1 && cube) failUnsupported("tex.grad on a cube texture is not supported: " + a.opcode);
  static constexpr uint8_t kCoordinates[] = {1, 2, 4, 2, 4, 4, 4};  // vector size per geometry
  in->mode = static_cast<uint8_t>(geometry);
  const size_t operands = lod == 0 ? 3 : lod == 1 ? 4 : 2;
  requireOperands(a, operands, operands);
  const bool store = base == "sust";
  const AstOperand& at = a.operands[store ? 0 : 1];
  if (at.kind != AstOperand::Kind::kAddress || at.name.empty() || at.integer != 0 ||
      at.elements.size() != 1 || at.elements[0].kind != AstOperand::Kind::kVector)
    failInvalid(a.opcode + " needs [handle, {coordinates}]");
  const Operand handle = textureHandle(at, a.opcode, texture);
  if (texture) {
    in->op = Op::kTex;
    if (gather) in->mode = static_cast<uint8_t>(in->mode | ((channel + 1) << 4));
    if (types.size() != 2 || in->vec != 4) failUnsupported("unsupported texture fetch " + a.opcode);
    in->type = types[0];
    in->type2 = types[1];
    if (in->type != Type::kF32 && in->type != Type::kS32 && in->type != Type::kU32)
      failUnsupported("tex returns .f32, .s32 or .u32 here: " + a.opcode);
    if (in->type2 != Type::kF32 && (gather || cube || in->type2 != Type::kS32))
      failInvalid(std::string(base) + " coordinates are .f32" + (gather || cube ? "" : " or .s32") +
                  ": " + a.opcode);
  } else {
    if (take({"b"}) < 0) failUnsupported("only .b surface accesses are supported: " + a.opcode);
    const int boundary = take({"trap", "zero"});
    const uint8_t mode = (in->flags & kClamp) ? 1 : boundary == 1 ? 2 : 0;  // SurfaceBoundary
    in->flags &= ~kClamp;
    in->mode = static_cast<uint8_t>(in->mode | (mode << 4));
    in->op = store ? Op::kSust : Op::kSuld;
    if (types.size() != 1) failInvalid(a.opcode + " needs one type");
    in->type = types[0];
    if (in->type != Type::kB8 && in->type != Type::kB16 && in->type != Type::kB32 &&
        in->type != Type::kB64)
      failInvalid(a.opcode + " needs .b8, .b16, .b32 or .b64");
    in->type2 = Type::kS32;
  }
  Operand data = store ? operand(a.operands[1], in->type) : destination(a, 0, in, in->type);
  if (data.kind != OperandKind::kVector || data.count != in->vec)
    failInvalid(a.opcode + ": data vector width mismatch");
  Operand coords = operand(at.elements[0], in->type2);
  if (coords.count != kCoordinates[geometry])
    failInvalid(a.opcode + ": wrong number of coordinates");
  in->numOps = static_cast<uint8_t>(1 + operands);  // 3 plain, 4 with a level, 5 gradients
  in->ops[0] = data;
  in->ops[1] = handle;
  in->ops[2] = coords;
  for (size_t i = 2; i < operands; ++i) {
    in->ops[1 + i] = operand(a.operands[i], Type::kF32);
    if (in->ops[1 + i].kind == OperandKind::kVector && lod == 0)
      failInvalid(a.opcode + ": the level of detail is one .f32");
  }
}

// The handle of a texture or surface instruction: a register (a CUtexObject or CUsurfObject the
// kernel got as a parameter) or the name of a module's texture or surface reference (an immediate
// textureReferenceHandle).
Operand Builder::textureHandle(const AstOperand& at, const std::string& opcode, bool texture) {
  Operand handle;
  if (auto ref = textureReferences_.find(at.name);
      ref != textureReferences_.end() && !lookupScoped(at.name)) {
    if (img_.references[ref->second].surface != !texture)
      failInvalid(opcode + " names " + (texture ? "surface" : "texture") + " reference " + at.name);
    handle.kind = OperandKind::kImm;
    handle.imm = textureReferenceHandle(ref->second);
    referencesUsed_.insert(ref->second);
  } else {
    handle = resolveName(at.name, false);
    if (handle.kind != OperandKind::kReg)
      failUnsupported(opcode + " needs its handle in a register or a texture reference");
  }
  return handle;
}

// txq.{width,height,depth,normalized_coords,array_size,num_mipmap_levels,num_samples,filter_mode,
// addr_mode_0,addr_mode_1,addr_mode_2}.b32 d, [a], txq.level.{width,height,depth}.b32 d, [a], lod
// and suq.{width,height,depth,array_size,memory_layout}.b32 d, [a]. Refused by name: the channel
// data type and order (the ISA answers them with "the source language's enumeration", and which
// values CUDA's driver gives is not documented) and force_unnormalized_coords (defined for
// independent-mode samplers only, which CUDA does not use).
template <class Take>
void Builder::decodeTextureQuery(const AstInstruction& a, Instr* in, Take& take,
                                 const std::vector<Type>& types) {
  const bool surface = a.opcode.rfind("suq", 0) == 0;
  const bool level = !surface && take({"level"}) >= 0;
  if (take({"channel_data_type", "channel_order"}) >= 0)
    failUnsupported(a.opcode +
                    ": the channel data type and order of CUDA objects are not documented");
  if (!surface && take({"force_unnormalized_coords"}) >= 0)
    failUnsupported(a.opcode + ": force_unnormalized_coords queries an independent-mode sampler");
  static constexpr std::pair<std::string_view, TexQuery> kQueries[] = {
      {"width", TexQuery::kWidth},
      {"height", TexQuery::kHeight},
      {"depth", TexQuery::kDepth},
      {"normalized_coords", TexQuery::kNormalizedCoords},
      {"array_size", TexQuery::kArraySize},
      {"num_mipmap_levels", TexQuery::kNumMipmapLevels},
      {"num_samples", TexQuery::kNumSamples},
      {"filter_mode", TexQuery::kFilterMode},
      {"addr_mode_0", TexQuery::kAddrMode0},
      {"addr_mode_1", TexQuery::kAddrMode1},
      {"addr_mode_2", TexQuery::kAddrMode2},
      {"memory_layout", TexQuery::kMemoryLayout}};
  int found = -1;
  for (size_t q = 0; q < std::size(kQueries) && found < 0; ++q)
    if (take({kQueries[q].first}) >= 0) found = static_cast<int>(q);
  if (found < 0) failInvalid(a.opcode + " names no attribute to query");
  const TexQuery query = kQueries[found].second;
  const bool dimension =
      query == TexQuery::kWidth || query == TexQuery::kHeight || query == TexQuery::kDepth;
  const bool surfaceQuery =
      dimension || query == TexQuery::kArraySize || query == TexQuery::kMemoryLayout;
  if (surface ? !surfaceQuery : query == TexQuery::kMemoryLayout)
    failInvalid(a.opcode + ": " + (surface ? "suq" : "txq") + " has no such query");
  if (level && !dimension) failInvalid(a.opcode + ": txq.level queries width, height or depth");
  if (types.size() != 1 || types[0] != Type::kB32) failInvalid(a.opcode + " needs .b32");
  const size_t operands = level ? 3 : 2;
  requireOperands(a, operands, operands);
  const AstOperand& at = a.operands[1];
  if (at.kind != AstOperand::Kind::kAddress || at.name.empty() || at.integer != 0 ||
      !at.elements.empty())
    failInvalid(a.opcode + " needs [handle]");
  in->op = Op::kTexQuery;
  in->type = Type::kB32;
  in->mode = static_cast<uint8_t>(static_cast<uint8_t>(query) | (surface ? kTexQueryOfSurface : 0));
  in->numOps = static_cast<uint8_t>(operands);
  in->ops[0] = destination(a, 0, in, Type::kB32);
  in->ops[1] = textureHandle(at, a.opcode, !surface);
  if (level) in->ops[2] = operand(a.operands[2], Type::kS32);
}

// cvt between an fp8 pair (e4m3x2, e5m2x2) and f32 / f16x2: the forms sm_89+ have. To fp8 they
// round to nearest even and saturate to the largest finite value (.satfinite, required); .relu
// clamps negatives to zero.
template <class Take>
void Builder::decodeFp8Cvt(const AstInstruction& a, Instr* in, Take& take,
                           const std::vector<Type>& types) {
  const int fp8 = take({"e4m3x2", "e5m2x2"});
  const size_t fp8At = a.opcode.find(fp8 == 0 ? ".e4m3x2" : ".e5m2x2");
  if (types.size() != 1 || in->round != Round::kRN)
    failUnsupported("unsupported fp8 conversion " + a.opcode);
  const Type other = types[0];
  const bool toFp8 = fp8At < a.opcode.rfind(other == Type::kF32 ? ".f32" : ".f16x2");
  in->op = Op::kCvt;
  if (toFp8) {
    if (take({"satfinite"}) < 0) failInvalid("cvt to an fp8 pair needs .satfinite");
    if (other != Type::kF32 && other != Type::kF16x2)
      failUnsupported("unsupported fp8 conversion " + a.opcode);
    in->mode = static_cast<uint8_t>(fp8 == 0 ? Fp8Cvt::kToE4m3 : Fp8Cvt::kToE5m2);
    in->type = Type::kB16;
    in->type2 = other;
    if (other == Type::kF32) {
      requireOperands(a, 3, 3);
      in->numOps = 3;
      in->ops[0] = destination(a, 0, in, Type::kB16);
      in->ops[1] = operand(a.operands[1], Type::kF32);
      in->ops[2] = operand(a.operands[2], Type::kF32);
    } else {
      requireOperands(a, 2, 2);
      in->numOps = 2;
      in->ops[0] = destination(a, 0, in, Type::kB16);
      in->ops[1] = operand(a.operands[1], Type::kB32);
    }
  } else {
    if (other != Type::kF16x2) failUnsupported("unsupported fp8 conversion " + a.opcode);
    in->mode = static_cast<uint8_t>(fp8 == 0 ? Fp8Cvt::kFromE4m3 : Fp8Cvt::kFromE5m2);
    in->type = Type::kB32;
    in->type2 = Type::kB16;
    requireOperands(a, 2, 2);
    in->numOps = 2;
    in->ops[0] = destination(a, 0, in, Type::kB32);
    in->ops[1] = operand(a.operands[1], Type::kB16);
  }
}

// mbarrier on a CTA's shared memory. ops: [0] destination or none, [1] the barrier's address,
// [2] the count, state, phase parity or transaction bytes. Clusters are one CTA (the pool offers
// no larger ones), so a .shared::cluster barrier is one of the CTA's own.
template <class Take>
void Builder::decodeMbarrier(const AstInstruction& a, Instr* in, Take& take, bool hasSpace) {
  const int kind = take({"init", "arrive", "arrive_drop", "test_wait", "try_wait", "inval",
                         "pending_count", "expect_tx", "complete_tx"});
  if (kind < 0) failUnsupported("unsupported instruction " + a.opcode);
  take({"noComplete"});
  if (take({"parity"}) >= 0) in->flags |= kParity;
  const bool arrival = static_cast<MbarrierOp>(kind) == MbarrierOp::kArrive ||
                       static_cast<MbarrierOp>(kind) == MbarrierOp::kArriveDrop;
  if (take({"expect_tx"}) >= 0) {
    if (!arrival) failInvalid(".expect_tx only qualifies mbarrier.arrive and arrive_drop");
    in->flags |= kExpectTx;
  }
  if (take({"shared::cluster"}) >= 0) {
    in->space = Space::kShared;
    hasSpace = true;
  }
  in->op = Op::kMbarrier;
  in->mode = static_cast<uint8_t>(kind);
  in->type = Type::kB64;
  if (!hasSpace) in->space = Space::kGeneric;
  if (in->space != Space::kShared && in->space != Space::kGeneric)
    failInvalid("mbarrier needs a shared or generic address");
  auto address = [&](size_t i) {
    Operand o = operand(a.operands[i], Type::kU64);
    if (o.kind != OperandKind::kAddress) failInvalid("mbarrier needs an address operand");
    return o;
  };
  Operand none;
  in->numOps = 3;
  switch (static_cast<MbarrierOp>(kind)) {
    case MbarrierOp::kInit:
      requireOperands(a, 2, 2);
      in->ops[1] = address(0);
      in->ops[2] = operand(a.operands[1], Type::kU32);
      break;
    case MbarrierOp::kInval:
      requireOperands(a, 1, 1);
      in->ops[1] = address(0);
      in->ops[2] = none;
      break;
    case MbarrierOp::kExpectTx:
    case MbarrierOp::kCompleteTx:
      requireOperands(a, 2, 2);
      in->ops[1] = address(0);
      in->ops[2] = operand(a.operands[1], Type::kU32);
      break;
    case MbarrierOp::kArrive:
    case MbarrierOp::kArriveDrop:
      requireOperands(a, (in->flags & kExpectTx) ? 3 : 2, 3);
      in->ops[0] = destination(a, 0, in, Type::kB64);
      in->ops[1] = address(1);
      in->ops[2] = a.operands.size() == 3 ? operand(a.operands[2], Type::kU32) : none;
      break;
    case MbarrierOp::kTestWait:
    case MbarrierOp::kTryWait:
      requireOperands(a, 3, 4);  // try_wait's optional suspend-time hint is only a hint
      in->ops[0] = destination(a, 0, in, Type::kPred);
      in->ops[1] = address(1);
      in->ops[2] = operand(a.operands[2], (in->flags & kParity) ? Type::kU32 : Type::kB64);
      break;
    case MbarrierOp::kPendingCount:
      requireOperands(a, 2, 2);
      in->ops[0] = destination(a, 0, in, Type::kU32);
      in->ops[1] = none;
      in->ops[2] = operand(a.operands[1], Type::kB64);
      break;
  }
}

namespace {
// The element operations of cp.reduce.async.bulk and cp.reduce.async.bulk.tensor.
bool bulkReduceOp(std::string_view name, AtomOp* op) {
  static const std::pair<std::string_view, AtomOp> kRedOps[] = {
      {"add", AtomOp::kAdd}, {"min", AtomOp::kMin}, {"max", AtomOp::kMax}, {"inc", AtomOp::kInc},
      {"dec", AtomOp::kDec}, {"and", AtomOp::kAnd}, {"or", AtomOp::kOr},   {"xor", AtomOp::kXor}};
  for (const auto& [n, o] : kRedOps) {
    if (n == name) {
      *op = o;
      return true;
    }
  }
  return false;
}
}  // namespace

// cp.async.bulk (non-tensor), its prefetch and its bulk-group bookkeeping. Copies complete as they
// are issued (a valid order of the asynchronous proxy), so commit_group and wait_group have
// nothing left to wait for. Forms the emu does not run are refused by name.
void Builder::decodeBulkCopy(const AstInstruction& a, Instr* in) {
  const std::string& op = a.opcode;
  auto has = [&](std::string_view q) { return op.find(q) != std::string::npos; };
  if (has(".tensor")) {
    decodeBulkTensor(a, in);
    return;
  }
  const bool multicast = has(".multicast::cluster");
  if (has(".cp_mask")) failUnsupported("byte-masked bulk copies are not implemented: " + op);
  auto parts = splitDots(op);
  const bool reduce = parts.size() > 1 && parts[1] == "reduce";
  if (reduce) {
    // cp.reduce.async.bulk.dst.src.completion{.L2::cache_hint}.redOp{.noftz}.type: the element
    // operation and type close the opcode; the rest reads like a copy.
    if (parts.size() < 9 || parts[2] != "async" || parts[3] != "bulk")
      failUnsupported("unsupported instruction " + op);
    const Type t = parseType(parts.back());
    const bool noftz = parts[parts.size() - 2] == "noftz";
    const std::string_view redOp = parts[parts.size() - (noftz ? 3 : 2)];
    AtomOp atomOp;
    if (!bulkReduceOp(redOp, &atomOp) || t == Type::kNone)
      failUnsupported("unsupported instruction " + op);
    const bool half = t == Type::kF16 || t == Type::kBF16;
    if (half && (atomOp != AtomOp::kAdd || !noftz))
      failUnsupported("cp.reduce.async.bulk " + std::string(redOp) + " on 16-bit floats: " + op);
    if (noftz && !half) failInvalid(".noftz needs .f16 or .bf16: " + op);
    if ((t == Type::kF32 || t == Type::kF64) && atomOp != AtomOp::kAdd)
      failInvalid("cp.reduce.async.bulk on floats only adds: " + op);
    in->type = t;
    in->call = static_cast<uint32_t>(atomOp);
    parts.erase(parts.end() - (noftz ? 3 : 2), parts.end());
    parts.erase(parts.begin() + 1);  // now reads cp.async.bulk.dst.src.completion...
  }
  if (parts.size() < 4 || parts[1] != "async" || parts[2] != "bulk")
    failUnsupported("unsupported instruction " + op);
  const bool hint = has(".L2::cache_hint");
  auto address = [&](size_t i) {
    Operand o = operand(a.operands[i], Type::kU64);
    if (o.kind != OperandKind::kAddress) failInvalid(op + " needs an address operand");
    return o;
  };
  auto policy = [&](size_t i) {  // the cache policy of .L2::cache_hint: read, then unused
    if (hint) operand(a.operands[i], Type::kB64);
  };
  if (!reduce) in->type = Type::kB64;
  if (!reduce && (parts[3] == "commit_group" || parts[3] == "wait_group")) {
    in->op = Op::kNop;
    const bool wait = parts[3] == "wait_group";
    const bool readOnly = wait && parts.size() == 5 && parts[4] == "read";
    if (parts.size() != 4 && !readOnly) failUnsupported("unsupported instruction " + op);
    requireOperands(a, wait ? 1 : 0, wait ? 1 : 0);
    if (wait) {
      Operand n = operand(a.operands[0], Type::kU32);
      if (n.kind != OperandKind::kImm) failInvalid("cp.async.bulk.wait_group needs a constant");
    }
    return;
  }
  in->op = Op::kBulkCopy;
  if (!reduce && parts[3] == "prefetch") {
    if (parts.size() < 6 || parts[4] != "L2" || parts[5] != "global")
      failUnsupported("unsupported instruction " + op);
    requireOperands(a, hint ? 3 : 2, hint ? 3 : 2);
    in->mode = static_cast<uint8_t>(BulkCopyKind::kPrefetch);
    in->numOps = 2;
    in->ops[0] = address(0);
    in->ops[1] = operand(a.operands[1], Type::kU32);
    policy(2);
    return;
  }
  if (parts.size() < 6) failUnsupported("unsupported instruction " + op);
  const std::string_view dst = parts[3], srcSpace = parts[4], completion = parts[5];
  const bool sharedDst = dst == "shared::cluster" || dst == "shared::cta";
  const bool mbarrier = completion == "mbarrier::complete_tx::bytes";
  BulkCopyKind kind;
  if (sharedDst && srcSpace == "global" && mbarrier)
    kind = BulkCopyKind::kGlobalToShared;
  else if (dst == "shared::cluster" && srcSpace == "shared::cta" && mbarrier)
    kind = BulkCopyKind::kSharedToShared;
  else if (dst == "global" && srcSpace == "shared::cta" && completion == "bulk_group")
    kind = BulkCopyKind::kSharedToGlobal;
  else
    failUnsupported("unsupported instruction " + op);
  if (reduce) {
    if (kind == BulkCopyKind::kGlobalToShared) failUnsupported("unsupported instruction " + op);
    const bool sharedOk = in->type == Type::kB32 || in->type == Type::kU32 ||
                          in->type == Type::kS32 || in->type == Type::kB64 ||
                          in->type == Type::kU64;
    if (kind == BulkCopyKind::kSharedToShared && !sharedOk)
      failInvalid("cp.reduce.async.bulk to shared memory takes 32- and 64-bit integers: " + op);
    kind = kind == BulkCopyKind::kSharedToShared ? BulkCopyKind::kReduceSharedToShared
                                                 : BulkCopyKind::kReduceSharedToGlobal;
  }
  for (size_t i = 6; i < parts.size(); ++i)
    if (parts[i] != "L2::cache_hint" && parts[i] != "multicast::cluster")
      failUnsupported("unsupported instruction " + op);
  if (multicast && kind != BulkCopyKind::kGlobalToShared)
    failInvalid(".multicast::cluster copies from global to .shared::cluster only: " + op);
  in->mode = static_cast<uint8_t>(kind);
  in->numOps = multicast ? 5 : 4;
  const size_t fixed =
      kind == BulkCopyKind::kSharedToGlobal || kind == BulkCopyKind::kReduceSharedToGlobal ? 3 : 4;
  const size_t count = fixed + (multicast ? 1 : 0) + (hint ? 1 : 0);
  requireOperands(a, count, count);
  in->ops[0] = address(0);
  in->ops[1] = address(1);
  in->ops[2] = operand(a.operands[2], Type::kU32);
  if (fixed == 4) in->ops[3] = address(3);
  if (multicast) {
    in->flags |= kMulticast;
    in->ops[4] = operand(a.operands[fixed], Type::kB16);
  }
  policy(fixed + (multicast ? 1 : 0));
}

// A tensor copy's [tensorMap, {coordinates}]: the register holding the map's address, and the
// vector of `rank` .s32 coordinates.
std::pair<Operand, Operand> Builder::tensorOperand(const AstOperand& at, unsigned rank,
                                                   const std::string& op) {
  if (at.kind != AstOperand::Kind::kAddress || at.name.empty() || at.integer != 0 ||
      at.elements.size() != 1 || at.elements[0].kind != AstOperand::Kind::kVector)
    failInvalid(op + " needs [tensorMap, {coordinates}]");
  Operand map = resolveName(at.name, false);
  if (map.kind != OperandKind::kReg)
    failUnsupported(op + " needs the tensor map's address in a register");
  Operand coords = operand(at.elements[0], Type::kS32);
  if (coords.kind != OperandKind::kVector || coords.count != rank)
    failInvalid(op + ": the coordinate vector needs " + std::to_string(rank) + " elements");
  return {map, coords};
}

// A tensor copy's dimension qualifier, .1d to .5d: its rank.
unsigned Builder::tensorRank(std::string_view dims, const std::string& op) {
  if (dims.size() != 2 || dims[1] != 'd' || dims[0] < '1' || dims[0] > '5')
    failUnsupported("unsupported instruction " + op);
  return static_cast<unsigned>(dims[0] - '0');
}

// An .im2col copy's offsets: a vector of rank - 2 .b16 values, W first.
Operand Builder::im2colOffsets(const AstOperand& at, unsigned rank, const std::string& op) {
  Operand offsets = operand(at, Type::kB16);
  if (offsets.kind != OperandKind::kVector || offsets.count != rank - 2)
    failInvalid(op + ": the im2col offsets need " + std::to_string(rank - 2) + " elements");
  return offsets;
}

// cp.async.bulk.tensor.{1-5}d in .tile mode: global to shared memory completing an mbarrier
// transaction, or shared memory to global through a bulk group (cp.reduce.async.bulk.tensor too);
// in the im2col modes (3d to 5d), loads with offsets and stores without.
// The tensor map is an emu map (tensor_map.h) at the generic address in a register (a
// __grid_constant__ parameter's cvta.param address, or global memory).
void Builder::decodeBulkTensor(const AstInstruction& a, Instr* in) {
  const std::string& op = a.opcode;
  auto parts = splitDots(op);
  if (parts.size() >= 5 && parts[1] == "async" && parts[2] == "bulk" && parts[3] == "prefetch" &&
      parts[4] == "tensor") {
    decodeBulkTensorPrefetch(a, in);
    return;
  }
  // cp.reduce.async.bulk.tensor.{1-5}d.global.shared::cta.redOp{.tile}.bulk_group: a store whose
  // elements combine with memory's, of the map's element type (tensorCopy checks the pair).
  // Without .reduce and the operation it reads as a store.
  std::optional<AtomOp> reduce;
  if (parts.size() >= 9 && parts[1] == "reduce") {
    AtomOp atomOp;
    if (!bulkReduceOp(parts[8], &atomOp)) failUnsupported("unsupported instruction " + op);
    reduce = atomOp;
    parts.erase(parts.begin() + 8);
    parts.erase(parts.begin() + 1);
  }
  if (parts.size() < 7 || parts[1] != "async" || parts[2] != "bulk" || parts[3] != "tensor")
    failUnsupported("cp.async.bulk.tensor: only the copy forms are implemented: " + op);
  const unsigned rank = tensorRank(parts[4], op);
  const std::string_view dst = parts[5], srcSpace = parts[6];
  size_t at = 7;
  const bool load =
      !reduce && (dst == "shared::cluster" || dst == "shared::cta") && srcSpace == "global";
  const bool store = dst == "global" && srcSpace == "shared::cta";
  // .im2col (loads, with offsets) and .im2col_no_offs (stores); .im2col::w and .im2col::w::128
  // are sm_100's, as are the gather and scatter modes.
  bool im2col = false;
  if (at < parts.size() && parts[at].rfind("im2col", 0) == 0) {
    if (parts[at] != (load ? "im2col" : "im2col_no_offs"))
      failUnsupported("cp.async.bulk.tensor ." + std::string(parts[at]) +
                      " is not implemented (the emu runs .tile, .im2col loads and .im2col_no_offs "
                      "stores): " +
                      op);
    im2col = true;
    ++at;
  } else if (at < parts.size() && parts[at].rfind("tile", 0) == 0) {
    if (parts[at] != "tile")
      failUnsupported("cp.async.bulk.tensor gather and scatter modes are sm_100's: " + op);
    ++at;
  }
  if (im2col && rank < 3) failInvalid("im2col modes copy 3d to 5d tensors: " + op);
  const bool offsets = im2col && load;
  if (at >= parts.size() ||
      !(load ? parts[at] == "mbarrier::complete_tx::bytes" : store && parts[at] == "bulk_group"))
    failUnsupported("unsupported instruction " + op);
  bool hint = false, multicast = false;
  for (++at; at < parts.size(); ++at) {
    if (load && parts[at] == "multicast::cluster") {
      multicast = true;
      continue;
    }
    if (parts[at] != "L2::cache_hint")
      failUnsupported("cp.async.bulk.tensor qualifier ." + std::string(parts[at]) +
                      " is not implemented: " + op);
    hint = true;
  }
  // Operands: [dst], [map, {coordinates}], [mbarrier] (loads), {im2col offsets}, cta mask, policy.
  const size_t fixed = (load ? 3 : 2) + (offsets ? 1 : 0);
  const size_t count = fixed + (multicast ? 1 : 0) + (hint ? 1 : 0);
  requireOperands(a, count, count);
  const auto [map, coords] = tensorOperand(a.operands[load ? 1 : 0], rank, op);
  Operand shared = operand(a.operands[load ? 0 : 1], Type::kU64);
  if (shared.kind != OperandKind::kAddress) failInvalid(op + " needs a shared memory address");
  in->op = Op::kBulkCopy;
  in->type = Type::kB64;
  in->mode = static_cast<uint8_t>(load ? BulkCopyKind::kTensorLoad : BulkCopyKind::kTensorStore);
  in->numOps = 4;
  in->ops[0] = shared;
  in->ops[1] = map;
  in->ops[2] = coords;
  if (load) {
    in->ops[3] = operand(a.operands[2], Type::kU64);
    if (in->ops[3].kind != OperandKind::kAddress) failInvalid(op + " needs an mbarrier address");
  }
  if (multicast) {
    in->flags |= kMulticast;
    in->numOps = 5;
    in->ops[4] = operand(a.operands[fixed], Type::kB16);
  }
  if (reduce) {
    in->mode = static_cast<uint8_t>(BulkCopyKind::kTensorReduce);
    in->call = static_cast<uint32_t>(*reduce);
  }
  if (im2col) in->flags |= kIm2col;
  if (offsets) {
    in->numOps = 6;
    in->ops[5] = im2colOffsets(a.operands[3], rank, op);
  }
  if (hint) operand(a.operands[fixed + (multicast ? 1 : 0)], Type::kB64);
}

// cp.async.bulk.prefetch.tensor.{1-5}d.L2.global{.tile,.im2col}{.L2::cache_hint}: a hint to pull
// part of a tensor into L2, which the emu has not; its operands are read as a copy's would be
// ([tensorMap, {coordinates}], the im2col offsets), and it does nothing.
void Builder::decodeBulkTensorPrefetch(const AstInstruction& a, Instr* in) {
  const std::string& op = a.opcode;
  auto parts = splitDots(op);
  if (parts.size() < 8 || parts[6] != "L2" || parts[7] != "global")
    failUnsupported("unsupported instruction " + op);
  const unsigned rank = tensorRank(parts[5], op);
  bool im2col = false, hint = false;
  for (size_t at = 8; at < parts.size(); ++at) {
    if (at == 8 && (parts[at] == "tile" || parts[at] == "im2col")) {
      im2col = parts[at] == "im2col";
      continue;
    }
    if (parts[at] != "L2::cache_hint")
      failUnsupported("cp.async.bulk.prefetch.tensor qualifier ." + std::string(parts[at]) +
                      " is not implemented: " + op);
    hint = true;
  }
  if (im2col && rank < 3) failInvalid(".im2col prefetches take 3d to 5d tensors: " + op);
  const size_t count = 1 + (im2col ? 1 : 0) + (hint ? 1 : 0);
  requireOperands(a, count, count);
  tensorOperand(a.operands[0], rank, op);
  if (im2col) im2colOffsets(a.operands[1], rank, op);
  if (hint) operand(a.operands[count - 1], Type::kB64);
  in->op = Op::kNop;
}

void Builder::decodeCall(const AstInstruction& a, Instr* in) {
  in->op = Op::kCall;
  const auto& o = a.operands;
  size_t t = 0;
  const AstOperand* rets = nullptr;
  if (!o.empty() && o[0].kind == AstOperand::Kind::kList) {
    rets = &o[0];
    t = 1;
  }
  if (t >= o.size() || o[t].kind != AstOperand::Kind::kName) failInvalid("call needs a target");
  const AstOperand* args =
      (t + 1 < o.size() && o[t + 1].kind == AstOperand::Kind::kList) ? &o[t + 1] : nullptr;
  CallSite cs;
  Operand target = resolveName(o[t].name, false);
  FunctionImage& caller = img_.functions[curFunction_];
  if (target.kind == OperandKind::kSymbol && target.symbol == SymbolKind::kFunction) {
    cs.callee = static_cast<int32_t>(target.index);
    caller.callees.push_back(target.index);
  } else if (target.kind == OperandKind::kReg) {
    caller.indirectCalls = true;
    in->ops[0] = target;
    in->numOps = 1;
  } else {
    failInvalid("bad call target " + o[t].name);
  }
  auto slots = [&](const AstOperand* list, std::vector<ParamSlot>* out) {
    if (!list) return;
    for (const auto& e : list->elements) {
      const ScopedName* s = e.kind == AstOperand::Kind::kName ? lookupScoped(e.name) : nullptr;
      if (!s || s->kind != OperandKind::kSymbol || s->symbol != SymbolKind::kFrameParam)
        failUnsupported("call arguments must be .param variables: " + formatOperand(e));
      auto size = paramSizes_.find(s->offset);
      out->push_back(
          {static_cast<uint32_t>(s->offset), size == paramSizes_.end() ? 8u : size->second});
    }
  };
  slots(rets, &cs.results);
  slots(args, &cs.args);
  if (cs.callee >= 0) {
    const FunctionImage& callee = img_.functions[cs.callee];
    size_t wantArgs = callee.params.size();
    if (callee.builtin == Builtin::kNone && cs.args.size() != wantArgs)
      failInvalid("call to " + callee.name + " passes " + std::to_string(cs.args.size()) +
                  " arguments, expected " + std::to_string(wantArgs));
  }
  in->call = static_cast<uint32_t>(img_.calls.size());
  img_.calls.push_back(std::move(cs));
}

}  // namespace

Status buildModuleImage(std::string_view ptx, ModuleImage* out) {
  AstModule ast;
  std::string message;
  try {
    if (!parseModule(ptx, &ast, &message)) {
      return Status::error(CUDA_ERROR_INVALID_PTX, "PTX syntax error: " + message);
    }
    Builder b(out);
    b.build(ast);
    return Status::success();
  } catch (const LoadFailure& f) {
    return f.status;
  } catch (const std::exception& e) {
    return Status::error(CUDA_ERROR_INVALID_PTX, std::string("PTX load failed: ") + e.what());
  }
}

}  // namespace gpupool::ptx
