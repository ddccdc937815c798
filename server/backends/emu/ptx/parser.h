// Recursive-descent parser: PTX text -> AstModule. Lenient with performance directives and
// debug sections (skipped), strict with structure. Never throws.
#pragma once

#include <string>
#include <string_view>

#include "ast.h"

namespace gpupool::ptx {

// Returns true on success; otherwise *error names the line and what was expected.
bool parseModule(std::string_view source, AstModule* out, std::string* error);

}  // namespace gpupool::ptx
