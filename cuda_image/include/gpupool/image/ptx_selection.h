// Choosing the PTX a device should JIT from a module image, with the driver's error codes.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <span>
#include <string>

#include "gpupool/image/fatbin.h"

namespace gpupool::image {

struct PtxSelection {
  CUresult status = CUDA_ERROR_NO_BINARY_FOR_GPU;
  const FatbinEntry* entry = nullptr;  // into the Fatbin passed to selectPtx; null on failure
  std::string message;                 // why nothing was selected (lists the image's archs)
};

// The best PTX entry for a device of compute capability `deviceCapability` (major*10+minor, e.g.
// 80): the highest compute_X with X <= deviceCapability. CUDA_ERROR_NO_BINARY_FOR_GPU when the
// image holds SASS only, or PTX only for newer architectures.
PtxSelection selectPtx(const Fatbin& fatbin, int deviceCapability);

struct PtxText {
  CUresult status = CUDA_ERROR_INVALID_IMAGE;
  std::string ptx;      // the text, without terminating NUL, when status is CUDA_SUCCESS
  uint32_t arch = 0;    // compute_X of the chosen entry; 0 for a bare PTX image
  std::string message;  // what went wrong otherwise
};

// The PTX to load for a received module image of any kind (what imageBytes() shipped):
//  - PTX text: itself (CUDA_ERROR_INVALID_PTX if it is not NUL-terminated inside `bytes`);
//  - fatbin: selectPtx() and the decompressed payload;
//  - ELF cubin: CUDA_ERROR_NO_BINARY_FOR_GPU (SASS only, nothing to interpret);
//  - anything else or a malformed fatbin: CUDA_ERROR_INVALID_IMAGE.
PtxText ptxForDevice(std::span<const uint8_t> bytes, int deviceCapability);

}  // namespace gpupool::image
