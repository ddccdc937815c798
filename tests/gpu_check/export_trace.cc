// A diagnostic LD_PRELOAD library for the GPU check (gpu-check.sh --trace-export-tables, and the
// nvml item's traces of nvidia-smi): in a program running on NVIDIA's own driver or NVML, it logs
// which private export tables the program asks cuGetExportTable or nvmlInternalGetExportTable for
// and, for the tables named in GPU_CHECK_TRACE_TABLES (default: the ones our libraries lack or
// refuse, docs/gpu-validation.md and docs/nvml.md), every call through them: slot, arguments,
// result, and the bytes behind each pointer argument before and after. NVIDIA documents none of
// these tables; this log is how we learn what a program needs from them. Not part of gpupool.
//
// cudart finds the driver's entry points with dlsym(libcuda, "cuGetProcAddress*") and everything
// else through cuGetProcAddress, and nvidia-smi dlopens NVML and looks up
// nvmlInternalGetExportTable with dlsym, so interposing dlsym is enough to see both.
// A traced table is replaced by a copy whose function slots are trampolines; a trampoline takes and
// forwards twelve integer arguments (six in registers, six from the caller's stack), which covers
// every signature of integer and pointer arguments up to twelve.
#include <dlfcn.h>
#include <link.h>
#include <sys/uio.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cctype>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace {

using Word = std::uint64_t;
using Slot = Word (*)(Word, Word, Word, Word, Word, Word, Word, Word, Word, Word, Word, Word);
using DlsymFn = void* (*)(void*, const char*);
using GetExportTableFn = int (*)(const void**, const unsigned char*);
using GetProcAddressV1 = int (*)(const char*, void**, int, std::uint64_t);
using GetProcAddressV2 = int (*)(const char*, void**, int, std::uint64_t, int*);

constexpr int kMaxTables = 8;
constexpr int kMaxSlots = 320;  // nvidia-smi 535 calls NVML's table up to slot 242
constexpr int kLoggedCallsPerSlot = 40;
constexpr std::size_t kDumpBytes = 48;

struct TracedTable {
  unsigned char guid[16];
  std::string name;
  const char* source = "";  // the call that returned the table
  const Word* original = nullptr;
  Word* copy = nullptr;
  int slots = 0;
  std::array<std::atomic<int>, kMaxSlots> calls{};
};

std::mutex log_mutex;
FILE* log_file = nullptr;
std::array<TracedTable, kMaxTables> tables;
std::atomic<int> table_count{0};
DlsymFn real_dlsym = nullptr;
GetExportTableFn real_get_export_table = nullptr;
GetExportTableFn real_nvml_get_export_table = nullptr;
GetProcAddressV1 real_get_proc_address_v1 = nullptr;
GetProcAddressV2 real_get_proc_address_v2 = nullptr;

FILE* log_stream() {
  if (log_file == nullptr) {
    const char* path = std::getenv("GPU_CHECK_TRACE_LOG");
    if (path != nullptr) log_file = std::fopen(path, "a");
    if (log_file == nullptr) log_file = stderr;
    std::setvbuf(log_file, nullptr, _IOLBF, 0);
  }
  return log_file;
}

std::string guid_text(const unsigned char* g) {
  char text[40];
  std::snprintf(text, sizeof text,
                "%02X%02X%02X%02X-%02X%02X-%02X%02X-%02X%02X-%02X%02X%02X%02X%02X%02X", g[3], g[2],
                g[1], g[0], g[5], g[4], g[7], g[6], g[8], g[9], g[10], g[11], g[12], g[13], g[14],
                g[15]);
  return text;
}

// The driver prints export-table GUIDs the way CUDA's cuuuid does: the bytes in order. Both forms
// are logged, since tools disagree.
std::string guid_bytes_text(const unsigned char* g) {
  std::string text;
  char byte[4];
  for (int i = 0; i < 16; ++i) {
    std::snprintf(byte, sizeof byte, "%02x", g[i]);
    text += byte;
  }
  return text;
}

