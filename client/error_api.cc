// cuGetErrorName / cuGetErrorString, answered locally from a table generated from cuda.h.
#include "driver_export.h"

namespace {

struct ErrorEntry {
  int value;
  const char* name;
  const char* description;
};

constexpr ErrorEntry kErrors[] = {
#include "error_table.inc"
};

const ErrorEntry* find(CUresult error) {
  for (const auto& e : kErrors) {
    if (e.value == static_cast<int>(error)) return &e;
  }
  return nullptr;
}

}  // namespace

GPUPOOL_DRIVER_API CUresult cuGetErrorName(CUresult error, const char** name) {
  if (!name) return CUDA_ERROR_INVALID_VALUE;
  const ErrorEntry* e = find(error);
  if (!e) {
    *name = nullptr;
    return CUDA_ERROR_INVALID_VALUE;
  }
  *name = e->name;
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuGetErrorString(CUresult error, const char** text) {
  if (!text) return CUDA_ERROR_INVALID_VALUE;
  const ErrorEntry* e = find(error);
  if (!e) {
    *text = nullptr;
    return CUDA_ERROR_INVALID_VALUE;
  }
  *text = e->description;
  return CUDA_SUCCESS;
}
