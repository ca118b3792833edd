// FlashAttention-2 on the CPU, written as the CUDA kernels in cuda/flash_attention.cu run it, so
// a CPU test checks their math: 64 query rows against streamed tiles of 64 keys, an online softmax
// (running max and sum) in f32, the logsumexp kept; the backward recomputes each tile's P from the
// logsumexp, dk and dv per key tile (queries streamed), dq per query tile (keys streamed).
// `round_operand` rounds what the tensor cores would take in the operand type (P and dS); the
// identity gives plain f32. One (batch, head) matrix, row-major; mask is (L, S), empty for none.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace mdl::test::flash {

constexpr int64_t kTile = 64;  // query rows per tile and keys per tile, as on the GPU

struct Problem {
  int64_t L, S, E, Ev;
  std::vector<float> q, k, v;  // (L, E), (S, E), (S, Ev)
  std::vector<char> mask;      // (L, S) true = attend, or empty
  bool causal = false;
  float scale = 1;
  float (*round_operand)(float) = [](float x) { return x; };

  bool visible(int64_t i, int64_t j) const {
    if (i >= L || j >= S || (causal && j > i)) return false;
    return mask.empty() || mask[size_t(i * S + j)];
  }
  // Keys [0, key_end(i0)) are the only ones query tile i0 may see.
  int64_t key_end(int64_t i0) const { return causal ? std::min(S, i0 + kTile) : S; }
  // Query tiles before query_begin(j0) see nothing of key tile j0.
  int64_t query_begin(int64_t j0) const { return causal ? j0 / kTile * kTile : 0; }
  float score(int64_t i, int64_t j) const {
    float s = 0;
    for (int64_t e = 0; e < E; ++e) s += q[size_t(i * E + e)] * k[size_t(j * E + e)];
    return s * scale;
  }
};

struct Forward {
  std::vector<float> out, lse;  // (L, Ev), (L)
};

// ---- forward: per query tile, stream key tiles with a running max m and sum l ----------------------
inline Forward forward(const Problem& p) {
  const float inf = std::numeric_limits<float>::infinity();
  Forward f{std::vector<float>(size_t(p.L * p.Ev)), std::vector<float>(size_t(p.L))};
  for (int64_t i0 = 0; i0 < p.L; i0 += kTile) {
    const int64_t rows = std::min(kTile, p.L - i0);
    std::vector<float> m(size_t(rows), -inf), l(size_t(rows), 0), acc(size_t(rows * p.Ev), 0);
    for (int64_t j0 = 0; j0 < p.key_end(i0); j0 += kTile) {
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t i = i0 + r;
        float s[kTile], mx = m[size_t(r)];
        for (int64_t c = 0; c < kTile; ++c) {
          s[c] = p.visible(i, j0 + c) ? p.score(i, j0 + c) : -inf;
          mx = std::max(mx, s[c]);
        }
        if (mx == -inf) continue;                         // nothing visible yet
        const float alpha = std::exp(m[size_t(r)] - mx);  // 0 on the first visible tile
        float sum = 0;
        for (int64_t c = 0; c < kTile; ++c) {
          s[c] = s[c] == -inf ? 0.0f : p.round_operand(std::exp(s[c] - mx));
          sum += s[c];
        }
        l[size_t(r)] = l[size_t(r)] * alpha + sum;
        m[size_t(r)] = mx;
        // acc (1, Ev) = acc * alpha + P (1, tile) @ v (tile, Ev)
        for (int64_t e = 0; e < p.Ev; ++e) {
          float a = 0;
          for (int64_t c = 0; c < kTile && j0 + c < p.S; ++c) a += s[c] * p.v[size_t((j0 + c) * p.Ev + e)];
          acc[size_t(r * p.Ev + e)] = acc[size_t(r * p.Ev + e)] * alpha + a;
        }
      }
    }
    for (int64_t r = 0; r < rows; ++r) {
      const bool none = m[size_t(r)] == -inf;  // a row that sees no key: zeros, lse = +inf
      for (int64_t e = 0; e < p.Ev; ++e)
        f.out[size_t((i0 + r) * p.Ev + e)] = none ? 0.0f : acc[size_t(r * p.Ev + e)] / l[size_t(r)];
      f.lse[size_t(i0 + r)] = none ? inf : m[size_t(r)] + std::log(l[size_t(r)]);
    }
  }
  return f;
}