bool traced(const std::string& bytes_text, const std::string& text) {
  const char* wanted = std::getenv("GPU_CHECK_TRACE_TABLES");
  std::string list = wanted != nullptr ? wanted : "1734DC26,69A28E9F,6E163FBE,6C3EFEC4";
  if (list == "all") return true;
  std::string upper_bytes;
  for (char c : bytes_text) upper_bytes += static_cast<char>(std::toupper(c));
  std::size_t start = 0;
  while (start <= list.size()) {
    std::size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    std::string item = list.substr(start, end - start);
    for (char& c : item) c = static_cast<char>(std::toupper(c));
    if (!item.empty() && (text.rfind(item, 0) == 0 || upper_bytes.rfind(item, 0) == 0)) return true;
    start = end + 1;
  }
  return false;
}

// Reads len bytes at address without faulting: process_vm_readv on ourselves fails with EFAULT
// where a plain read would crash.
bool read_memory(Word address, unsigned char* into, std::size_t len) {
  if (address < 4096) return false;
  iovec local{into, len};
  iovec remote{reinterpret_cast<void*>(address), len};
  return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == static_cast<ssize_t>(len);
}

std::string hex(const unsigned char* bytes, std::size_t len) {
  std::string text;
  char byte[4];
  for (std::size_t i = 0; i < len; ++i) {
    std::snprintf(byte, sizeof byte, "%02x", bytes[i]);
    text += byte;
    if (i % 8 == 7 && i + 1 < len) text += ' ';
  }
  return text;
}

std::string where(Word address) {
  Dl_info info{};
  if (address != 0 && dladdr(reinterpret_cast<void*>(address), &info) != 0 &&
      info.dli_fname != nullptr) {
    const char* base = std::strrchr(info.dli_fname, '/');
    char text[64];
    std::snprintf(text, sizeof text, "+0x%" PRIxPTR,
                  reinterpret_cast<std::uintptr_t>(reinterpret_cast<void*>(address)) -
                      reinterpret_cast<std::uintptr_t>(info.dli_fbase));
    return std::string(base != nullptr ? base + 1 : info.dli_fname) + text;
  }
  return "?";
}

bool executable_address(Word address) {
  Dl_info info{};
  if (address < 4096 || dladdr(reinterpret_cast<void*>(address), &info) == 0) return false;
  // Inside a loaded object; a data pointer into one passes too, which the slot scan accepts.
  return info.dli_fbase != nullptr;
}

// The work of every trampoline, out of line: 1024 copies of it took 30 s to compile.
Word traced_call(int T, int S, Word a0, Word a1, Word a2, Word a3, Word a4, Word a5, Word a6,
                 Word a7, Word a8, Word a9, Word a10, Word a11) {
  TracedTable& table = tables[T];
  const Word args[12] = {a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11};
  const int call = table.calls[S].fetch_add(1);
  const bool logged = call < kLoggedCallsPerSlot;
  unsigned char before[6][kDumpBytes];
  bool readable[6] = {};
  if (logged)
    for (int i = 0; i < 6; ++i) readable[i] = read_memory(args[i], before[i], kDumpBytes);
  auto target = reinterpret_cast<Slot>(table.original[S]);
  const Word result = target(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11);
  if (logged) {
    std::lock_guard<std::mutex> lock(log_mutex);
    FILE* out = log_stream();
    std::fprintf(out,
                 "call %s %s slot %d #%d: args %#" PRIx64 " %#" PRIx64 " %#" PRIx64 " %#" PRIx64
                 " %#" PRIx64 " %#" PRIx64 " -> %#" PRIx64 " (%s)\n",
                 table.source, table.name.c_str(), S, call, a0, a1, a2, a3, a4, a5, result,
                 where(table.original[S]).c_str());
    for (int i = 0; i < 6; ++i) {
      if (!readable[i]) continue;
      unsigned char after[kDumpBytes];
      const bool still = read_memory(args[i], after, kDumpBytes);
      std::fprintf(out, "  arg%d %s before %s\n", i, where(args[i]).c_str(),
                   hex(before[i], kDumpBytes).c_str());
      if (still && std::memcmp(before[i], after, kDumpBytes) != 0)
        std::fprintf(out, "  arg%d after       %s\n", i, hex(after, kDumpBytes).c_str());
    }
  }
  return result;
}

