// Tokenizer for PTX text. Dotted names ("ld.global.u32", "%tid.x") are single Name tokens; a
// leading '.' makes a Directive token (".reg", ".b32"). Never throws.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::ptx {

enum class TokenKind : uint8_t {
  Name,       // identifiers, opcodes, registers, labels
  Directive,  // .xxx
  Integer,    // decimal / hex / octal / binary, optional U suffix; value in `integer`
  F32Bits,    // 0fXXXXXXXX: `integer` holds the bit pattern
  F64Bits,    // 0dXXXXXXXXXXXXXXXX: `integer` holds the bit pattern
  Decimal,    // decimal float literal such as 1.5; `real` holds the value
  String,     // "..." without quotes
  Punct,      // one of ; , : { } [ ] ( ) < > + - @ ! | =
  End,
  Error,  // unrecognized character; text holds it
};

struct Token {
  TokenKind kind = TokenKind::End;
  std::string_view text;  // view into the source
  uint64_t integer = 0;
  double real = 0;
  uint32_t line = 0;
  bool is(char c) const { return kind == TokenKind::Punct && text.size() == 1 && text[0] == c; }
};

// Splits the whole source into tokens; the last token is End (or Error at the first bad char).
std::vector<Token> tokenize(std::string_view source);

}  // namespace gpupool::ptx
