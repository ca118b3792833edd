// The FlashAttention-2 algorithm of cuda/flash_attention.cu, run on the CPU
// (tests/support/flash_attention_reference.h), against plain unfused attention in f64: output, logsumexp
// and the three gradients, at lengths on both sides of the 64-wide tiles, head dims 8 to 128,
// every mask kind (none, causal, padding, both) with L != S and rows that see no key. The plain
// gradients are checked first by central differences, so both sides are tested.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "tensor/half.h"
#include "tests/support/flash_attention_reference.h"

using mdl::test::flash::Problem;

namespace {

using V = std::vector<double>;

// ---- plain attention in f64: the whole (L, S) matrix at once ---------------------------------------

struct Plain {
  V out, lse, dq, dk, dv;
};

Plain plain(const Problem& p, const std::vector<float>& go) {
  const double inf = std::numeric_limits<double>::infinity();
  const int64_t L = p.L, S = p.S, E = p.E, Ev = p.Ev;
  Plain r{V(size_t(L * Ev), 0), V(size_t(L), inf), V(size_t(L * E), 0), V(size_t(S * E), 0), V(size_t(S * Ev), 0)};
  V prob(size_t(L * S), 0), ds(size_t(L * S), 0);
  for (int64_t i = 0; i < L; ++i) {
    double mx = -inf;
    V s(size_t(S), -inf);
    for (int64_t j = 0; j < S; ++j) {
      if (!p.visible(i, j)) continue;
      double d = 0;
      for (int64_t e = 0; e < E; ++e) d += double(p.q[size_t(i * E + e)]) * p.k[size_t(j * E + e)];
      s[size_t(j)] = d * p.scale;
      mx = std::max(mx, s[size_t(j)]);
    }
    if (mx == -inf) continue;  // no visible key: zeros, lse = +inf
    double sum = 0;
    for (int64_t j = 0; j < S; ++j) sum += std::exp(s[size_t(j)] - mx);
    r.lse[size_t(i)] = mx + std::log(sum);
    for (int64_t j = 0; j < S; ++j) prob[size_t(i * S + j)] = std::exp(s[size_t(j)] - r.lse[size_t(i)]);
    for (int64_t j = 0; j < S; ++j)
      for (int64_t e = 0; e < Ev; ++e) r.out[size_t(i * Ev + e)] += prob[size_t(i * S + j)] * p.v[size_t(j * Ev + e)];
  }
  // dP = dO v^T, dS = P * (dP - rowsum(P * dP)), dv = P^T dO, dq = dS k * scale, dk = dS^T q * scale
  for (int64_t i = 0; i < L; ++i) {
    V dp(size_t(S), 0);
    double d = 0;
    for (int64_t j = 0; j < S; ++j) {
      for (int64_t e = 0; e < Ev; ++e) dp[size_t(j)] += double(go[size_t(i * Ev + e)]) * p.v[size_t(j * Ev + e)];
      d += prob[size_t(i * S + j)] * dp[size_t(j)];
    }
    for (int64_t j = 0; j < S; ++j) ds[size_t(i * S + j)] = prob[size_t(i * S + j)] * (dp[size_t(j)] - d);
  }
  for (int64_t i = 0; i < L; ++i)
    for (int64_t j = 0; j < S; ++j) {
      const double pij = prob[size_t(i * S + j)], sij = ds[size_t(i * S + j)] * p.scale;
      for (int64_t e = 0; e < Ev; ++e) r.dv[size_t(j * Ev + e)] += pij * go[size_t(i * Ev + e)];
      for (int64_t e = 0; e < E; ++e) {
        r.dq[size_t(i * E + e)] += sij * p.k[size_t(j * E + e)];
        r.dk[size_t(j * E + e)] += sij * p.q[size_t(i * E + e)];
      }
    }
  return r;
}

// ---- problems -----------------------------------------------------------------------------------------

enum class Masking { none, causal, padding, both };
const char* masking_name(Masking m) {
  switch (m) {
    case Masking::none: return "none";
    case Masking::causal: return "causal";
    case Masking::padding: return "padding";
    case Masking::both: return "causal+padding";
  }
  return "?";
}

// Normal q, k, v, dO rounded by `round`; the padding mask hides ~30% of keys and every key of row 2.
Problem make_problem(int64_t L, int64_t S, int64_t E, int64_t Ev, Masking masking, float (*round)(float),
                     std::vector<float>& go, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal;
  auto fill = [&](std::vector<float>& x, int64_t n) {
    x.resize(size_t(n));
    for (float& e : x) e = round(normal(gen));
  };
  Problem p{L, S, E, Ev, {}, {}, {}, {}};
  fill(p.q, L * E), fill(p.k, S * E), fill(p.v, S * Ev), fill(go, L * Ev);
  p.causal = masking == Masking::causal || masking == Masking::both;
  if (masking == Masking::padding || masking == Masking::both) {
    std::bernoulli_distribution keep(0.7);
    p.mask.resize(size_t(L * S));
    for (int64_t i = 0; i < L; ++i)
      for (int64_t j = 0; j < S; ++j) p.mask[size_t(i * S + j)] = i != 2 && keep(gen);
  }
  p.scale = float(1.0 / std::sqrt(double(E)));
  p.round_operand = round;
  return p;
}

// max |got - want| / max |want| (1 where want is all zero), with +inf entries required to match.
double rel_err(const std::vector<float>& got, const V& want) {
  REQUIRE(got.size() == want.size());
  double err = 0, mag = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isinf(want[i]) || std::isinf(got[i])) {
      if (double(got[i]) != want[i]) return std::numeric_limits<double>::infinity();
      continue;
    }
    err = std::max(err, std::abs(double(got[i]) - want[i]));
    mag = std::max(mag, std::abs(want[i]));
  }
  return err / (mag > 0 ? mag : 1.0);
}

