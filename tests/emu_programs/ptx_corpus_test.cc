// The PTX parser must accept every PTX the build produces and the PTX inside the toolkit's
// libraries. The validator may refuse a module with CUDA_ERROR_NOT_SUPPORTED, but its message must
// name the instruction at the line it reports. Sources:
//   - the .ptx files nvcc -ptx writes for tests/unit/ptx (four flavours);
//   - the PTX nvcc embedded in every program of this suite, in every flavour (read from the
//     executables' .nv_fatbin sections: the same text `nvcc -ptx` gives for those flavours);
//   - every PTX entry of cuBLAS, cuBLASLt, cuFFT, cuRAND, cuSPARSE and cuSOLVER, each within a time
//     budget (see kLibraryBudget).
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <span>
#include <sstream>

#include "emu_server.h"
#include "gpupool/image/fatbin.h"
#include "server/backends/emu/ptx/ptx_module.h"
#include "suite_lists.h"

namespace gpupool::emu_programs {
namespace {

namespace fs = std::filesystem;

// cuBLASLt carries ~240 MB of PTX; past this budget the rest of a library's entries are skipped
// (and the count of checked entries is printed), so the test stays bounded on a slow CI machine.
// Under AddressSanitizer, which checks the parser's memory safety rather than its coverage, a
// sample does.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr std::chrono::seconds kLibraryBudget{15};
#else
constexpr std::chrono::seconds kLibraryBudget{60};
#endif

// In one read: a character at a time, cuBLASLt's 500 MB took most of its test's time under ASan.
std::vector<uint8_t> readFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  if (!file) return {};
  std::vector<uint8_t> bytes(static_cast<size_t>(file.tellg()));
  file.seekg(0);
  file.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!file) return {};
  return bytes;
}

template <typename T>
T readAt(std::span<const uint8_t> bytes, size_t offset) {
  T value{};
  if (offset + sizeof(T) <= bytes.size()) std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

// The contents of the ELF64 section `name`, or an empty span.
std::span<const uint8_t> elfSection(std::span<const uint8_t> elf, const std::string& name) {
  if (elf.size() < 64 || std::memcmp(elf.data(),
                                     "\x7f"
                                     "ELF\x02",
                                     5) != 0)
    return {};
  const auto sectionOffset = readAt<uint64_t>(elf, 0x28);
  const auto entrySize = readAt<uint16_t>(elf, 0x3a);
  const auto count = readAt<uint16_t>(elf, 0x3c);
  const auto namesIndex = readAt<uint16_t>(elf, 0x3e);
  auto header = [&](size_t i) { return sectionOffset + i * entrySize; };
  const auto namesOffset = readAt<uint64_t>(elf, header(namesIndex) + 0x18);
  for (size_t i = 0; i < count; ++i) {
    const auto nameOffset = readAt<uint32_t>(elf, header(i));
    const auto offset = readAt<uint64_t>(elf, header(i) + 0x18);
    const auto size = readAt<uint64_t>(elf, header(i) + 0x20);
    const size_t at = namesOffset + nameOffset;
    if (at >= elf.size() || offset + size > elf.size()) continue;
    const char* text = reinterpret_cast<const char*>(elf.data() + at);
    if (name == std::string(text, strnlen(text, elf.size() - at))) return elf.subspan(offset, size);
  }
  return {};
}

struct PtxText {
  std::string origin;
  std::string text;
};

// Hands every PTX entry of every fatbin in a .nv_fatbin section (fatbins are laid end to end) to
// `visit`, decompressed, until it returns false. False (and *error) when the section is malformed.
bool visitPtxInFatbins(std::span<const uint8_t> section, const std::string& origin,
                       std::string* error, const std::function<bool(PtxText&&)>& visit) {
  size_t offset = 0;
  int index = 0;
  while (offset + 16 <= section.size()) {
    if (readAt<uint32_t>(section, offset) != 0xBA55ED50u) {
      offset += 8;  // padding between fatbins
      continue;
    }
    const size_t size =
        readAt<uint16_t>(section, offset + 6) + readAt<uint64_t>(section, offset + 8);
    auto fatbin =
        image::Fatbin::parse(section.subspan(offset, std::min(size, section.size() - offset)));
    if (!fatbin) {
      *error = fatbin.status().message;
      return false;
    }
    for (const auto& entry : fatbin->entries()) {
      if (!entry.isPtx()) continue;
      auto payload = fatbin->payload(entry);
      if (!payload) {
        *error = payload.status().message;
        return false;
      }
      if (!visit({origin + " fatbin " + std::to_string(index) + " " + entry.archName(),
                  std::string(payload->begin(), payload->end())}))
        return true;
    }
    offset += size;
    ++index;
  }
  return true;
}

// Every PTX entry of a .nv_fatbin section; empty (and *error) when it is malformed.
std::vector<PtxText> ptxInFatbins(std::span<const uint8_t> section, const std::string& origin,
                                  std::string* error) {
  std::vector<PtxText> result;
  if (!visitPtxInFatbins(section, origin, error, [&](PtxText&& text) {
        result.push_back(std::move(text));
        return true;
      }))
    return {};
  return result;
}

// The opcode (first word, after an optional @guard) at 1-based `line` of `text`.
std::string opcodeAtLine(const std::string& text, int line) {
  std::istringstream stream(text);
  std::string current;
  for (int i = 0; i < line && std::getline(stream, current);) ++i;
  std::istringstream words(current);
  std::string word;
  // The first word that is not a brace (a block opened on the instruction's line) or a guard.
  while (words >> word && (word == "{" || word == "}" || word[0] == '@')) {
  }
  return word;
}

// Loads one PTX text; a failure is acceptable only as NOT_SUPPORTED naming the instruction.
// Returns the message of a NOT_SUPPORTED refusal (empty when the module loaded).
std::string checkLoads(const PtxText& ptx) {
  auto module = ptx::Module::load(ptx.text);
  if (module) return {};
  const Status& error = module.status();
  EXPECT_EQ(error.code, CUDA_ERROR_NOT_SUPPORTED)
      << ptx.origin << ": the parser refused it (" << error.code << "): " << error.message;
  if (error.code != CUDA_ERROR_NOT_SUPPORTED) return {};
  std::smatch match;
  static const std::regex lineNumber(R"(line (\d+))");
  if (!std::regex_search(error.message, match, lineNumber)) {
    ADD_FAILURE() << ptx.origin << ": NOT_SUPPORTED without a line: " << error.message;
    return error.message;
  }
  const std::string opcode = opcodeAtLine(ptx.text, std::stoi(match[1]));
  const std::string base = opcode.substr(0, opcode.find('.'));
  EXPECT_TRUE(!base.empty() && error.message.find(base) != std::string::npos)
      << ptx.origin << ": the message does not name the instruction `" << opcode
      << "` at its line: " << error.message;
  return error.message;
}

TEST(PtxCorpus, UnitTestKernelsLoad) {
  const fs::path dir = EMU_UNIT_PTX_DIR;
  if (!fs::exists(dir)) GTEST_SKIP() << dir << " was not built (nvcc missing)";
  int files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.path().extension() != ".ptx") continue;
    const auto bytes = readFile(entry.path());
    const std::string message = checkLoads({entry.path(), std::string(bytes.begin(), bytes.end())});
    EXPECT_TRUE(message.empty()) << entry.path() << " is refused: " << message;
    ++files;
  }
  EXPECT_GE(files, 20) << "expected the unit kernels in four flavours";
}

