// Which (batch, tile) each block of the FlashAttention kernels takes, heaviest first. Blocks start
// roughly in blockIdx order, so with a causal mask the natural order (every tile of batch 0, then of
// batch 1, ...) leaves the long tiles of the last batches for the end: the last wave then runs a few
// long blocks on an almost idle GPU. Launching the longest tiles first (the longest-processing-time
// rule, as FlashAttention-2 does) fills the tail with short ones instead.
//   Query tiles (forward, dq): query tile i sees key tiles 0..i, so the last query tile is heaviest.
//   Key tiles (dk, dv): key tile j is seen by query tiles j..n-1, so the first key tile is heaviest.
// Without a causal mask every tile costs the same, and the natural order keeps a batch's tiles,
// which read the same keys and values, next to one another. Written once for the kernels
// (cuda/flash_attention.cu) and the CPU test that checks the order is a permutation.
#pragma once
#include <cstdint>

#include "kernels/host_device.h"

namespace mdl {

enum class AttentionTiles { Query, Key };

struct AttentionTile {
  int64_t batch, tile;
};

// block in [0, batches * tiles).
MDL_HOST_DEVICE AttentionTile attention_tile(int64_t block, int64_t batches, int64_t tiles, bool causal,
                                             AttentionTiles kind) {
  if (!causal) return {block / tiles, block % tiles};
  const int64_t rank = block / batches;  // 0: the heaviest tile
  return {block % batches, kind == AttentionTiles::Query ? tiles - 1 - rank : rank};
}

}  // namespace mdl
