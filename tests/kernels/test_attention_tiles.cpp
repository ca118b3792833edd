// The FlashAttention kernels' block order (kernels/attention_tiles.h): every (batch, tile) exactly
// once, the natural order without a causal mask, the heaviest tiles first with one, and a shorter
// schedule than the natural order on a model of the GPU's block scheduler.
#include "kernels/attention_tiles.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <queue>
#include <vector>

using namespace mdl;

namespace {

// The key tiles a block's tile computes with under a causal mask (square L = S): query tile i sees
// tiles 0..i; key tile j is seen by query tiles j..n-1.
int64_t causal_work(AttentionTiles kind, int64_t tile, int64_t tiles) {
  return kind == AttentionTiles::Query ? tile + 1 : tiles - tile;
}

// Blocks handed out in blockIdx order to whichever of `slots` frees first: the time the last ends.
int64_t makespan(const std::vector<int64_t>& work, int64_t slots) {
  std::priority_queue<int64_t, std::vector<int64_t>, std::greater<>> free_at;
  for (int64_t s = 0; s < slots; ++s) free_at.push(0);
  int64_t end = 0;
  for (int64_t w : work) {
    const int64_t start = free_at.top();
    free_at.pop();
    free_at.push(start + w);
    end = std::max(end, start + w);
  }
  return end;
}

}  // namespace

TEST_CASE("attention tiles: every (batch, tile) once, natural order without a causal mask, heaviest first with one") {
  const int64_t shapes[][2] = {{1, 1}, {1, 9}, {7, 1}, {3, 5}, {192, 4}, {5, 33}};
  for (const auto& [batches, tiles] : shapes)
    for (bool causal : {false, true})
      for (AttentionTiles kind : {AttentionTiles::Query, AttentionTiles::Key}) {
        CAPTURE(batches);
        CAPTURE(tiles);
        CAPTURE(causal);
        CAPTURE(int(kind));
        std::vector<int> seen(size_t(batches * tiles), 0);
        int64_t last_work = INT64_MAX;
        bool ordered = true, natural = true;
        for (int64_t block = 0; block < batches * tiles; ++block) {
          const AttentionTile t = attention_tile(block, batches, tiles, causal, kind);
          REQUIRE(t.batch >= 0);
          REQUIRE(t.batch < batches);
          REQUIRE(t.tile >= 0);
          REQUIRE(t.tile < tiles);
          ++seen[size_t(t.batch * tiles + t.tile)];
          natural &= t.batch == block / tiles && t.tile == block % tiles;
          const int64_t w = causal_work(kind, t.tile, tiles);
          ordered &= w <= last_work;
          last_work = w;
        }
        CHECK(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
        if (causal) CHECK(ordered);
        else CHECK(natural);
      }
}

TEST_CASE("attention tiles: heaviest first ends a causal launch sooner than the natural order (scheduler model)") {
  // B 32 x H 6 heads at T = 256 (4 tiles of 64), 2 blocks on each of an H100's 132 SMs: the natural
  // order leaves the 4-tile blocks of the last heads for a tail the heaviest-first order does not have.
  const int64_t batches = 192, tiles = 4, slots = 264;
  for (AttentionTiles kind : {AttentionTiles::Query, AttentionTiles::Key}) {
    CAPTURE(int(kind));
    std::vector<int64_t> natural, heavy_first;
    for (int64_t block = 0; block < batches * tiles; ++block) {
      natural.push_back(causal_work(kind, block % tiles, tiles));
      heavy_first.push_back(causal_work(kind, attention_tile(block, batches, tiles, true, kind).tile, tiles));
    }
    const int64_t total = batches * tiles * (tiles + 1) / 2;
    CHECK(makespan(heavy_first, slots) < makespan(natural, slots));
    CHECK(makespan(heavy_first, slots) <= (total + slots - 1) / slots + tiles);  // within one tile row of perfect
  }
}
