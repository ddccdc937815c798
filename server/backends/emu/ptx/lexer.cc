#include "lexer.h"

#include <cctype>
#include <cstdlib>

namespace gpupool::ptx {
namespace {

bool isNameStart(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '%';
}
bool isNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$';
}

uint64_t parseDigits(std::string_view s, int base) {
  uint64_t v = 0;
  for (char c : s) {
    int d = std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : std::tolower(c) - 'a' + 10;
    v = v * base + static_cast<uint64_t>(d);
  }
  return v;
}

}  // namespace

std::vector<Token> tokenize(std::string_view src) {
  std::vector<Token> out;
  size_t i = 0;
  uint32_t line = 1;
  const size_t n = src.size();
  auto push = [&](TokenKind k, size_t start, size_t end) {
    Token t;
    t.kind = k;
    t.text = src.substr(start, end - start);
    t.line = line;
    out.push_back(t);
    return &out.back();
  };
  while (i < n) {
    char c = src[i];
    if (c == '\n') {
      ++line;
      ++i;
      continue;
    }
    if (std::isspace(static_cast<unsigned char>(c)) || c == '\0') {
      ++i;
      continue;
    }
    if (c == '/' && i + 1 < n && src[i + 1] == '/') {
      while (i < n && src[i] != '\n') ++i;
      continue;
    }
    if (c == '/' && i + 1 < n && src[i + 1] == '*') {
      i += 2;
      while (i + 1 < n && !(src[i] == '*' && src[i + 1] == '/')) {
        if (src[i] == '\n') ++line;
        ++i;
      }
      i += 2;
      continue;
    }
    size_t start = i;
    if (c == '.' && i + 1 < n && (isNameStart(src[i + 1]) && src[i + 1] != '%')) {
      ++i;
      while (i < n && isNameChar(src[i])) ++i;
      push(TokenKind::kDirective, start, i);
      continue;
    }
    if (isNameStart(c)) {
      ++i;
      // Dots continue a name: opcodes with suffixes and special registers like %tid.x.
      // "::" joins qualifiers such as L1::no_allocate or shared::cta.
      while (i < n) {
        if (isNameChar(src[i]) || (src[i] == '.' && i + 1 < n && isNameChar(src[i + 1]))) {
          ++i;
        } else if (src[i] == ':' && i + 2 < n && src[i + 1] == ':' && isNameChar(src[i + 2])) {
          i += 2;
        } else {
          break;
        }
      }
      push(TokenKind::kName, start, i);
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      if (c == '0' && i + 1 < n &&
          (src[i + 1] == 'f' || src[i + 1] == 'F' || src[i + 1] == 'd' || src[i + 1] == 'D')) {
        bool is64 = src[i + 1] == 'd' || src[i + 1] == 'D';
        size_t digits = is64 ? 16 : 8;
        size_t j = i + 2;
        while (j < n && std::isxdigit(static_cast<unsigned char>(src[j]))) ++j;
        if (j - (i + 2) == digits) {
          Token* t = push(is64 ? TokenKind::kF64Bits : TokenKind::kF32Bits, start, j);
          t->integer = parseDigits(src.substr(i + 2, digits), 16);
          i = j;
          continue;
        }
      }
      if (c == '0' && i + 1 < n && (src[i + 1] == 'x' || src[i + 1] == 'X')) {
        size_t j = i + 2;
        while (j < n && std::isxdigit(static_cast<unsigned char>(src[j]))) ++j;
        Token* t = push(TokenKind::kInteger, start, j);
        t->integer = parseDigits(src.substr(i + 2, j - i - 2), 16);
        i = j;
        if (i < n && (src[i] == 'U' || src[i] == 'u')) ++i;
        continue;
      }
      if (c == '0' && i + 1 < n && (src[i + 1] == 'b' || src[i + 1] == 'B')) {
        size_t j = i + 2;
        while (j < n && (src[j] == '0' || src[j] == '1')) ++j;
        Token* t = push(TokenKind::kInteger, start, j);
        t->integer = parseDigits(src.substr(i + 2, j - i - 2), 2);
        i = j;
        if (i < n && (src[i] == 'U' || src[i] == 'u')) ++i;
        continue;
      }
      size_t j = i;
      while (j < n && std::isdigit(static_cast<unsigned char>(src[j]))) ++j;
      bool isFloat = false;
      if (j < n && src[j] == '.' && j + 1 < n &&
          std::isdigit(static_cast<unsigned char>(src[j + 1]))) {
        isFloat = true;
        ++j;
        while (j < n && std::isdigit(static_cast<unsigned char>(src[j]))) ++j;
      }
      if (j < n && (src[j] == 'e' || src[j] == 'E') && j + 1 < n &&
          (std::isdigit(static_cast<unsigned char>(src[j + 1])) || src[j + 1] == '-' ||
           src[j + 1] == '+')) {
        isFloat = true;
        j += 2;
        while (j < n && std::isdigit(static_cast<unsigned char>(src[j]))) ++j;
      }
      if (isFloat) {
        Token* t = push(TokenKind::kDecimal, start, j);
        t->real = std::strtod(std::string(src.substr(start, j - start)).c_str(), nullptr);
      } else {
        Token* t = push(TokenKind::kInteger, start, j);
        std::string_view digits = src.substr(start, j - start);
        t->integer = (digits.size() > 1 && digits[0] == '0') ? parseDigits(digits.substr(1), 8)
                                                             : parseDigits(digits, 10);
      }
      i = j;
      if (i < n && (src[i] == 'U' || src[i] == 'u')) ++i;
      continue;
    }
    if (c == '"') {
      size_t j = i + 1;
      while (j < n && src[j] != '"' && src[j] != '\n') j += (src[j] == '\\' && j + 1 < n) ? 2 : 1;
      push(TokenKind::kString, i + 1, j < n ? j : n);
      i = j + 1;
      continue;
    }
    static constexpr std::string_view kPunct = ";,:{}[]()<>+-@!|=*";
    if (kPunct.find(c) != std::string_view::npos) {
      ++i;
      push(TokenKind::kPunct, start, i);
      continue;
    }
    push(TokenKind::kError, start, start + 1);
    return out;
  }
  Token end;
  end.kind = TokenKind::kEnd;
  end.line = line;
  out.push_back(end);
  return out;
}

}  // namespace gpupool::ptx
