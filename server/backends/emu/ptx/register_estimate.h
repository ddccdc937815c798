// An estimate of the registers ptxas would allocate per thread for a function, from a liveness
// pass over its PTX (docs/architecture.md, "Kernel resources the emu reports"). PTX names an
// unlimited number of virtual registers; what limits occupancy on a GPU is how many 32-bit
// registers are live at once after allocation, which this approximates.
#pragma once

#include <cstdint>

#include "ir.h"

namespace gpupool::ptx {

// Bounds of the estimate: ptxas never reports fewer than this for a kernel that does anything
// (its ABI reserves some), and the architecture allows at most 255 per thread.
inline constexpr uint32_t kMinEstimatedRegisters = 16;
inline constexpr uint32_t kMaxRegistersPerThread = 255;
// Register counts are estimated in steps of this many, the per-thread share of the per-warp
// allocation unit (256 registers per warp).
inline constexpr uint32_t kRegisterEstimateGranularity = 8;

// The most 32-bit register units live at any one instruction of `function` (predicates are not
// general registers and do not count; 64-bit registers count twice).
uint32_t maxLiveRegisterUnits(const ModuleImage& image, uint32_t function);

// The count cuFuncGetAttribute(NUM_REGS) reports for a kernel whose reachable functions have at
// most `liveUnits` live units: rounded up to the granularity, clamped to the bounds above.
uint32_t estimatedRegisters(uint32_t liveUnits);

}  // namespace gpupool::ptx
