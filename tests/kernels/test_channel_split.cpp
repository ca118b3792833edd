// The split the GPU's batch norm uses (kernels/channel_split.h), run on the CPU as its grid would:
// every block (c, p) and thread t walking its piece must visit each value of channel c once, and
// nothing else, for channels narrower and wider than a block, one value wide, and past a piece;
// one value per load, and V values per load where S % V == 0; and rows of channels (S == 1) by
// vectors of V channels, each (row, vector) once.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/channel_split.h"

using namespace mdl;

TEST_CASE("channel_split and ChannelWalk visit each value of a channel exactly once, by values and by vectors") {
  constexpr int64_t kBlock = 256;
  struct Case {
    int64_t N, C, S;
  };
  for (const Case& k :
       {Case{1, 1, 1}, Case{3, 2, 1}, Case{2, 3, 16}, Case{128, 64, 16}, Case{7, 5, 1023}, Case{64, 8, 1024},
        Case{5, 600, 9}, Case{1, 2, 70000}, Case{300, 3, 257}, Case{9, 3, 8}, Case{33, 2, 24}})
    // V values per load (16 bytes of f64, f32, f16): the kernel's vector pass where S % V == 0.
    for (int V : {1, 2, 4, 8}) {
      if (k.S % V != 0) continue;
      const int64_t M = k.N * k.S, Mv = M / V, Sv = k.S / V;
      const ChannelSplit sp = vector_channel_split(M, k.C, V, 1024, kBlock);
      const std::string what = "N " + std::to_string(k.N) + " C " + std::to_string(k.C) + " S " + std::to_string(k.S) +
                               " V " + std::to_string(V);
      CHECK_MESSAGE(sp.P >= 1, what);
      CHECK_MESSAGE(sp.P * sp.piece >= Mv, what);
      CHECK_MESSAGE((sp.P == 1 || (sp.piece >= kBlock && sp.piece * V >= 4 * kBlock)), what, ": piece ", sp.piece);
      if (V == 1) CHECK_MESSAGE(sp.P == channel_split(M, k.C, 1024, 4 * kBlock).P, what);
      std::vector<int> seen(size_t(k.N * k.C * k.S), 0);
      int64_t misplaced = 0;  // offsets other than the division's
      for (int64_t c = 0; c < k.C; ++c)
        for (int64_t p = 0; p < sp.P; ++p) {
          const int64_t j0 = p * sp.piece, j1 = std::min(Mv, j0 + sp.piece);
          for (int64_t t = 0; t < kBlock && j0 + t < j1; ++t) {
            ChannelWalk w(j0 + t, kBlock, Sv, k.C, c);
            for (int64_t j = j0 + t; j < j1; j += kBlock, w.advance()) {
              const int64_t off = w.offset();  // in vectors
              if (off != ((j / Sv) * k.C + c) * Sv + j % Sv || off < 0 || (off + 1) * V > int64_t(seen.size())) {
                ++misplaced;
                continue;
              }
              for (int e = 0; e < V; ++e) ++seen[size_t(off * V + e)];
            }
          }
        }
      int64_t wrong = 0;
      for (int v : seen) wrong += v != 1;
      CHECK_MESSAGE(misplaced == 0, what, ": ", misplaced, " positions walked to the wrong offset");
      CHECK_MESSAGE(wrong == 0, what, ": ", wrong, " values visited other than once");
    }
}

TEST_CASE("channel_split: few wide channels get many pieces, many narrow ones a single piece") {
  CHECK(channel_split(128 * 1024, 64, 1024, 1024).P == 16);
  CHECK(channel_split(128 * 16, 512, 1024, 1024).P == 2);
  CHECK(channel_split(100, 3, 1024, 1024).P == 1);
  CHECK(channel_split(0, 3, 1024, 1024).P == 1);
  CHECK(channel_split(5000, 0, 1024, 1024).P >= 1);
}

TEST_CASE("row_vector_split covers each vector of V channels of each row exactly once") {
  constexpr int64_t kBlock = 256, kRound = 4;
  struct Case {
    int64_t M, C;
  };
  for (const Case& k : {Case{1, 8}, Case{693, 24}, Case{161600, 64}, Case{100, 40}, Case{16, 2056}, Case{5, 4096},
                        Case{3000, 8}, Case{7, 2048}})
    for (int V : {2, 4, 8}) {
      if (k.C % V != 0) continue;
      const int64_t G = k.C / V;
      const RowVectorSplit sp = row_vector_split(k.M, k.C, V, 1024, kBlock, kRound);
      const std::string what = "M " + std::to_string(k.M) + " C " + std::to_string(k.C) + " V " + std::to_string(V);
      CHECK_MESSAGE(sp.group * sp.rows <= kBlock, what);
      CHECK_MESSAGE(sp.groups * sp.group >= G, what);
      CHECK_MESSAGE((sp.sp.P == 1 || sp.sp.piece >= kRound * sp.rows), what, ": piece ", sp.sp.piece);
      std::vector<int> seen(size_t(k.M * G), 0);
      for (int64_t g = 0; g < sp.groups; ++g)
        for (int64_t p = 0; p < sp.sp.P; ++p) {
          const int64_t j0 = p * sp.sp.piece, j1 = std::min(k.M, j0 + sp.sp.piece);
          for (int64_t t = 0; t < kBlock; ++t) {
            const int64_t v = sp.vector_of(g, t);
            if (sp.row_of(t) >= sp.rows || v >= G) continue;
            for (int64_t j = j0 + sp.row_of(t); j < j1; j += sp.rows) ++seen[size_t(j * G + v)];
          }
        }
      int64_t wrong = 0;
      for (int n : seen) wrong += n != 1;
      CHECK_MESSAGE(wrong == 0, what, ": ", wrong, " (row, vector) pairs visited other than once");
    }
}
