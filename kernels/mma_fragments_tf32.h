// Which elements of a matrix each lane of a warp holds for mma.sync.m16n8k8 with tf32 operands and
// f32 accumulators, as the PTX ISA defines them; and, built on them, the elements the f32
// FlashAttention kernels on 3xTF32 (cuda/flash_forward_tf32.cuh, cuda/flash_backward_tf32.cuh)
// load from shared memory with plain 32-bit loads, or take from a product's accumulators.
//
// In the ISA's words, with g = lane / 4 and t = lane % 4 (kernels/mma_fragments.h):
//   A (16 x 8, row-major):  element i < 4 at row g + 8 [i odd], col t + 4 [i >= 2]
//   B (8 x 8, k x n):       element i < 2 at row t + 4 i, col g
//   C (16 x 8, f32):        element i < 4 at row g + 8 [i >= 2], col 2t + i % 2 (as for m16n8k16)
// One element per 32-bit register.
//
// An accumulator becomes an A operand without a shuffle: C gives a lane columns 2t, 2t + 1 of each
// 8-column n-tile, A wants k-columns t, t + 4. The order of the k index in a dot product is free, so
// k-index t stands for column 2t and t + 4 for 2t + 1, and the B operand of that product reads its
// rows in the same order. Written once, for the kernels and for the CPU test
// (tests/kernels/test_mma_fragments_tf32.cpp) that emulates a warp with these maps.
#pragma once
#include "kernels/mma_fragments.h"

namespace mdl::mma::tf32 {

// ---- the ISA's layouts ---------------------------------------------------------------------------

MDL_HOST_DEVICE RowCol a_element(int lane, int i) {
  return {group_of(lane) + (i & 1) * 8, thread_in_group(lane) + (i >> 1) * 4};
}
MDL_HOST_DEVICE RowCol b_element(int lane, int i) { return {thread_in_group(lane) + i * 4, group_of(lane)}; }
MDL_HOST_DEVICE RowCol c_element(int lane, int i) { return mma::c_element(lane, i); }

// ---- the FlashAttention kernels' fragments (a warp owns 16 rows) ----------------------------------

// A from the warp's 16 rows of a row-major tile (Q in S = Q K^T; K, V, dO likewise in the backward),
// k-step kk (columns 8kk..8kk+7): element i is (row, col) of the warp's (16, D) rows.
MDL_HOST_DEVICE RowCol rows_a_element(int lane, int kk, int i) {
  const RowCol e = a_element(lane, i);
  return {e.row, kk * 8 + e.col};
}

// B of a product with a tile's transpose, B[e][j] = x[j][e] (K in S = Q K^T): the 8 rows from row0
// at k-step kk. Element i is (row, col) of the (64, D) tile.
MDL_HOST_DEVICE RowCol rows_t_b_element(int lane, int row0, int kk, int i) {
  const RowCol e = b_element(lane, i);
  return {row0 + e.col, kk * 8 + e.row};
}

// The k index an accumulator's column stands for when the accumulator is an A operand: column 2t + h
// of an n-tile is k-index t + 4h.
MDL_HOST_DEVICE int k_of_column(int col) { return (col >> 1) + (col & 1) * 4; }
MDL_HOST_DEVICE int column_of_k(int k) { return (k & 3) * 2 + (k >> 2); }

// A's element i taken from accumulator element acc_of_a(i) of the same n-tile: (g, t) <- (g, 2t),
// (g + 8, t) <- (g + 8, 2t), (g, t + 4) <- (g, 2t + 1), (g + 8, t + 4) <- (g + 8, 2t + 1).
MDL_HOST_DEVICE int acc_of_a(int i) { return (i & 1) * 2 + (i >> 1); }

// B of a product with a tile itself, B[j][e] = x[j][e] (V in O += P V), for the k-step of the
// accumulators' n-tile at row0, its rows in the accumulators' order: B's k-index t + 4h is row
// row0 + 2t + h. Element i is (row, col) of the (64, D) tile, columns col0..col0+7.
MDL_HOST_DEVICE RowCol rows_b_element(int lane, int row0, int col0, int i) {
  const RowCol e = b_element(lane, i);
  return {row0 + column_of_k(e.row), col0 + e.col};
}

}  // namespace mdl::mma::tf32
