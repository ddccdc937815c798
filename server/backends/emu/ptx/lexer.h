// Tokenizer for PTX text. Dotted names ("ld.global.u32", "%tid.x") are single Name tokens; a
// leading '.' makes a Directive token (".reg", ".b32"). Never throws.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::ptx {

enum class TokenKind : uint8_t {
  kName,       // identifiers, opcodes, registers, labels
  kDirective,  // .xxx
  kInteger,    // decimal / hex / octal / binary, optional U suffix; value in `integer`
  kF32Bits,    // 0fXXXXXXXX: `integer` holds the bit pattern
  kF64Bits,    // 0dXXXXXXXXXXXXXXXX: `integer` holds the bit pattern
  kDecimal,    // decimal float literal such as 1.5; `real` holds the value
  kString,     // "..." without quotes
  kPunct,      // one of ; , : { } [ ] ( ) < > + - @ ! | =
  kEnd,
  kError,  // unrecognized character; text holds it
};

struct Token {
  TokenKind kind = TokenKind::kEnd;
  std::string_view text;  // view into the source
  uint64_t integer = 0;
  double real = 0;
  uint32_t line = 0;
  bool is(char c) const { return kind == TokenKind::kPunct && text.size() == 1 && text[0] == c; }
};

// Splits the whole source into tokens; the last token is End (or Error at the first bad char).
std::vector<Token> tokenize(std::string_view source);

}  // namespace gpupool::ptx