template <int T, int S>
Word trampoline(Word a0, Word a1, Word a2, Word a3, Word a4, Word a5, Word a6, Word a7, Word a8,
                Word a9, Word a10, Word a11) {
  return traced_call(T, S, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11);
}

template <int T, std::size_t... S>
constexpr std::array<Slot, kMaxSlots> slots_of(std::index_sequence<S...>) {
  return {&trampoline<T, static_cast<int>(S)>...};
}

template <std::size_t... T>
constexpr std::array<std::array<Slot, kMaxSlots>, kMaxTables> all_trampolines(
    std::index_sequence<T...>) {
  return {slots_of<static_cast<int>(T)>(std::make_index_sequence<kMaxSlots>{})...};
}

const std::array<std::array<Slot, kMaxSlots>, kMaxTables> trampolines =
    all_trampolines(std::make_index_sequence<kMaxTables>{});

// Slot 0 of most tables is the table's size in bytes; where it is not, the function slots run
// until the first word that points into no loaded object. A sized table longer than kMaxSlots is
// traced in its first kMaxSlots slots.
int count_slots(const Word* table, bool* sized) {
  *sized = table[0] >= 16 && table[0] <= 8 * 4096 && table[0] % 8 == 0;
  if (*sized) return static_cast<int>(table[0] / 8);
  int n = 0;
  while (n < kMaxSlots && executable_address(table[n])) ++n;
  return n;
}

const void* wrap_table(const char* source, const unsigned char* guid, const void* original) {
  const std::string text = guid_text(guid);
  const std::string bytes = guid_bytes_text(guid);
  const auto* words = static_cast<const Word*>(original);
  bool sized = false;
  const int slots = count_slots(words, &sized);
  std::lock_guard<std::mutex> lock(log_mutex);
  FILE* out = log_stream();
  for (int t = 0; t < table_count.load(); ++t)
    if (std::memcmp(tables[t].guid, guid, 16) == 0) return tables[t].copy;
  std::fprintf(out, "%s table {%s} (bytes %s) at %p: slot 0 = %#" PRIx64 " (%s), %d slots\n",
               source, text.c_str(), bytes.c_str(), original, words[0],
               sized ? "a size" : "not a size", slots);
  // A table whose slots could not be told apart is left alone: a copy would have none.
  if (!traced(bytes, text) || slots == 0) return original;
  for (int i = 0; i < slots; ++i)
    std::fprintf(out, "  slot %d = %#" PRIx64 " %s\n", i, words[i], where(words[i]).c_str());
  const int t = table_count.load();
  if (t >= kMaxTables) {
    std::fprintf(out, "  not traced: %d tables are traced already\n", kMaxTables);
    return original;
  }
  TracedTable& table = tables[t];
  std::memcpy(table.guid, guid, 16);
  table.name = "{" + text + "}";
  table.source = source;
  table.original = words;
  table.slots = slots;
  table.copy = new Word[slots]();
  for (int i = 0; i < slots; ++i)
    table.copy[i] = (i == 0 && sized) || i >= kMaxSlots || !executable_address(words[i])
                        ? words[i]
                        : reinterpret_cast<Word>(trampolines[t][i]);
  if (slots > kMaxSlots) std::fprintf(out, "  slots %d and up are not traced\n", kMaxSlots);
  table_count.store(t + 1);
  std::fprintf(out, "  traced as table %d\n", t);
  return table.copy;
}

int traced_get_export_table_through(GetExportTableFn real, const char* source, const void** table,
                                    const unsigned char* guid) {
  const int status = real(table, guid);
  if (status == 0 && table != nullptr && *table != nullptr && guid != nullptr) {
    *table = wrap_table(source, guid, *table);
  } else if (guid != nullptr) {
    std::lock_guard<std::mutex> lock(log_mutex);
    std::fprintf(log_stream(), "%s table {%s}: returned %d\n", source, guid_text(guid).c_str(),
                 status);
  }
  return status;
}

int traced_get_export_table(const void** table, const unsigned char* guid) {
  return traced_get_export_table_through(real_get_export_table, "cuGetExportTable", table, guid);
}

// NVML's private entry point (docs/nvml.md, "NVIDIA's nvidia-smi"): the same shape, 0 for success.
int traced_nvml_get_export_table(const void** table, const unsigned char* guid) {
  return traced_get_export_table_through(real_nvml_get_export_table, "nvmlInternalGetExportTable",
                                         table, guid);
}

