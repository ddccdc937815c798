// Fast steps: routines specialized, once at module load, for the instruction forms that make up
// most of what kernels execute (integer and f32 arithmetic, comparisons, moves, scalar and vector
// loads and stores) with their types and operand kinds fixed. Each does exactly what the generic
// path (BlockRunner::execute, instruction_semantics.cc) does for the lanes it is given; a form
// with anything unusual (a flag, a rounding mode, a negated or special operand) gets none and
// runs the generic path.
#pragma once

#include "ir.h"

namespace gpupool::ptx::execution {

// The routine for `in`'s form, or nullptr.
FastStep chooseFastStep(const Instr& in);

}  // namespace gpupool::ptx::execution
