// printf-style formatting into a std::string, for the CLI's tables (status, top, smi).
#pragma once

#include <cstdio>
#include <string>

namespace gpupool::tools {

// Up to 511 characters of `pattern` filled in; longer text is cut.
std::string printfText(const char* pattern, auto... values) {
  char text[512];
  std::snprintf(text, sizeof text, pattern, values...);
  return text;
}

}  // namespace gpupool::tools
