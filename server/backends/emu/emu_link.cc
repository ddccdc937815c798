#include "server/backends/emu/emu_link.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "gpupool/image/fatbin.h"
#include "gpupool/image/image_kind.h"
#include "gpupool/image/ptx_selection.h"
#include "server/backends/emu/ptx/ptx_module.h"

namespace gpupool::server {
namespace {

// ---- Getting PTX out of the inputs ----

struct PtxUnit {
  std::string name;  // the input's name, with the archive member's where there is one
  std::string text;
  bool optional = false;  // a library member: linked only when it defines something needed
};

struct Gathered {
  std::vector<PtxUnit> units;
  std::vector<std::string> withoutPtx;  // library members that carried no usable PTX
};

template <typename T>
bool readAt(std::span<const uint8_t> bytes, uint64_t offset, T* out) {
  if (offset > bytes.size() || bytes.size() - offset < sizeof(T)) return false;
  std::memcpy(out, bytes.data() + offset, sizeof(T));
  return true;
}

// The PTX of every fatbin laid end to end in `bytes` (a host object's .nv_fatbin section holds one
// per translation unit). NO_BINARY_FOR_GPU when none has PTX this device can use.
Status ptxOfFatbins(std::span<const uint8_t> bytes, int cc, std::vector<std::string>* texts) {
  uint64_t at = 0;
  Status last = Status::error(CUDA_ERROR_NO_BINARY_FOR_GPU, "no fatbin found");
  while (at + image::kFatbinHeaderBytes <= bytes.size()) {
    uint32_t magic = 0;
    uint16_t headerSize = 0;
    uint64_t fatSize = 0;
    readAt(bytes, at, &magic);
    if (magic != image::kFatbinMagic) {
      at += 8;  // fatbins in a section are 8-byte aligned; skip padding
      continue;
    }
    readAt(bytes, at + 6, &headerSize);
    readAt(bytes, at + 8, &fatSize);
    if (headerSize < image::kFatbinHeaderBytes || fatSize > bytes.size() - at - headerSize) {
      return Status::error(CUDA_ERROR_INVALID_IMAGE, "truncated fatbin");
    }
    auto one = bytes.subspan(at, headerSize + fatSize);
    at += headerSize + fatSize;
    auto text = image::ptxForDevice(one, cc);
    if (!text) {
      last = text.status();
      continue;
    }
    texts->push_back(std::move(text->ptx));
  }
  return texts->empty() ? last : Status::success();
}

// The device code section of a host ELF object; empty when there is none.
Status nvFatbinSection(std::span<const uint8_t> elf, std::span<const uint8_t>* section) {
  uint64_t shoff = 0;
  uint16_t shentsize = 0, shnum = 0, shstrndx = 0;
  if (elf.size() < 64 || elf[4] != 2 || !readAt(elf, 0x28, &shoff) ||
      !readAt(elf, 0x3A, &shentsize) || !readAt(elf, 0x3C, &shnum) ||
      !readAt(elf, 0x3E, &shstrndx) || shentsize < 64 || shstrndx >= shnum) {
    return Status::error(CUDA_ERROR_INVALID_IMAGE, "not a 64-bit ELF object");
  }
  auto header = [&](uint16_t i, uint32_t* name, uint64_t* offset, uint64_t* size) {
    uint64_t h = shoff + uint64_t{i} * shentsize;
    return readAt(elf, h, name) && readAt(elf, h + 0x18, offset) && readAt(elf, h + 0x20, size) &&
           *offset <= elf.size() && *size <= elf.size() - *offset;
  };
  uint32_t unused = 0;
  uint64_t namesAt = 0, namesSize = 0;
  if (!header(shstrndx, &unused, &namesAt, &namesSize)) {
    return Status::error(CUDA_ERROR_INVALID_IMAGE, "ELF section names out of bounds");
  }
  *section = {};
  for (uint16_t i = 0; i < shnum; ++i) {
    uint32_t name = 0;
    uint64_t offset = 0, size = 0;
    if (!header(i, &name, &offset, &size)) {
      return Status::error(CUDA_ERROR_INVALID_IMAGE, "ELF section out of bounds");
    }
    // -rdc objects (nvcc -dc) keep their device code in __nv_relfatbin, others in .nv_fatbin.
    for (std::string_view wanted :
         {std::string_view("__nv_relfatbin"), std::string_view(".nv_fatbin")}) {
      if (name < namesSize && namesSize - name > wanted.size() &&
          std::memcmp(elf.data() + namesAt + name, wanted.data(), wanted.size() + 1) == 0 &&
          section->empty()) {
        *section = elf.subspan(offset, size);
      }
    }
  }
  return Status::success();
}

// A host object (nvcc -dc -o x.o): the PTX its fatbins carry.
Status ptxOfObject(std::span<const uint8_t> bytes, int cc, std::vector<std::string>* texts) {
  std::span<const uint8_t> section;
  if (Status st = nvFatbinSection(bytes, &section); !st.ok()) return st;
  if (section.empty()) {
    return Status::error(
        CUDA_ERROR_NO_BINARY_FOR_GPU,
        "the object carries no device code (no __nv_relfatbin or .nv_fatbin section)");
  }
  return ptxOfFatbins(section, cc, texts);
}

// A static library (ar archive of host objects): each member's PTX, as optional units.
Status gatherLibrary(const LinkInput& in, int cc, Gathered* out) {
  constexpr std::string_view kMagic = "!<arch>\n";
  auto bytes = in.bytes;
  if (bytes.size() < kMagic.size() ||
      std::memcmp(bytes.data(), kMagic.data(), kMagic.size()) != 0) {
    return Status::error(CUDA_ERROR_INVALID_IMAGE, in.name + " is not an ar archive");
  }
  uint64_t at = kMagic.size();
  while (at + 60 <= bytes.size()) {
    std::string name(reinterpret_cast<const char*>(bytes.data() + at), 16);
    std::string sizeText(reinterpret_cast<const char*>(bytes.data() + at + 48), 10);
    uint64_t size = std::strtoull(sizeText.c_str(), nullptr, 10);
    at += 60;
    if (size > bytes.size() - at) {
      return Status::error(CUDA_ERROR_INVALID_IMAGE, in.name + ": truncated archive member");
    }
    auto member = bytes.subspan(at, size);
    at += size + (size & 1);
    name.erase(name.find_last_not_of(' ') + 1);
    if (name == "/" || name == "//" || name == "/SYM64/") continue;  // symbol and name tables
    std::vector<std::string> texts;
    if (member.size() < 4 ||
        std::memcmp(member.data(),
                    "\x7f"
                    "ELF",
                    4) != 0 ||
        !ptxOfObject(member, cc, &texts).ok()) {
      out->withoutPtx.push_back(in.name + "(" + name + ")");
      continue;
    }
    for (auto& t : texts) out->units.push_back({in.name + "(" + name + ")", std::move(t), true});
  }
  return Status::success();
}

Status gather(const LinkInput& in, int cc, Gathered* out) {
  std::vector<std::string> texts;
  switch (in.type) {
    case CU_JIT_INPUT_PTX: {
      auto end = std::find(in.bytes.begin(), in.bytes.end(), uint8_t{0});
      texts.emplace_back(in.bytes.begin(), end);
      break;
    }
    case CU_JIT_INPUT_FATBINARY:
    case CU_JIT_INPUT_CUBIN: {
      // A cubin is SASS only; ptxForDevice says so (NO_BINARY_FOR_GPU) and names its archs.
      auto text = image::ptxForDevice(in.bytes, cc);
      if (!text) return text.status();
      texts.push_back(std::move(text->ptx));
      break;
    }
    case CU_JIT_INPUT_OBJECT:
      if (Status st = ptxOfObject(in.bytes, cc, &texts); !st.ok()) return st;
      break;
    case CU_JIT_INPUT_LIBRARY:
      return gatherLibrary(in, cc, out);
    case CU_JIT_INPUT_NVVM:
      return Status::error(CUDA_ERROR_NOT_SUPPORTED,
                           "LTO-IR (NVVM) input cannot be linked: the emu runs PTX only");
    default:
      return Status::error(CUDA_ERROR_INVALID_VALUE, "unknown input type");
  }
  for (auto& t : texts) out->units.push_back({in.name, std::move(t), false});
  return Status::success();
}

// ---- Module-scope statements of a PTX text ----

bool isIdentChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '$' || c == '%';
}

// The text without comments (strings kept), so braces and semicolons can be counted.
std::string withoutComments(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '"') {
      size_t end = text.find('"', i + 1);
      end = end == std::string_view::npos ? text.size() : end + 1;
      out.append(text.substr(i, end - i));
      i = end - 1;
    } else if (text.substr(i, 2) == "//") {
      while (i < text.size() && text[i] != '\n') ++i;
      out.push_back('\n');
    } else if (text.substr(i, 2) == "/*") {
      size_t end = text.find("*/", i + 2);
      i = end == std::string_view::npos ? text.size() : end + 1;
      out.push_back(' ');
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

enum class Linkage { kInternal, kVisible, kWeak, kExtern };

struct Statement {
  std::string text;
  bool header = false;  // .version / .target / .address_size
  std::string symbol;   // the function or variable it declares or defines, if any
  Linkage linkage = Linkage::kInternal;
  bool isDefinition = false;  // a body, or a variable with storage (not .extern)
  bool isShared = false;
};

std::vector<std::string_view> words(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    size_t start = i;
    if (i < s.size() && (isIdentChar(s[i]) || s[i] == '.')) {
      while (i < s.size() && (isIdentChar(s[i]) || s[i] == '.')) ++i;
    } else if (i < s.size()) {
      ++i;
    }
    if (i > start) out.push_back(s.substr(start, i - start));
  }
  return out;
}

void classify(Statement* st) {
  auto w = words(st->text);
  size_t i = 0;
  if (w.empty()) return;
  if (w[0] == ".version" || w[0] == ".target" || w[0] == ".address_size") {
    st->header = true;
    return;
  }
  for (; i < w.size(); ++i) {
    if (w[i] == ".visible")
      st->linkage = Linkage::kVisible;
    else if (w[i] == ".weak" || w[i] == ".common")
      st->linkage = Linkage::kWeak;
    else if (w[i] == ".extern")
      st->linkage = Linkage::kExtern;
    else
      break;
  }
  if (i >= w.size()) return;
  bool hasBody = st->text.find('{') != std::string::npos;
  if (w[i] == ".entry" || w[i] == ".func") {
    if (w[i] == ".entry" && st->linkage == Linkage::kInternal) st->linkage = Linkage::kVisible;
    ++i;
    if (i < w.size() && w[i] == "(") {  // return parameters
      int depth = 0;
      for (; i < w.size(); ++i) {
        if (w[i] == "(") ++depth;
        if (w[i] == ")" && --depth == 0) break;
      }
      ++i;
    }
    if (i < w.size()) st->symbol = std::string(w[i]);
    st->isDefinition = hasBody;
    return;
  }
  if (w[i] == ".global" || w[i] == ".const" || w[i] == ".shared") {
    st->isShared = w[i] == ".shared";
    // The name is the last identifier before an initializer, an array bound or the end.
    for (; i < w.size(); ++i) {
      if (w[i] == "=" || w[i] == "[" || w[i] == ";" || w[i] == "<") break;
      if (w[i][0] != '.' && isIdentChar(w[i][0]) && !std::isdigit(w[i][0])) {
        st->symbol = std::string(w[i]);
      }
    }
    st->isDefinition = st->linkage != Linkage::kExtern;
  }
}

// Module-scope statements: a directive up to its ';', a function up to its closing brace, or a
// header directive up to the end of its line.
std::vector<Statement> statements(std::string_view ptx) {
  std::string text = withoutComments(ptx);
  std::vector<Statement> out;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    if (i >= text.size()) break;
    size_t start = i;
    std::string_view rest(text.data() + i, text.size() - i);
    bool lineDirective = rest.starts_with(".version") || rest.starts_with(".target") ||
                         rest.starts_with(".address_size") || rest.starts_with(".file");
    if (lineDirective) {
      while (i < text.size() && text[i] != '\n') ++i;
    } else {
      int depth = 0;
      for (; i < text.size(); ++i) {
        char c = text[i];
        if (c == '"') {
          size_t end = text.find('"', i + 1);
          i = end == std::string::npos ? text.size() - 1 : end;
        } else if (c == '{') {
          ++depth;
        } else if (c == '}') {
          if (--depth == 0) {
            ++i;
            break;
          }
        } else if (c == ';' && depth == 0) {
          ++i;
          break;
        }
      }
    }
    Statement st;
    st.text = text.substr(start, i - start);
    if (rest.starts_with(".file")) continue;  // debug file table: per unit, not mergeable
    classify(&st);
    out.push_back(std::move(st));
  }
  return out;
}

