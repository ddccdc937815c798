// Strong cuGetProcAddress (legacy 4-argument ABI) and cuGetProcAddress_v2 over the generated table.
// This file is compiled with __CUDA_API_VERSION_INTERNAL, so cuGetProcAddress names the legacy
// symbol rather than being renamed to cuGetProcAddress_v2.
#include "proc_address.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace gpupool::client {
namespace {

// GPU_POOL_LOG=2 (or more) logs every lookup to stderr.
bool logLookups() {
  static const bool enabled = [] {
    const char* level = std::getenv("GPU_POOL_LOG");
    return level != nullptr && std::atoi(level) >= 2;
  }();
  return enabled;
}

struct EntryOrder {
  static std::pair<std::string_view, bool> key(const ProcAddressEntry& e) {
    return {e.name, e.perThreadStream};
  }
  bool operator()(const ProcAddressEntry& e, const std::pair<std::string_view, bool>& k) const {
    return key(e) < k;
  }
  bool operator()(const std::pair<std::string_view, bool>& k, const ProcAddressEntry& e) const {
    return k < key(e);
  }
};

CUresult getProcAddress(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                        CUdriverProcAddressQueryResult* symbolStatus) {
  if (symbol == nullptr || pfn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  ProcAddressResult found = lookupProcAddress(symbol, cudaVersion, flags);
  *pfn = found.entry != nullptr ? found.entry->function : nullptr;
  if (symbolStatus != nullptr) *symbolStatus = found.status;
  if (logLookups()) {
    std::fprintf(stderr, "gpupool: cuGetProcAddress(\"%s\", %d, %llu) -> %s\n", symbol, cudaVersion,
                 static_cast<unsigned long long>(flags),
                 found.entry != nullptr ? found.entry->symbol
                 : found.status == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                     ? "VERSION_NOT_SUFFICIENT"
                     : "SYMBOL_NOT_FOUND");
  }
  return found.result;
}

}  // namespace

ProcAddressResult lookupProcAddress(std::string_view name, int cudaVersion, cuuint64_t flags) {
  const bool perThread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  const auto table = procAddressTable();
  const auto [first, last] =
      std::equal_range(table.begin(), table.end(), std::pair{name, perThread}, EntryOrder{});
  if (name.empty() || first == last) {
    return {CUDA_ERROR_NOT_FOUND, nullptr, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND};
  }
  const ProcAddressEntry* chosen = nullptr;
  for (auto it = first; it != last && it->version <= cudaVersion; ++it) chosen = &*it;
  if (chosen == nullptr) {
    return {CUDA_ERROR_NOT_FOUND, nullptr, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT};
  }
  return {CUDA_SUCCESS, chosen, CU_GET_PROC_ADDRESS_SUCCESS};
}

}  // namespace gpupool::client

extern "C" {

__attribute__((visibility("default"))) CUresult CUDAAPI cuGetProcAddress(const char* symbol,
                                                                         void** pfn,
                                                                         int cudaVersion,
                                                                         cuuint64_t flags) {
  return gpupool::client::getProcAddress(symbol, pfn, cudaVersion, flags, nullptr);
}

__attribute__((visibility("default"))) CUresult CUDAAPI
cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                    CUdriverProcAddressQueryResult* symbolStatus) {
  return gpupool::client::getProcAddress(symbol, pfn, cudaVersion, flags, symbolStatus);
}

}  // extern "C"
