// How the GPU's batch norm spreads one channel's values over many blocks, written once for the
// kernels (cuda/norm.cu) and the CPU test that checks the walk visits each value once.
// x is (N, C, S); channel c holds the M = N * S values at (n * C + c) * S + s. They are split into
// P pieces of `piece` consecutive positions j = n * S + s, and block (c, p) of a (C, P) grid sums
// piece p. Inside a piece each thread steps by the block size, carrying (n, s) forward with adds
// instead of dividing every position by S. A pass that loads V values at once splits and walks
// the channel's vectors the same way, as if S were S / V. Rows of channels (S == 1) are split by
// row_vector_split below.
#pragma once
#include <cstdint>

#include "kernels/host_device.h"

namespace mdl {

struct ChannelSplit {
  int64_t P, piece;
};

// Enough pieces for about `target_blocks` blocks over the C channels, each piece at least
// `min_piece` values (so a block's threads have several each); at least one piece.
inline ChannelSplit channel_split(int64_t M, int64_t C, int64_t target_blocks, int64_t min_piece) {
  int64_t P = C > 0 ? target_blocks / C : 1;
  const int64_t most = M / min_piece;
  if (P > most) P = most;
  if (P < 1) P = 1;
  return {P, (M + P - 1) / P};
}

// The split of a statistics pass that loads V consecutive values of a channel at once (S % V == 0):
// positions, pieces and the walk count vectors, M / V of them per channel, each of a block's
// `block` threads with at least one vector and 4 values in a piece of its own.
inline ChannelSplit vector_channel_split(int64_t M, int64_t C, int V, int64_t target_blocks, int64_t block) {
  const int64_t min_piece = 4 * block / V > block ? 4 * block / V : block;
  return channel_split(M / V, C, target_blocks, min_piece);
}

// The positions j = start, start + step, ... of channel c, as element offsets into x.
struct ChannelWalk {
  int64_t n, s, dn, ds, S, C, c;
  MDL_HOST_DEVICE ChannelWalk(int64_t start, int64_t step, int64_t S_, int64_t C_, int64_t c_)
      : n(start / S_), s(start % S_), dn(step / S_), ds(step % S_), S(S_), C(C_), c(c_) {}
  MDL_HOST_DEVICE int64_t offset() const { return (n * C + c) * S + s; }
  MDL_HOST_DEVICE void advance() {
    n += dn;
    s += ds;
    if (s >= S) s -= S, ++n;
  }
};

// Rows of channels (S == 1: x is (M, C), a channels-last activation) read V consecutive channels at
// once (C % V == 0): a block of `block` threads covers `group` of a row's G = C / V channel vectors
// (all of them, or `block` where G is larger) and `rows` rows at a time. Thread t takes vector
// t % group of row t / group of each step; threads past rows * group idle. Blocks (g, p) of a
// (groups, P) grid take vectors g * group, g * group + 1, ... (those below G) of piece p of the M
// rows, and each thread has at least `round` rows of a full piece.
struct RowVectorSplit {
  int64_t group, rows, groups;
  ChannelSplit sp;
  // The vector (< G where the thread has one) and first row offset of thread t of block column g.
  MDL_HOST_DEVICE int64_t vector_of(int64_t g, int64_t t) const { return g * group + t % group; }
  MDL_HOST_DEVICE int64_t row_of(int64_t t) const { return t / group; }
};
inline RowVectorSplit row_vector_split(int64_t M, int64_t C, int V, int64_t target_blocks, int64_t block,
                                       int64_t round) {
  const int64_t G = C / V > 0 ? C / V : 1, group = G < block ? G : block;
  const int64_t rows = block / group, groups = (G + group - 1) / group;
  return {group, rows, groups, channel_split(M, groups, target_blocks, round * rows)};
}

}  // namespace mdl