// Renames `from` to `to` wherever it stands as a whole identifier.
void renameSymbol(std::string* text, const std::string& from, const std::string& to) {
  size_t at = 0;
  while ((at = text->find(from, at)) != std::string::npos) {
    bool startOk = at == 0 || !isIdentChar((*text)[at - 1]);
    size_t end = at + from.size();
    bool endOk = end >= text->size() || !isIdentChar((*text)[end]);
    if (startOk && endOk) {
      text->replace(at, from.size(), to);
      at += to.size();
    } else {
      at = end;
    }
  }
}

uint32_t versionOf(std::string_view header) {
  auto w = words(header);
  if (w.size() < 2) return 0;
  std::string v(w[1]);
  size_t dot = v.find('.');
  if (dot == std::string::npos) return 0;
  return static_cast<uint32_t>(std::atoi(v.substr(0, dot).c_str()) * 10 +
                               std::atoi(v.substr(dot + 1).c_str()));
}

// Functions the emu provides itself (ptx ir_builder's builtins): declared extern, never defined.
bool providedByEmu(const std::string& name) {
  return name == "vprintf" || name == "malloc" || name == "free" || name == "__assertfail" ||
         name == "cudaGraphSetConditional";
}

struct Unit {
  std::string name;
  std::vector<Statement> statements;
  bool optional = false;
  bool linked = false;
};

