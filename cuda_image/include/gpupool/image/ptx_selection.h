// Choosing the PTX a device should JIT from a module image, with the driver's error codes.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "common/status.h"
#include "gpupool/image/fatbin.h"

namespace gpupool::image {

// The best PTX entry (pointing into `fatbin`) for a device of compute capability
// `deviceCapability` (major*10+minor, e.g. 80): the highest compute_X with X <= deviceCapability.
// CUDA_ERROR_NO_BINARY_FOR_GPU, with a message listing the image's archs, when the image holds
// SASS only, or PTX only for newer architectures.
Result<const FatbinEntry*> selectPtx(const Fatbin& fatbin, int deviceCapability);

struct PtxText {
  std::string ptx;    // the text, without terminating NUL
  uint32_t arch = 0;  // compute_X of the chosen entry; 0 for a bare PTX image
};

// The PTX to load for a received module image of any kind (what imageBytes() shipped):
//  - PTX text: itself (CUDA_ERROR_INVALID_PTX if it is not NUL-terminated inside `bytes`);
//  - fatbin: selectPtx() and the decompressed payload;
//  - ELF cubin: CUDA_ERROR_NO_BINARY_FOR_GPU (SASS only, nothing to interpret);
//  - anything else or a malformed fatbin: CUDA_ERROR_INVALID_IMAGE.
Result<PtxText> ptxForDevice(std::span<const uint8_t> bytes, int deviceCapability);

}  // namespace gpupool::image
