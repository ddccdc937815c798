// Driver API counterpart of self_check.h, for programs that call cu* functions directly.
#pragma once

#include <cuda.h>

#include "self_check.h"

inline const char* cuErrorName(CUresult status) {
  const char* name = nullptr;
  return cuGetErrorName(status, &name) == CUDA_SUCCESS && name != nullptr ? name : "unknown";
}

// Fails unless a driver API call returns CUDA_SUCCESS.
#define CHECK_CU(call)                                                  \
  do {                                                                  \
    const CUresult check_cu_status_ = (call);                           \
    if (check_cu_status_ != CUDA_SUCCESS) {                             \
      FAIL("%s returned %s (%d)", #call, cuErrorName(check_cu_status_), \
           static_cast<int>(check_cu_status_));                         \
    }                                                                   \
  } while (0)

// Makes device 0's primary context current through the runtime, as cudart programs start, and
// returns its device.
inline CUdevice usePrimaryContext() {
  CHECK_CUDA(cudaSetDevice(0));
  CHECK_CUDA(cudaFree(nullptr));  // creates and makes current the primary context
  CUdevice device;
  CHECK_CU(cuCtxGetDevice(&device));
  return device;
}

// Fails unless a driver API call returns exactly `expected`.
inline void expectError(CUresult status, CUresult expected, const char* call) {
  CHECK(status == expected, "%s returned %s, expected %s", call, cuErrorName(status),
        cuErrorName(expected));
}
