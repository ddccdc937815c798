// cuGetProcAddress: maps (name, CUDA version, stream flags) to one of libcuda's exported ABIs.
#pragma once

#include <cuda.h>

#include <span>
#include <string_view>

namespace gpupool::client {

// One ABI breakpoint: from `version` on, `name` requested in the given stream class resolves to
// the exported function `symbol` at `function`.
struct ProcAddressEntry {
  const char* name;      // base name as applications ask for it, e.g. "cuMemAlloc"
  int version;           // first CUDA version (1000*major + 10*minor) that gets this ABI
  bool perThreadStream;  // true: the CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM class
  void* function;        // the exported symbol (so strong definitions win over stubs)
  const char* symbol;    // its exported name, e.g. "cuMemAlloc_v2"
};

// The generated table (client/gen/generate_driver_api.py), sorted by (name, perThreadStream,
// version) in byte order.
std::span<const ProcAddressEntry> procAddressTable();

struct ProcAddressResult {
  CUresult result;                        // CUDA_SUCCESS or CUDA_ERROR_NOT_FOUND
  const ProcAddressEntry* entry;          // chosen entry; nullptr unless result is CUDA_SUCCESS
  CUdriverProcAddressQueryResult status;  // what cuGetProcAddress_v2 reports in symbolStatus
};

// The entry with the largest version <= cudaVersion in the class selected by flags
// (CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM selects per-thread; DEFAULT and LEGACY_STREAM
// select legacy, as for an application built without per-thread default stream).
// Unknown or empty name: NOT_FOUND / SYMBOL_NOT_FOUND. Known name but every ABI is newer than
// cudaVersion: NOT_FOUND / VERSION_NOT_SUFFICIENT.
ProcAddressResult lookupProcAddress(std::string_view name, int cudaVersion, cuuint64_t flags);

}  // namespace gpupool::client