void fail(LinkOutcome* outcome, CUresult result, const std::string& message) {
  outcome->result = result;
  outcome->errorLog += "error   : " + message + "\n";
  outcome->image.clear();
}

}  // namespace

void emuLink(std::span<const LinkInput> inputs, int cc, bool verbose, LinkOutcome* outcome) {
  *outcome = LinkOutcome{};
  Gathered gathered;
  for (const LinkInput& in : inputs) {
    if (Status st = gather(in, cc, &gathered); !st.ok()) {
      return fail(outcome, st.code, in.name + ": " + st.message);
    }
  }
  std::vector<Unit> units;
  for (PtxUnit& p : gathered.units) {
    units.push_back({p.name, statements(p.text), p.optional, !p.optional});
  }
  // Exported definitions, by symbol: the unit that gives each.
  auto definitions = [&](size_t u) {
    std::vector<const Statement*> out;
    for (const Statement& s : units[u].statements) {
      if (!s.symbol.empty() && s.isDefinition && s.linkage != Linkage::kInternal && !s.isShared) {
        out.push_back(&s);
      }
    }
    return out;
  };
  // Library members join while they define something a linked unit still lacks.
  std::map<std::string, size_t> definedBy;
  auto addDefinitions = [&](size_t u) -> bool {
    for (const Statement* s : definitions(u)) {
      auto [it, inserted] = definedBy.emplace(s->symbol, u);
      if (!inserted && !(s->linkage == Linkage::kWeak)) {
        const Unit& other = units[it->second];
        bool otherWeak = false;
        for (const Statement* o : definitions(it->second)) {
          if (o->symbol == s->symbol) otherWeak = o->linkage == Linkage::kWeak;
        }
        if (!otherWeak) {
          fail(outcome, CUDA_ERROR_INVALID_PTX,
               "Multiple definition of '" + s->symbol + "' in '" + units[u].name +
                   "', first defined in '" + other.name + "'");
          return false;
        }
        it->second = u;  // a strong definition replaces a weak one
      }
    }
    return true;
  };
  for (size_t u = 0; u < units.size(); ++u) {
    if (units[u].linked && !addDefinitions(u)) return;
  }
  auto unresolved = [&]() {
    std::vector<std::pair<std::string, size_t>> out;
    for (size_t u = 0; u < units.size(); ++u) {
      if (!units[u].linked) continue;
      for (const Statement& s : units[u].statements) {
        if (s.linkage == Linkage::kExtern && !s.isShared && !s.symbol.empty() &&
            !definedBy.count(s.symbol) && !providedByEmu(s.symbol)) {
          out.emplace_back(s.symbol, u);
        }
      }
    }
    return out;
  };
  for (bool grew = true; grew;) {
    grew = false;
    for (auto& [symbol, user] : unresolved()) {
      for (size_t u = 0; u < units.size() && !grew; ++u) {
        if (units[u].linked) continue;
        for (const Statement* s : definitions(u)) {
          if (s->symbol == symbol) {
            units[u].linked = true;
            if (!addDefinitions(u)) return;
            grew = true;
            break;
          }
        }
      }
      if (grew) break;
    }
  }
  if (auto missing = unresolved(); !missing.empty()) {
    for (auto& [symbol, user] : missing) {
      fail(outcome, CUDA_ERROR_INVALID_PTX,
           "Undefined reference to '" + symbol + "' in '" + units[user].name + "'");
    }
    for (const std::string& m : gathered.withoutPtx) {
      outcome->errorLog +=
          "info    : " + m + " carries no PTX for this device, so it cannot help\n";
    }
    return;
  }
  // Internal symbols that another linked unit also names get a unit suffix.
  std::map<std::string, int> names;
  for (const Unit& unit : units) {
    if (!unit.linked) continue;
    for (const Statement& s : unit.statements) {
      if (!s.symbol.empty() && (s.isDefinition || s.linkage != Linkage::kExtern)) ++names[s.symbol];
    }
  }
  std::string header, target, addressSize;
  uint32_t version = 0;
  std::string body;
  std::set<std::string> externShared;
  size_t linkedUnits = 0;
  for (size_t u = 0; u < units.size(); ++u) {
    Unit& unit = units[u];
    if (!unit.linked) continue;
    ++linkedUnits;
    std::string text;
    std::vector<std::string> renames;
    for (const Statement& s : unit.statements) {
      if (s.header) {
        if (s.text.starts_with(".version")) {
          if (uint32_t v = versionOf(s.text); v > version) {
            version = v;
            header = s.text;
          }
        } else if (s.text.starts_with(".target")) {
          if (target.empty()) target = s.text;
        } else if (addressSize.empty()) {
          addressSize = s.text;
        }
        continue;
      }
      if (s.linkage == Linkage::kExtern && !s.symbol.empty()) {
        if (s.isShared) {
          if (!externShared.insert(s.symbol).second) continue;  // declared by an earlier unit
        } else if (definedBy.count(s.symbol)) {
          continue;  // defined in the merged text
        }
      }
      if (s.linkage == Linkage::kWeak && s.isDefinition && definedBy.count(s.symbol) &&
          definedBy[s.symbol] != u) {
        continue;  // another unit's definition wins
      }
      if (s.linkage == Linkage::kInternal && !s.symbol.empty() && names[s.symbol] > 1) {
        renames.push_back(s.symbol);
      }
      text += s.text;
      text += "\n";
    }
    for (const std::string& r : renames) {
      renameSymbol(&text, r, r + "$emu_link" + std::to_string(u));
    }
    body += "// " + unit.name + "\n" + text + "\n";
    if (verbose) outcome->infoLog += "info    : linking " + unit.name + "\n";
  }
  if (linkedUnits == 0) return fail(outcome, CUDA_ERROR_INVALID_VALUE, "nothing to link");
  std::string merged = header + "\n" + target + "\n" + addressSize + "\n\n" + body;
  // Loading the result now reports what the driver's ptxas would at this point.
  auto loaded = ptx::Module::load(merged);
  if (!loaded) return fail(outcome, loaded.status().code, loaded.status().message);
  if (verbose) {
    for (const ptx::KernelInfo& k : (*loaded)->kernels()) {
      outcome->infoLog += "info    : Function properties for " + k.name + ": " +
                          std::to_string(k.allocatedRegs) + " registers, " +
                          std::to_string(k.staticSharedBytes) + " bytes smem\n";
    }
  }
  outcome->image.assign(merged.begin(), merged.end());
  outcome->image.push_back(0);
}

}  // namespace gpupool::server