void check_flash(const Problem& p, const std::vector<float>& go, double tol, const std::string& what) {
  const Plain want = plain(p, go);
  const auto f = mdl::test::flash::forward(p);
  const auto g = mdl::test::flash::backward(p, go, f);
  const std::pair<const char*, double> errs[] = {{"out", rel_err(f.out, want.out)},
                                                 {"lse", rel_err(f.lse, want.lse)},
                                                 {"dq", rel_err(g.dq, want.dq)},
                                                 {"dk", rel_err(g.dk, want.dk)},
                                                 {"dv", rel_err(g.dv, want.dv)}};
  for (const auto& [name, err] : errs) CHECK_MESSAGE(err <= tol, what, " ", name, ": relative error ", err);
}

float no_round(float x) { return x; }
float round_f16(float x) { return float(mdl::Half(x)); }
float round_bf16(float x) { return float(mdl::BFloat16(x)); }

}  // namespace

TEST_CASE("flash attention reference: the plain f64 gradients agree with central differences") {
  for (Masking m : {Masking::none, Masking::both}) {
    std::vector<float> go;
    Problem p = make_problem(4, 5, 3, 2, m, no_round, go, 7);
    const Plain r = plain(p, go);
    // d/dx sum(out * go), x each element of q, k, v in turn.
    auto loss = [&](const Problem& pp) {
      const Plain o = plain(pp, go);
      double s = 0;
      for (size_t i = 0; i < o.out.size(); ++i) s += o.out[i] * go[i];
      return s;
    };
    const std::pair<std::vector<float> Problem::*, const V*> params[] = {{&Problem::q, &r.dq},
                                                                         {&Problem::k, &r.dk},
                                                                         {&Problem::v, &r.dv}};
    for (const auto& [member, grad] : params)
      for (size_t i = 0; i < (p.*member).size(); ++i) {
        const float h = 1e-2f;  // exact in f32; the loss is computed in f64 from these inputs
        Problem hi = p, lo = p;
        (hi.*member)[i] += h, (lo.*member)[i] -= h;
        const double fd = (loss(hi) - loss(lo)) / (double((hi.*member)[i]) - double((lo.*member)[i]));
        CHECK(std::abs(fd - (*grad)[i]) <= 1e-4 * (1 + std::abs(fd)));  // O(h^2) truncation
      }
  }
}

TEST_CASE("flash attention reference: f32 tiles equal plain f64 attention at tile edges, every mask, L != S") {
  const std::pair<int64_t, int64_t> lengths[] = {{1, 1},   {1, 130}, {63, 65},  {64, 64},
                                                 {65, 63}, {130, 1}, {65, 130}, {130, 130}};
  unsigned seed = 1;
  for (int64_t E : {8, 64, 80, 128})
    for (auto [L, S] : lengths)
      for (Masking m : {Masking::none, Masking::causal, Masking::padding, Masking::both}) {
        std::vector<float> go;
        const Problem p = make_problem(L, S, E, E, m, no_round, go, seed++);
        check_flash(p, go, 2e-5,
                    "L=" + std::to_string(L) + " S=" + std::to_string(S) + " E=" + std::to_string(E) + " " +
                        masking_name(m));
      }
  std::vector<float> go;  // Ev != E
  check_flash(make_problem(65, 130, 80, 24, Masking::both, no_round, go, 99), go, 2e-5, "E=80 Ev=24");
}

TEST_CASE("flash attention reference: P and dS rounded to f16 / bf16 as the tensor cores take them") {
  // Inputs already in the 16-bit type; the tolerance is the operand rounding (2^-11, 2^-8) grown over sums.
  for (auto [round, tol, name] : {std::tuple{&round_f16, 4e-3, "f16"}, std::tuple{&round_bf16, 3e-2, "bf16"}})
    for (Masking m : {Masking::none, Masking::causal, Masking::padding, Masking::both}) {
      std::vector<float> go;
      const Problem p = make_problem(130, 129, 64, 64, m, round, go, 5);
      check_flash(p, go, tol, std::string(name) + " " + masking_name(m));
    }
}

TEST_CASE("flash attention reference: a kernel that skipped the running-max rescale would fail") {
  // The check above is only as good as its tolerance: this shows a plausible bug lies far outside it.
  std::vector<float> go;
  Problem p = make_problem(65, 130, 64, 64, Masking::none, no_round, go, 3);
  const Plain want = plain(p, go);
  auto f = mdl::test::flash::forward(p);
  Problem one_tile = p;  // keys of the second tile only, as a kernel dropping the first tile's sum would
  one_tile.S = 130;
  one_tile.mask.assign(size_t(p.L * p.S), 0);
  for (int64_t i = 0; i < p.L; ++i)
    for (int64_t j = 64; j < p.S; ++j) one_tile.mask[size_t(i * p.S + j)] = 1;
  const auto wrong = mdl::test::flash::forward(one_tile);
  CHECK(rel_err(f.out, want.out) <= 2e-5);
  CHECK(rel_err(wrong.out, want.out) > 1e-2);
}
