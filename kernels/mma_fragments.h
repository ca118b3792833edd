// Which elements of a matrix each lane of a warp holds for the tensor-core instruction
// mma.sync.m16n8k16 (f16/bf16 operands, f32 accumulators) and for ldmatrix, which fills those
// registers from shared memory, as the PTX ISA defines them; and, built on them, the addresses the
// register-tiled FlashAttention forward (cuda/flash_forward_mma.cuh) hands to ldmatrix.
//
// In the ISA's words, with g = lane / 4 (the "group") and t = lane % 4 (the thread in the group):
//   A (16 x 16, row-major):  element i < 8 at row g + 8 [i in {2,3,6,7}], col 2t + i % 2 + 8 [i >= 4]
//   B (16 x 8, k x n):       element i < 4 at row 2t + i % 2 + 8 [i >= 2], col g
//   C (16 x 8, f32):         element i < 4 at row g + 8 [i >= 2], col 2t + i % 2
// Two consecutive 16-bit elements share a 32-bit register, the lower index in the low half.
// ldmatrix.x4 loads four 8 x 8 matrices of 16-bit elements: lane l gives the address of row l % 8 of
// matrix l / 8, and register m of every lane receives matrix m at (row l / 4, cols 2 (l % 4) + 0, 1),
// or with .trans the transposed pair (rows 2 (l % 4) + 0, 1, col l / 4).
//
// Written once, for the kernel and for the CPU test (tests/kernels/test_mma_fragments.cpp) that
// emulates a warp with these maps and checks the kernel's products against plain matmuls.
#pragma once
#include "kernels/host_device.h"

namespace mdl::mma {

struct RowCol {
  int row, col;
};

MDL_HOST_DEVICE int group_of(int lane) { return lane >> 2; }
MDL_HOST_DEVICE int thread_in_group(int lane) { return lane & 3; }

// ---- the ISA's layouts ---------------------------------------------------------------------------

MDL_HOST_DEVICE RowCol a_element(int lane, int i) {
  return {group_of(lane) + (i >> 1 & 1) * 8, thread_in_group(lane) * 2 + (i & 1) + (i >> 2) * 8};
}
MDL_HOST_DEVICE RowCol b_element(int lane, int i) {
  return {thread_in_group(lane) * 2 + (i & 1) + (i >> 1) * 8, group_of(lane)};
}
MDL_HOST_DEVICE RowCol c_element(int lane, int i) {
  return {group_of(lane) + (i >> 1) * 8, thread_in_group(lane) * 2 + (i & 1)};
}

// The row of an 8 x 8 matrix that `lane` addresses for ldmatrix.x4, and which of the four.
MDL_HOST_DEVICE int ldmatrix_matrix(int lane) { return lane >> 3; }
MDL_HOST_DEVICE int ldmatrix_row(int lane) { return lane & 7; }
// Element h < 2 of the register that `lane` receives from one 8 x 8 matrix.
MDL_HOST_DEVICE RowCol ldmatrix_element(int lane, int h, bool trans) {
  return trans ? RowCol{thread_in_group(lane) * 2 + h, group_of(lane)}
               : RowCol{group_of(lane), thread_in_group(lane) * 2 + h};
}

// ---- the FlashAttention forward's fragments (a warp owns 16 query rows) ---------------------------

// Q as the A operand of S = Q K^T, the 16 x 16 block at column kk * 16 of the warp's rows: the
// four matrices are (rows 0-7, cols 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15), the order of
// A's four registers. Returns the (row, col) in the warp's (16, D) rows whose address `lane` gives.
MDL_HOST_DEVICE RowCol q_fragment_address(int lane, int kk) {
  const int m = ldmatrix_matrix(lane);
  return {ldmatrix_row(lane) + (m & 1) * 8, kk * 16 + (m >> 1) * 8};
}

// K as the B operand of S = Q K^T, where B[e][j] = K[j][e]: the 16 keys from key0 (two n-tiles of
// 8) over columns kk * 16 to + 16. Registers 0, 1 are the B fragment of keys key0..+8, registers
// 2, 3 that of key0 + 8..+16. Returns the (key, col) of the (64, D) key tile that `lane` addresses.
MDL_HOST_DEVICE RowCol k_fragment_address(int lane, int key0, int kk) {
  const int m = ldmatrix_matrix(lane);
  return {key0 + ldmatrix_row(lane) + (m >> 1) * 8, kk * 16 + (m & 1) * 8};
}

// V as the B operand of O += P V, where B[j][e] = V[j][e], loaded with .trans: keys kk * 16 to + 16
// and the 16 columns from col0 (two n-tiles of 8). Registers 0, 1 are the B fragment of columns
// col0..+8, registers 2, 3 that of col0 + 8..+16. Returns the (key, col) of the (64, D) value tile.
MDL_HOST_DEVICE RowCol v_fragment_address(int lane, int kk, int col0) {
  const int m = ldmatrix_matrix(lane);
  return {kk * 16 + ldmatrix_row(lane) + (m & 1) * 8, col0 + (m >> 1) * 8};
}

// P as the A operand of O += P V, straight from the accumulators of S: for keys kk * 16 to + 16, A's
// register r (elements 2r, 2r + 1) is accumulator pair `pair` (elements pair, pair + 1) of the
// n-tile 2 kk + ntile of S.
struct AccumulatorPair {
  int ntile, pair;
};
MDL_HOST_DEVICE AccumulatorPair p_register_source(int r) { return {r >> 1, (r & 1) * 2}; }

}  // namespace mdl::mma