namespace gpupool::server {
namespace {

// A definition standing in for an extern, so that a unit loads on its own: the declaration made
// internal, a function given an empty body.
std::string standIn(const Statement& s) {
  std::string text = s.text;
  if (size_t at = text.find(".extern"); at != std::string::npos) text.erase(at, 7);
  if (text.find(".func") != std::string::npos) {
    if (size_t end = text.rfind(';'); end != std::string::npos) text.replace(end, 1, " { ret; }");
  }
  return text;
}

}  // namespace

void emuCheckLinkInput(const LinkInput& input, int cc, LinkOutcome* outcome) {
  *outcome = LinkOutcome{};
  Gathered gathered;
  if (Status st = gather(input, cc, &gathered); !st.ok()) {
    return fail(outcome, st.code, input.name + ": " + st.message);
  }
  for (const PtxUnit& unit : gathered.units) {
    if (unit.optional) continue;  // a library member is compiled only when the link pulls it in
    std::string text;
    for (const Statement& s : statements(unit.text)) {
      bool undefinedExtern = s.linkage == Linkage::kExtern && !s.isShared && !s.symbol.empty() &&
                             !providedByEmu(s.symbol);
      text += undefinedExtern ? standIn(s) : s.text;
      text += "\n";
    }
    auto loaded = ptx::Module::load(text);
    if (!loaded) {
      return fail(outcome, loaded.status().code, unit.name + ": " + loaded.status().message);
    }
  }
}

}  // namespace gpupool::server