void* substitute(const char* symbol, void* found, int cuda_version);

int traced_get_proc_address_v1(const char* symbol, void** pfn, int version, std::uint64_t flags) {
  const int status = real_get_proc_address_v1(symbol, pfn, version, flags);
  if (status == 0 && pfn != nullptr) *pfn = substitute(symbol, *pfn, version);
  return status;
}

int traced_get_proc_address_v2(const char* symbol, void** pfn, int version, std::uint64_t flags,
                               int* found) {
  const int status = real_get_proc_address_v2(symbol, pfn, version, flags, found);
  if (status == 0 && pfn != nullptr) *pfn = substitute(symbol, *pfn, version);
  return status;
}

// What cuGetProcAddress or dlsym found for a driver symbol, or our wrapper of it.
void* substitute(const char* symbol, void* found, int cuda_version) {
  if (found == nullptr || symbol == nullptr) return found;
  if (std::strcmp(symbol, "cuGetExportTable") == 0) {
    real_get_export_table = reinterpret_cast<GetExportTableFn>(found);
    return reinterpret_cast<void*>(&traced_get_export_table);
  }
  // cuGetProcAddress asked by name returns the variant of the caller's CUDA version: from 12.0
  // on, the _v2 signature.
  const bool v2 = std::strcmp(symbol, "cuGetProcAddress_v2") == 0 ||
                  (std::strcmp(symbol, "cuGetProcAddress") == 0 && cuda_version >= 12000);
  if (v2) {
    real_get_proc_address_v2 = reinterpret_cast<GetProcAddressV2>(found);
    return reinterpret_cast<void*>(&traced_get_proc_address_v2);
  }
  if (std::strcmp(symbol, "cuGetProcAddress") == 0) {
    real_get_proc_address_v1 = reinterpret_cast<GetProcAddressV1>(found);
    return reinterpret_cast<void*>(&traced_get_proc_address_v1);
  }
  return found;
}

DlsymFn find_real_dlsym() {
  for (const char* version : {"GLIBC_2.34", "GLIBC_2.2.5"}) {
    if (void* f = dlvsym(RTLD_NEXT, "dlsym", version)) return reinterpret_cast<DlsymFn>(f);
  }
  std::abort();
}

// RTLD_NEXT means "after the object that called dlsym"; glibc works that out from dlsym's return
// address, which is now ours, so the search after the caller's object is done here.
struct NextSearch {
  const char* caller_object;
  const char* name;
  bool seen_caller = false;
  void* found = nullptr;
};

int search_next(dl_phdr_info* info, std::size_t, void* data) {
  auto* search = static_cast<NextSearch*>(data);
  if (search->found != nullptr) return 1;
  if (!search->seen_caller) {
    search->seen_caller = std::strcmp(info->dlpi_name, search->caller_object) == 0;
    return 0;
  }
  void* handle =
      dlopen(info->dlpi_name[0] != '\0' ? info->dlpi_name : nullptr, RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) return 0;
  search->found = real_dlsym(handle, search->name);
  dlclose(handle);
  return search->found != nullptr ? 1 : 0;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) void* dlsym(void* handle, const char* name) {
  if (real_dlsym == nullptr) real_dlsym = find_real_dlsym();
  void* found = nullptr;
  if (handle == RTLD_NEXT) {
    Dl_info caller{};
    if (dladdr(__builtin_return_address(0), &caller) != 0 && caller.dli_fname != nullptr) {
      NextSearch search{caller.dli_fname, name};
      dl_iterate_phdr(&search_next, &search);
      found = search.found;
    }
  } else {
    found = real_dlsym(handle, name);
  }
  if (found != nullptr && std::strncmp(name, "cu", 2) == 0)
    return substitute(name, found, 0);  // the exported cuGetProcAddress is the first signature
  if (found != nullptr && std::strcmp(name, "nvmlInternalGetExportTable") == 0) {
    real_nvml_get_export_table = reinterpret_cast<GetExportTableFn>(found);
    return reinterpret_cast<void*>(&traced_nvml_get_export_table);
  }
  return found;
}