TEST(PtxCorpus, SuiteProgramsPtxLoads) {
  int entries = 0;
  for (const auto& list : {suitePrograms(), unsupportedPrograms()}) {
    for (const auto& [program, flavour] : inEveryFlavour(list)) {
      const std::string path = programPath(flavour, program);
      const auto bytes = readFile(path);
      const auto section = elfSection(bytes, ".nv_fatbin");
      ASSERT_FALSE(section.empty()) << path << " has no .nv_fatbin section";
      std::string error;
      const auto texts = ptxInFatbins(section, path, &error);
      ASSERT_FALSE(texts.empty()) << path << ": no PTX found " << error;
      const bool unsupported = program.rfind("unsupported_", 0) == 0;
      for (const auto& text : texts) {
        const std::string message = checkLoads(text);
        // The suite's own programs must load; only the unsupported_* ones may be refused.
        EXPECT_EQ(message.empty(), !unsupported) << text.origin << ": " << message;
        ++entries;
      }
    }
  }
  std::printf("checked %d PTX entries of the suite's programs\n", entries);
}

// Every PTX entry of one of the toolkit's shipped libraries parses; the emu may refuse an entry
// only as NOT_SUPPORTED naming the instruction (checkLoads). Prints what was refused, by reason.
class ToolkitLibraryPtx : public testing::TestWithParam<const char*> {};

TEST_P(ToolkitLibraryPtx, Parses) {
  const std::string path = std::string(EMU_CUDA_LIBRARY_DIR) + "/" + GetParam();
  if (!fs::exists(path)) GTEST_SKIP() << path << " is not installed";
  const auto bytes = readFile(path);
  const auto section = elfSection(bytes, ".nv_fatbin");
  if (section.empty()) GTEST_SKIP() << path << " has no .nv_fatbin section";
  std::string error;
  const auto started = std::chrono::steady_clock::now();
  size_t checked = 0, refused = 0, bytesChecked = 0;
  std::map<std::string, int> reasons;
  // Entries are decompressed as they are checked: past the budget the rest are not (under
  // AddressSanitizer decompressing cuBLASLt's 240 MB took longer than the sample's checks).
  bool budgetLeft = true;
  const bool wellFormed = visitPtxInFatbins(section, GetParam(), &error, [&](PtxText&& text) {
    const std::string message = checkLoads(text);
    if (!message.empty()) {
      ++refused;
      static const std::regex instruction(R"(unsupported (instruction|modifier) \S+)");
      std::smatch match;
      ++reasons[std::regex_search(message, match, instruction) ? match[0].str() : message];
    }
    ++checked;
    bytesChecked += text.text.size();
    budgetLeft = std::chrono::steady_clock::now() - started <= kLibraryBudget;
    return budgetLeft;
  });
  ASSERT_TRUE(wellFormed) << path << ": " << error;
  if (checked == 0) GTEST_SKIP() << "no PTX in " << path;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::printf("%s: %zu PTX entries (%.1f MB) checked in %.1f s%s; %zu refused as not supported\n",
              GetParam(), checked, bytesChecked / 1e6, seconds,
              budgetLeft ? ", all there are" : ", then the budget was spent", refused);
  for (const auto& [reason, count] : reasons) std::printf("  %4d x %s\n", count, reason.c_str());
  EXPECT_GT(checked, 0u);
}

// The CUDA 13 toolkit's libraries that carry device code (cuBLAS ~80 MB of PTX).
INSTANTIATE_TEST_SUITE_P(Toolkit, ToolkitLibraryPtx,
                         testing::Values("libcublas.so.13", "libcublasLt.so.13", "libcufft.so.12",
                                         "libcurand.so.10", "libcusparse.so.12",
                                         "libcusolver.so.12"),
                         [](const testing::TestParamInfo<const char*>& info) {
                           std::string name = info.param;
                           return name.substr(3, name.find('.') - 3);
                         });

}  // namespace
}  // namespace gpupool::emu_programs