struct Grads {
  std::vector<float> dq, dk, dv;  // (L, E), (S, E), (S, Ev)
};

// ---- backward: P = exp(S - lse), dv += P^T dO, dP = dO v^T, dS = P * (dP - D), D = rowsum(dO * O),
// dq += dS k * scale, dk += dS^T q * scale

// P and dS of query i against key tile j0 (kTile entries each, 0 where hidden), rounded as operands.
inline void tile_row(const Problem& p, const std::vector<float>& go, const std::vector<float>& lse,
                     const std::vector<float>& delta, int64_t i, int64_t j0, float* prob, float* ds) {
  for (int64_t c = 0; c < kTile; ++c) {
    const int64_t j = j0 + c;
    if (!p.visible(i, j)) {
      prob[c] = ds[c] = 0;
      continue;
    }
    const float pr = std::exp(p.score(i, j) - lse[size_t(i)]);  // 0 when lse = +inf
    float dp = 0;
    for (int64_t e = 0; e < p.Ev; ++e) dp += go[size_t(i * p.Ev + e)] * p.v[size_t(j * p.Ev + e)];
    prob[c] = p.round_operand(pr);
    ds[c] = p.round_operand(pr * (dp - delta[size_t(i)]));
  }
}

// go (L, Ev) and the forward's out and lse.
inline Grads backward(const Problem& p, const std::vector<float>& go, const Forward& f) {
  Grads g{std::vector<float>(size_t(p.L * p.E), 0), std::vector<float>(size_t(p.S * p.E), 0),
          std::vector<float>(size_t(p.S * p.Ev), 0)};
  std::vector<float> delta(size_t(p.L), 0);
  for (int64_t i = 0; i < p.L; ++i)
    for (int64_t e = 0; e < p.Ev; ++e) delta[size_t(i)] += go[size_t(i * p.Ev + e)] * f.out[size_t(i * p.Ev + e)];
  float prob[kTile], ds[kTile];
  // dk, dv: one key tile at a time, query tiles streamed.
  for (int64_t j0 = 0; j0 < p.S; j0 += kTile)
    for (int64_t i0 = p.query_begin(j0); i0 < p.L; i0 += kTile)
      for (int64_t i = i0; i < std::min(p.L, i0 + kTile); ++i) {
        tile_row(p, go, f.lse, delta, i, j0, prob, ds);
        for (int64_t c = 0; c < kTile && j0 + c < p.S; ++c) {
          const int64_t j = j0 + c;
          for (int64_t e = 0; e < p.Ev; ++e) g.dv[size_t(j * p.Ev + e)] += prob[c] * go[size_t(i * p.Ev + e)];
          for (int64_t e = 0; e < p.E; ++e) g.dk[size_t(j * p.E + e)] += ds[c] * p.q[size_t(i * p.E + e)];
        }
      }
  for (float& x : g.dk) x *= p.scale;
  // dq: one query tile at a time, key tiles streamed.
  for (int64_t i0 = 0; i0 < p.L; i0 += kTile)
    for (int64_t j0 = 0; j0 < p.key_end(i0); j0 += kTile)
      for (int64_t i = i0; i < std::min(p.L, i0 + kTile); ++i) {
        tile_row(p, go, f.lse, delta, i, j0, prob, ds);
        for (int64_t c = 0; c < kTile && j0 + c < p.S; ++c)
          for (int64_t e = 0; e < p.E; ++e) g.dq[size_t(i * p.E + e)] += ds[c] * p.k[size_t((j0 + c) * p.E + e)];
      }
  for (float& x : g.dq) x *= p.scale;
  return g;
}

}  // namespace mdl::test::flash
