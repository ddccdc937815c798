#include "context_local_storage.h"

#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace gpupool::client {
namespace {

struct ClsEntry {
  void* value;
  ClsDestructor dtor;
};

// Leaked on purpose: cudart instances delete their keys from static destructors at exit.
std::mutex& clsMutex() {
  static auto* mutex = new std::mutex;
  return *mutex;
}
std::map<std::pair<CUcontext, void*>, ClsEntry>& clsEntries() {
  static auto* entries = new std::map<std::pair<CUcontext, void*>, ClsEntry>;
  return *entries;
}

CUresult resolveContext(CUcontext* ctx) {
  if (*ctx != nullptr) return CUDA_SUCCESS;
  const CUresult result = cuCtxGetCurrent(ctx);
  if (result != CUDA_SUCCESS) return result;
  return *ctx != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

}  // namespace

CUresult clsPut(CUcontext ctx, void* key, void* value, ClsDestructor dtor) {
  if (CUresult result = resolveContext(&ctx); result != CUDA_SUCCESS) return result;
  std::lock_guard lock(clsMutex());
  clsEntries()[{ctx, key}] = ClsEntry{value, dtor};
  return CUDA_SUCCESS;
}

CUresult clsDelete(CUcontext ctx, void* key) {
  if (CUresult result = resolveContext(&ctx); result != CUDA_SUCCESS) return result;
  std::lock_guard lock(clsMutex());
  clsEntries().erase({ctx, key});
  return CUDA_SUCCESS;
}

CUresult clsGet(void** value, CUcontext ctx, void* key) {
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult result = resolveContext(&ctx); result != CUDA_SUCCESS) return result;
  std::lock_guard lock(clsMutex());
  const auto it = clsEntries().find({ctx, key});
  if (it == clsEntries().end()) return CUDA_ERROR_INVALID_HANDLE;
  *value = it->second.value;
  return CUDA_SUCCESS;
}

void destroyContextLocalStorage(CUcontext ctx) {
  std::vector<std::pair<void*, ClsEntry>> removed;
  {
    std::lock_guard lock(clsMutex());
    auto& entries = clsEntries();
    auto it = entries.lower_bound({ctx, nullptr});
    while (it != entries.end() && it->first.first == ctx) {
      removed.emplace_back(it->first.second, it->second);
      it = entries.erase(it);
    }
  }
  for (const auto& [key, entry] : removed) {
    if (entry.dtor != nullptr) entry.dtor(ctx, key, entry.value);
  }
}

}  // namespace gpupool::client
