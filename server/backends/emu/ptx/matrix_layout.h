// Fragment layouts of the warp-wide matrix instructions: which lane holds which element of which
// matrix, in one place. mma.sync, ldmatrix, stmatrix and movmatrix follow the PTX ISA's figures
// ("Matrix Fragments for mma.m*n*k*"); the ISA leaves wmma's fragment layout unspecified, so the
// emu uses its own (docs/architecture.md), consistent across wmma.load, wmma.mma and wmma.store.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ir.h"

namespace gpupool::ptx {

struct MatrixPosition {
  uint16_t row = 0, col = 0;
};

unsigned matrixTypeBits(MatrixType t);
// Width of the registers holding fragments of type t: 64 for .f64, else 32.
unsigned matrixRegisterBits(MatrixType t);
MatrixType fragmentType(const MatrixInstr& in, MatrixUse use);
// Rows and columns of the whole matrix: A is m x k, B is k x n, C and D are m x n.
unsigned fragmentRows(const MatrixInstr& in, MatrixUse use);
unsigned fragmentCols(const MatrixInstr& in, MatrixUse use);
// Elements each lane holds, and the registers they take.
unsigned fragmentElements(const MatrixInstr& in, MatrixUse use);
unsigned fragmentRegisters(const MatrixInstr& in, MatrixUse use);
// The matrix element that element `element` of lane `lane`'s fragment holds; element e sits in
// register e / (elements per register), at bit (e % per register) * bits.
MatrixPosition fragmentPosition(const MatrixInstr& in, MatrixUse use, unsigned lane,
                                unsigned element);

// Decodes `opcode` (mma.sync..., wmma..., ldmatrix..., stmatrix..., movmatrix...) into *out.
// Returns "" on success; otherwise the reason, with *invalid true for PTX the ISA rejects and
// false for valid PTX the emu does not execute.
std::string decodeMatrixOpcode(std::string_view opcode, MatrixInstr* out, bool* invalid);

}  // namespace gpupool::ptx
