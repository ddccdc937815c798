#include "export_tables.h"

#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>
#include <string>

#include "context_hooks.h"
#include "context_local_storage.h"
#include "integrity_check.h"
#include "not_supported.h"

namespace gpupool::client {

// Weak default so that the surface links (and unit-tests) without the context code.
__attribute__((weak)) CUresult primaryContextHandle(CUdevice, CUcontext* out) {
  if (out != nullptr) *out = nullptr;
  return CUDA_ERROR_NOT_INITIALIZED;
}

namespace {

// Tables are written with plain casts in their initializers so that the compiler emits them as
// initialized data: they are usable before any static constructor of this library has run.
template <std::size_t N>
constexpr std::uintptr_t tableBytes = N * sizeof(void*);

CUresult succeed() { return CUDA_SUCCESS; }

// A slot whose contract is unknown: report it once and fail, instead of crashing on NULL.
template <int Slot>
CUresult unknownCudartInterfaceSlot() {
  static const auto* name = new std::string("CUDART_INTERFACE[" + std::to_string(Slot) + "]");
  return reportNotSupported(name->c_str());
}

// --- CUDART_INTERFACE -------------------------------------------------------------------------

// nvcc's __fatBinC_Wrapper_t.
struct FatbinWrapper {
  std::int32_t magic;
  std::int32_t version;
  const void* fatbin;
  void* filenameOrFatbins;
};
constexpr std::int32_t kFatbinWrapperMagic = 0x466243B1;

CUresult loadFatbinWrapper(CUmodule* module, const FatbinWrapper* wrapper) {
  if (module == nullptr || wrapper == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (wrapper->magic != kFatbinWrapperMagic) return CUDA_ERROR_INVALID_IMAGE;
  return cuModuleLoadFatBinary(module, wrapper->fatbin);
}

// [1] Module from a registered fatbin (runtimes before CUDA 12).
void getModuleFromCubin(CUmodule* module, const FatbinWrapper* wrapper) {
  loadFatbinWrapper(module, wrapper);
}

// [2] The primary context cudart makes current before it retains it.
CUresult getPrimaryContext(CUcontext* context, CUdevice dev) {
  if (context == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return primaryContextHandle(dev, context);
}

// [6] Module from a registered fatbin, extended form.
CUresult getModuleFromCubinExt1(CUmodule* module, const FatbinWrapper* wrapper, void*, void*,
                                std::uint32_t) {
  return loadFatbinWrapper(module, wrapper);
}

// [7] Takes one integer; nothing observable to do.
CUresult cudartInterfaceSlot7(std::size_t) { return CUDA_SUCCESS; }

// [8] Module from a fatbin header (not the wrapper).
CUresult getModuleFromCubinExt2(const void* fatbin, CUmodule* module, void*, void*, std::uint32_t) {
  if (module == nullptr || fatbin == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return cuModuleLoadFatBinary(module, fatbin);
}

const void* const kCudartInterface[13] = {
    reinterpret_cast<const void*>(tableBytes<13>),
    reinterpret_cast<const void*>(&getModuleFromCubin),
    reinterpret_cast<const void*>(&getPrimaryContext),
    reinterpret_cast<const void*>(&unknownCudartInterfaceSlot<3>),
    reinterpret_cast<const void*>(&unknownCudartInterfaceSlot<4>),
    reinterpret_cast<const void*>(&unknownCudartInterfaceSlot<5>),
    reinterpret_cast<const void*>(&getModuleFromCubinExt1),
    reinterpret_cast<const void*>(&cudartInterfaceSlot7),
    reinterpret_cast<const void*>(&getModuleFromCubinExt2),
    reinterpret_cast<const void*>(&unknownCudartInterfaceSlot<9>),
    reinterpret_cast<const void*>(&unknownCudartInterfaceSlot<10>),
    reinterpret_cast<const void*>(&unknownCudartInterfaceSlot<11>),
    reinterpret_cast<const void*>(&succeed),  // [12] load_compilers
};

// --- TOOLS_RUNTIME_CALLBACK_HOOKS -------------------------------------------------------------

// Zeroed buffers cudart asks for (tool-callback flags, as far as is known); it does not write.
std::uint64_t callbackHooksBuffer2[1024];
std::uint64_t callbackHooksBuffer6[14];

void callbackHooksSlot2(void** buffer, std::size_t* entries) {
  if (buffer != nullptr) *buffer = callbackHooksBuffer2;
  if (entries != nullptr) *entries = std::size(callbackHooksBuffer2);
}

void callbackHooksSlot6(void** buffer, std::size_t* entries) {
  if (buffer != nullptr) *buffer = callbackHooksBuffer6;
  if (entries != nullptr) *entries = std::size(callbackHooksBuffer6);
}

const void* const kToolsRuntimeCallbackHooks[7] = {
    reinterpret_cast<const void*>(tableBytes<7>),
    reinterpret_cast<const void*>(&succeed),
    reinterpret_cast<const void*>(&callbackHooksSlot2),
    reinterpret_cast<const void*>(&succeed),
    reinterpret_cast<const void*>(&succeed),
    reinterpret_cast<const void*>(&succeed),
    reinterpret_cast<const void*>(&callbackHooksSlot6),
};

// --- TOOLS_TLS ---------------------------------------------------------------------------------

// cublasLt calls slot 2 with (void* out, int id); returning 0 without writing works.
const void* const kToolsTls[4] = {
    reinterpret_cast<const void*>(tableBytes<4>), reinterpret_cast<const void*>(&succeed),
    reinterpret_cast<const void*>(&succeed), reinterpret_cast<const void*>(&succeed)};

// --- CONTEXT_LOCAL_STORAGE_INTERFACE_V0301 (no size slot) -------------------------------------

const void* const kContextLocalStorage[4] = {
    reinterpret_cast<const void*>(&clsPut), reinterpret_cast<const void*>(&clsDelete),
    reinterpret_cast<const void*>(&clsGet), reinterpret_cast<const void*>(&succeed)};

// --- CONTEXT_CHECKS ----------------------------------------------------------------------------

CUresult contextChecksSlot2(CUcontext, std::uint32_t* flags, void** extra) {
  if (flags != nullptr) *flags = 0;
  if (extra != nullptr) *extra = nullptr;
  return CUDA_SUCCESS;
}

const void* const kContextChecks[4] = {
    reinterpret_cast<const void*>(tableBytes<4>), reinterpret_cast<const void*>(&succeed),
    reinterpret_cast<const void*>(&contextChecksSlot2), reinterpret_cast<const void*>(&succeed)};

// --- 21318C60 (tools context; cuBLAS needs it to exist) ----------------------------------------

// Built on first use (thread-safe), so no static initializer can observe it half-built.
const void* const* toolsContextTable() {
  static const auto* table = [] {
    auto* slots = new const void*[95];
    slots[0] = reinterpret_cast<const void*>(95 * sizeof(void*));
    for (std::size_t i = 1; i < 95; ++i) slots[i] = reinterpret_cast<const void*>(&succeed);
    return slots;
  }();
  return table;
}

// --- lookup ------------------------------------------------------------------------------------

struct KnownTable {
  const ExportTableId* id;
  const void* const* table;
};

const KnownTable kKnownTables[] = {
    {&kCudartInterfaceId, kCudartInterface},
    {&kToolsRuntimeCallbackHooksId, kToolsRuntimeCallbackHooks},
    {&kToolsTlsId, kToolsTls},
    {&kContextLocalStorageId, kContextLocalStorage},
    {&kContextChecksId, kContextChecks},
};

void reportUnknownTableOnce(const ExportTableId& id) {
  static auto* mutex = new std::mutex;
  static auto* reported = new std::set<ExportTableId>;
  {
    std::lock_guard lock(*mutex);
    if (!reported->insert(id).second) return;
  }
  char text[40];
  std::snprintf(text, sizeof(text),
                "%02X%02X%02X%02X-%02X%02X-%02X%02X-%02X%02X-%02X%02X%02X%02X%02X%02X", id[0],
                id[1], id[2], id[3], id[4], id[5], id[6], id[7], id[8], id[9], id[10], id[11],
                id[12], id[13], id[14], id[15]);
  // Tables seen asked for on a GPU (docs/gpu-validation.md, "Second GPU run"), and what their
  // absence means for the caller.
  static const struct {
    const char* prefix;
    const char* what;
  } kSeen[] = {
      {"69A28E9F",
       "NVIDIA's own libnvidia-ml.so.1 asks for it: put gpupool's "
       "libnvidia-ml.so.1 first (gpupool run does)"},
      {"1734DC26",
       "cuBLAS asks for it (a private handshake): its FP16/BF16 tensor-core GEMMs "
       "then fail, FP32 SGEMM runs"},
      {"6E163FBE", "cuFFT asks for it; its plans fail"},
  };
  const char* what = nullptr;
  for (const auto& seen : kSeen) {
    if (std::strncmp(text, seen.prefix, 8) == 0) what = seen.what;
  }
  std::fprintf(stderr,
               "gpupool: cuGetExportTable: unknown table {%s} (returning "
               "CUDA_ERROR_INVALID_VALUE)%s%s\n",
               text, what ? ": " : "", what ? what : "");
}

}  // namespace

const void* const* findExportTable(const ExportTableId& id) {
  if (id == kIntegrityCheckId) return integrityCheckTable();
  if (id == kToolsContextId) return toolsContextTable();
  for (const KnownTable& known : kKnownTables) {
    if (*known.id == id) return known.table;
  }
  return nullptr;
}

}  // namespace gpupool::client

extern "C" __attribute__((visibility("default"))) CUresult CUDAAPI
cuGetExportTable(const void** ppExportTable, const CUuuid* pExportTableId) {
  using namespace gpupool::client;
  if (ppExportTable == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *ppExportTable = nullptr;
  if (pExportTableId == nullptr) return CUDA_ERROR_INVALID_VALUE;
  ExportTableId id;
  std::memcpy(id.data(), pExportTableId->bytes, id.size());
  const void* const* table = findExportTable(id);
  if (table == nullptr) {
    if (id != kRefusedF8cff951Id) reportUnknownTableOnce(id);
    return CUDA_ERROR_INVALID_VALUE;
  }
  *ppExportTable = table;
  return CUDA_SUCCESS;
}
