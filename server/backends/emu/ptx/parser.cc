#include "parser.h"

#include <cstring>

#include "lexer.h"

namespace gpupool::ptx {
namespace {

struct SyntaxError {
  std::string message;
};

bool isTypeDirective(std::string_view d) {
  static constexpr std::string_view kTypes[] = {
      ".pred", ".b8", ".b16", ".b32", ".b64", ".u8", ".u16", ".u32", ".u64", ".s8", ".s16", ".s32",
      ".s64", ".f16", ".f32", ".f64", ".f16x2", ".bf16", ".bf16x2", ".b128", ".e4m3", ".e5m2",
      // Opaque types of texture and surface references (`.global .texref name;`).
      ".texref", ".surfref", ".samplerref"};
  for (auto t : kTypes)
    if (d == t) return true;
  return false;
}

bool isSpaceDirective(std::string_view d) {
  return d == ".reg" || d == ".shared" || d == ".local" || d == ".param" || d == ".global" ||
         d == ".const" || d == ".tex" || d == ".sreg";
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  void parseModule(AstModule* m) {
    while (!at(TokenKind::kEnd)) {
      const Token& t = peek();
      if (t.kind == TokenKind::kError) fail("unexpected character '" + std::string(t.text) + "'");
      if (t.kind != TokenKind::kDirective) fail("expected a directive at module scope");
      std::string_view d = t.text;
      if (d == ".version") {
        next();
        const Token& v = next();
        std::string s(v.text);
        auto dot = s.find('.');
        m->versionMajor =
            static_cast<uint32_t>(std::stoul(dot == std::string::npos ? s : s.substr(0, dot)));
        m->versionMinor =
            dot == std::string::npos ? 0 : static_cast<uint32_t>(std::stoul(s.substr(dot + 1)));
      } else if (d == ".target") {
        next();
        do {
          const Token& v = expect(TokenKind::kName, "target name");
          if (v.text.substr(0, 3) == "sm_")
            m->targetSm = static_cast<uint32_t>(std::atoi(std::string(v.text.substr(3)).c_str()));
          if (v.text == "debug") m->debug = true;
        } while (accept(','));
      } else if (d == ".address_size") {
        next();
        m->addressSize = static_cast<uint32_t>(expect(TokenKind::kInteger, "address size").integer);
      } else if (d == ".file") {
        next();
        expect(TokenKind::kInteger, "file number");
        expect(TokenKind::kString, "file name");
        while (accept(',')) next();
      } else if (d == ".section") {
        next();
        skipBalancedBraces();
      } else if (d == ".pragma") {
        next();
        expect(TokenKind::kString, "pragma string");
        while (!acceptPunct(';')) next();
      } else {
        parseModuleDeclaration(m);
      }
    }
  }

 private:
  const Token& peek(size_t k = 0) const {
    size_t i = pos_ + k;
    return toks_[i < toks_.size() ? i : toks_.size() - 1];
  }
  const Token& next() {
    const Token& t = peek();
    if (pos_ < toks_.size() - 1) {
      ++pos_;
    } else {
      // Consuming the last token (End, or Error at a bad character) would make every skipping
      // loop spin forever on truncated input.
      if (t.kind == TokenKind::kError) fail("unexpected character '" + std::string(t.text) + "'");
      fail("unexpected end of input");
    }
    return t;
  }
  bool at(TokenKind k) const { return peek().kind == k; }
  bool atPunct(char c) const { return peek().is(c); }
  bool accept(char c) { return acceptPunct(c); }
  bool acceptPunct(char c) {
    if (!peek().is(c)) return false;
    next();
    return true;
  }
  bool acceptDirective(std::string_view d) {
    if (peek().kind == TokenKind::kDirective && peek().text == d) {
      next();
      return true;
    }
    return false;
  }
  [[noreturn]] void fail(const std::string& what) const {
    const Token& t = peek();
    std::string near = t.kind == TokenKind::kEnd ? "end of input" : "'" + std::string(t.text) + "'";
    throw SyntaxError{"line " + std::to_string(t.line) + ": " + what + " near " + near};
  }
  const Token& expect(TokenKind k, const char* what) {
    if (peek().kind != k) fail(std::string("expected ") + what);
    return next();
  }
  void expectPunct(char c) {
    if (!acceptPunct(c)) fail(std::string("expected '") + c + "'");
  }
  void skipBalancedBraces() {
    while (!atPunct('{')) {
      if (at(TokenKind::kEnd)) fail("expected '{'");
      next();
    }
    int depth = 0;
    do {
      if (at(TokenKind::kEnd)) fail("unterminated section");
      if (atPunct('{')) ++depth;
      if (atPunct('}')) --depth;
      next();
    } while (depth > 0);
  }

  // [linkage]* (.entry|.func|space-var) ...
  void parseModuleDeclaration(AstModule* m) {
    bool isExtern = false;
    uint32_t line = peek().line;
    while (at(TokenKind::kDirective) && (peek().text == ".visible" || peek().text == ".extern" ||
                                         peek().text == ".weak" || peek().text == ".common")) {
      if (peek().text == ".extern") isExtern = true;
      next();
    }
    if (acceptDirective(".entry")) {
      m->functions.push_back(parseFunction(true, line));
      return;
    }
    if (acceptDirective(".func")) {
      m->functions.push_back(parseFunction(false, line));
      return;
    }
    if (at(TokenKind::kDirective) && isSpaceDirective(peek().text)) {
      std::vector<AstVariable> vars = parseVariableDeclaration(true);
      for (auto& v : vars) {
        v.isExtern = v.isExtern || isExtern;
        m->variables.push_back(std::move(v));
      }
      return;
    }
    fail("unknown module-level directive");
  }

  AstFunction parseFunction(bool isEntry, uint32_t line) {
    AstFunction f;
    f.isEntry = isEntry;
    f.line = line;
    if (atPunct('(')) f.returnParams = parseParamList();
    f.name = std::string(expect(TokenKind::kName, "function name").text);
    if (atPunct('(')) f.params = parseParamList();
    // Performance directives and attributes up to the body or ';'.
    while (!atPunct('{') && !atPunct(';')) {
      if (at(TokenKind::kEnd)) fail("expected function body");
      if (peek().kind == TokenKind::kDirective &&
          (peek().text == ".maxntid" || peek().text == ".reqntid")) {
        next();
        uint32_t product = 1;
        do product *= static_cast<uint32_t>(expect(TokenKind::kInteger, "thread count").integer);
        while (accept(','));
        f.maxThreads = product;
        continue;
      }
      if (peek().kind == TokenKind::kDirective && peek().text == ".reqnctapercluster") {
        next();
        uint32_t i = 0;
        do {
          uint32_t n = static_cast<uint32_t>(expect(TokenKind::kInteger, "CTA count").integer);
          if (i < 3) f.requiredCluster[i++] = n;
        } while (accept(','));
        while (i < 3) f.requiredCluster[i++] = 1;
        continue;
      }
      if (peek().kind == TokenKind::kDirective && peek().text == ".maxclusterrank") {
        next();
        f.maxClusterRank = static_cast<uint32_t>(expect(TokenKind::kInteger, "CTA count").integer);
        continue;
      }
      if (peek().kind == TokenKind::kDirective && peek().text == ".explicitcluster") {
        next();
        f.explicitCluster = true;
        continue;
      }
      if (peek().kind == TokenKind::kDirective && peek().text == ".pragma") {
        next();
        expect(TokenKind::kString, "pragma string");
        expectPunct(';');
        continue;
      }
      next();  // other performance directives and their numbers: ignored
      while (accept(',')) next();
    }
    if (acceptPunct(';')) return f;
    f.hasBody = true;
    parseBlock(&f.body);
    return f;
  }

  std::vector<AstVariable> parseParamList() {
    std::vector<AstVariable> params;
    expectPunct('(');
    if (acceptPunct(')')) return params;
    do {
      auto vars = parseVariableDeclaration(false);
      for (auto& v : vars) params.push_back(std::move(v));
    } while (accept(','));
    expectPunct(')');
    return params;
  }

  // space [.attribute(...)] [.align N] [.ptr...] [.vN] type name[<N>][dims][= init] {, name...} [;]
  std::vector<AstVariable> parseVariableDeclaration(bool terminated) {
    AstVariable proto;
    proto.line = peek().line;
    proto.space = std::string(expect(TokenKind::kDirective, "state space").text);
    while (at(TokenKind::kDirective)) {
      std::string_view d = peek().text;
      if (d == ".align") {
        next();
        proto.align = static_cast<uint32_t>(expect(TokenKind::kInteger, "alignment").integer);
      } else if (d == ".v2" || d == ".v4" || d == ".v8") {
        proto.vectorWidth = static_cast<uint32_t>(d[2] - '0');
        next();
      } else if (isTypeDirective(d)) {
        proto.type = std::string(d);
        next();
      } else if (d == ".extern") {
        proto.isExtern = true;
        next();
      } else if (d == ".attribute") {
        // .attribute(.managed) (a __managed__ variable); .unified(...) names nothing we need.
        next();
        expectPunct('(');
        do {
          std::string_view a = expect(TokenKind::kDirective, "variable attribute").text;
          if (a == ".managed") proto.isManaged = true;
          if (acceptPunct('(')) {
            while (!acceptPunct(')')) {
              if (at(TokenKind::kEnd)) fail("unterminated variable attribute");
              next();
            }
          }
        } while (accept(','));
        expectPunct(')');
      } else {
        next();  // .ptr, .global (ptr space), .volatile, ...
      }
    }
    if (proto.type.empty()) fail("expected a type in declaration");
    std::vector<AstVariable> out;
    do {
      AstVariable v = proto;
      v.name = std::string(expect(TokenKind::kName, "variable name").text);
      if (acceptPunct('<')) {
        v.rangeCount = static_cast<uint32_t>(expect(TokenKind::kInteger, "register count").integer);
        expectPunct('>');
      }
      while (acceptPunct('[')) {
        if (acceptPunct(']')) {
          v.dimensions.push_back(0);
          continue;
        }
        v.dimensions.push_back(expect(TokenKind::kInteger, "array size").integer);
        expectPunct(']');
      }
      if (acceptPunct('=')) {
        v.hasInitializer = true;
        parseInitializer(&v.initializer);
      }
      out.push_back(std::move(v));
      if (!terminated) break;  // in parameter lists ',' separates declarations
    } while (accept(','));
    if (terminated) expectPunct(';');
    return out;
  }

  void parseInitializer(std::vector<AstInitializer>* out) {
    if (acceptPunct('{')) {
      if (acceptPunct('}')) return;
      do parseInitializer(out);
      while (accept(','));
      expectPunct('}');
      return;
    }
    AstInitializer init;
    bool negative = acceptPunct('-');
    const Token& t = next();
    switch (t.kind) {
      case TokenKind::kInteger:
        init.kind = AstInitializer::Kind::kInteger;
        init.integer = negative ? (~t.integer + 1) : t.integer;
        break;
      case TokenKind::kF32Bits:
        init.kind = AstInitializer::Kind::kF32Bits;
        init.integer = t.integer;
        break;
      case TokenKind::kF64Bits:
        init.kind = AstInitializer::Kind::kF64Bits;
        init.integer = t.integer;
        break;
      case TokenKind::kDecimal:
        init.kind = AstInitializer::Kind::kDecimal;
        init.real = negative ? -t.real : t.real;
        break;
      case TokenKind::kName: {
        init.kind = AstInitializer::Kind::kSymbol;
        if ((t.text == "generic" || t.text == "mask") && atPunct('(')) {
          next();
          init.symbol = std::string(expect(TokenKind::kName, "symbol").text);
          expectPunct(')');
        } else {
          init.symbol = std::string(t.text);
        }
        if (acceptPunct('+')) init.integer = expect(TokenKind::kInteger, "offset").integer;
        break;
      }
      default:
        --pos_;
        fail("bad initializer");
    }
    out->push_back(std::move(init));
  }

  void parseBlock(std::vector<AstStatement>* body) {
    expectPunct('{');
    AstStatement open;
    open.kind = AstStatement::Kind::kOpenScope;
    body->push_back(open);
    while (!acceptPunct('}')) {
      if (at(TokenKind::kEnd)) fail("expected '}'");
      parseStatement(body);
    }
    AstStatement close;
    close.kind = AstStatement::Kind::kCloseScope;
    body->push_back(close);
  }

  void parseStatement(std::vector<AstStatement>* body) {
    const Token& t = peek();
    if (t.is('{')) {
      parseBlock(body);
      return;
    }
    if (t.kind == TokenKind::kDirective) {
      std::string_view d = t.text;
      if (d == ".loc" || d == ".file") {
        // Debug line info has no terminator: skip the rest of the line.
        uint32_t line = t.line;
        next();
        while (!at(TokenKind::kEnd) && peek().line == line && !atPunct('}')) next();
        return;
      }
      if (d == ".pragma") {
        next();
        expect(TokenKind::kString, "pragma string");
        expectPunct(';');
        return;
      }
      if (isSpaceDirective(d)) {
        for (auto& v : parseVariableDeclaration(true)) {
          AstStatement s;
          s.kind = AstStatement::Kind::kVariable;
          s.line = v.line;
          s.variable = std::move(v);
          body->push_back(std::move(s));
        }
        return;
      }
      fail("unknown directive in function body");
    }
    if (t.kind == TokenKind::kName && peek(1).is(':')) {
      AstStatement s;
      s.kind = AstStatement::Kind::kLabel;
      s.label = std::string(t.text);
      s.line = t.line;
      next();
      next();
      if (peek().kind == TokenKind::kDirective && peek().text == ".callprototype") {
        while (!acceptPunct(';')) {  // prototype of an indirect call: only a name is needed
          if (at(TokenKind::kEnd)) fail("unterminated .callprototype");
          next();
        }
      }
      body->push_back(std::move(s));
      return;
    }
    AstStatement s;
    s.kind = AstStatement::Kind::kInstruction;
    s.line = t.line;
    parseInstruction(&s.instruction);
    body->push_back(std::move(s));
  }

  void parseInstruction(AstInstruction* in) {
    in->line = peek().line;
    if (acceptPunct('@')) {
      in->guardNegated = acceptPunct('!');
      in->guard = std::string(expect(TokenKind::kName, "guard predicate").text);
    }
    in->opcode = std::string(expect(TokenKind::kName, "opcode").text);
    // Some opcodes carry directive-like suffixes split off by the lexer (e.g. "bar.warp.sync").
    while (at(TokenKind::kDirective)) in->opcode += std::string(next().text);
    if (acceptPunct(';')) return;
    do in->operands.push_back(parseOperand());
    while (accept(','));
    expectPunct(';');
  }

  AstOperand parseOperand() {
    AstOperand op;
    if (acceptPunct('{')) {
      op.kind = AstOperand::Kind::kVector;
      do op.elements.push_back(parseOperand());
      while (accept(','));
      expectPunct('}');
      return op;
    }
    if (acceptPunct('(')) {
      op.kind = AstOperand::Kind::kList;
      if (acceptPunct(')')) return op;
      do op.elements.push_back(parseOperand());
      while (accept(','));
      expectPunct(')');
      return op;
    }
    if (acceptPunct('[')) {
      op.kind = AstOperand::Kind::kAddress;
      if (at(TokenKind::kName)) {
        op.name = std::string(next().text);
        if (atPunct('+') || atPunct('-')) {
          bool neg = next().is('-');
          if (acceptPunct('-')) neg = !neg;
          uint64_t v = expect(TokenKind::kInteger, "address offset").integer;
          op.integer = neg ? ~v + 1 : v;
        }
      } else {
        op.integer = expect(TokenKind::kInteger, "address").integer;
      }
      // Texture/surface coordinates: [tex, {x, y}]. Kept so the validator can name the opcode.
      while (acceptPunct(',')) op.elements.push_back(parseOperand());
      expectPunct(']');
      return op;
    }
    if (acceptPunct('!')) {
      op.kind = AstOperand::Kind::kName;
      op.negated = true;
      op.name = std::string(expect(TokenKind::kName, "predicate").text);
      return op;
    }
    bool negative = acceptPunct('-');
    const Token& t = next();
    switch (t.kind) {
      case TokenKind::kInteger:
        op.kind = AstOperand::Kind::kInteger;
        op.integer = negative ? ~t.integer + 1 : t.integer;
        return op;
      case TokenKind::kF32Bits:
        op.kind = AstOperand::Kind::kF32Bits;
        op.integer = negative ? t.integer ^ 0x80000000u : t.integer;
        return op;
      case TokenKind::kF64Bits:
        op.kind = AstOperand::Kind::kF64Bits;
        op.integer = negative ? t.integer ^ 0x8000000000000000ull : t.integer;
        return op;
      case TokenKind::kDecimal:
        op.kind = AstOperand::Kind::kDecimal;
        op.real = negative ? -t.real : t.real;
        return op;
      case TokenKind::kName:
        if (negative) fail("cannot negate a name");
        if (t.text == "_") {
          op.kind = AstOperand::Kind::kSink;
          return op;
        }
        op.name = std::string(t.text);
        if (acceptPunct('|')) {
          op.kind = AstOperand::Kind::kDual;
          op.name2 = std::string(expect(TokenKind::kName, "second destination").text);
          return op;
        }
        if (atPunct('+') && peek(1).kind == TokenKind::kInteger) {  // sym+imm in mov
          next();
          op.kind = AstOperand::Kind::kAddress;  // reuse: name + offset, but not bracketed
          op.integer = next().integer;
          op.negated = true;  // marks "unbracketed symbol + offset"
          return op;
        }
        op.kind = AstOperand::Kind::kName;
        return op;
      default:
        --pos_;
        fail("expected an operand");
    }
  }

  std::vector<Token> toks_;
  size_t pos_ = 0;
};

}  // namespace

bool parseModule(std::string_view source, AstModule* out, std::string* error) {
  try {
    Parser p(tokenize(source));
    p.parseModule(out);
    return true;
  } catch (const SyntaxError& e) {
    if (error) *error = e.message;
  } catch (const std::exception& e) {  // stoul on malformed numbers, bad_alloc
    if (error) *error = std::string("malformed PTX: ") + e.what();
  }
  return false;
}

}  // namespace gpupool::ptx
