// bf16 batch norm's row loops (cpu/bf16_batch_norm_rows.h) at every width this CPU runs (4, 8, 16
// floats) against double math: row lengths around each width and the sum block; sums past float's
// range; the output with and without the ReLU and the residual, and the input gradient, each within a
// bf16 rounding of the double result; and F::batch_norm_relu on bf16 with wide_bf16_batch_norm off and
// on, forward and gradients, the same bits on 1 and 2 threads.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "cpu/bf16_batch_norm_rows.h"
#include "cpu/cpu_features.h"
#include "nn/functional.h"
#include "ops/native/factory.h"
#include "ops/ops.h"
#include "switches/list/toggles.h"
#include "tensor/parallel.h"

using namespace mdl;
namespace F = mdl::nn::functional;

namespace {

std::vector<const cpu::Bf16BatchNormRows*> widths_here() {
  std::vector<const cpu::Bf16BatchNormRows*> w{&cpu::bf16_batch_norm_rows4()};
  if (cpu::has_avx2_fma()) w.push_back(&cpu::bf16_batch_norm_rows8());
  if (cpu::has_avx512f()) w.push_back(&cpu::bf16_batch_norm_rows16());
  return w;
}

// n bf16 values drawn uniformly from [lo, hi), as bits.
std::vector<uint16_t> bf16_uniform(size_t n, float lo, float hi, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<uint16_t> v(n);
  for (uint16_t& b : v) b = BFloat16(u(rng)).bits;
  return v;
}
double value(uint16_t b) { return double(float(BFloat16::from_bits(b))); }

// |got - want| within one bf16 rounding of want (half an ulp, 2^-9 relative, doubled) and the float
// error of the terms that made it (`terms`: the sum of their magnitudes), which may cancel.
bool within_bf16(uint16_t got, double want, double terms) {
  return std::abs(value(got) - want) <= std::abs(want) * 0x1p-8 + terms * 0x1p-21;
}

}  // namespace

// Three rows a call, each with its own centre and coefficients, so that a row read with another's
// parameters, or one row too far, shows.
TEST_CASE("bf16 batch norm rows: sums, output and input gradient match double math at every width, row by row") {
  std::mt19937 rng(21);
  constexpr int kRows = 3;
  const cpu::BnAffine k[kRows] = {{1.7f, 0.25f, -0.1f}, {-0.6f, -0.5f, 0.3f}, {0.9f, 1.0f, 0.0f}};  // a, mean, b
  const float centre[kRows] = {0.375f, -0.25f, 1.5f};
  const float p[kRows] = {0.8f, -1.1f, 0.3f}, q[kRows] = {-0.3f, 0.2f, 0.7f}, s[kRows] = {0.05f, -0.4f, 0.0f};
  for (const cpu::Bf16BatchNormRows* rows : widths_here())
    for (int64_t n : {1, 3, 4, 7, 8, 15, 16, 17, 63, 64, 65, 130, 1027}) {
      CAPTURE(rows->width);
      CAPTURE(n);
      const size_t m = size_t(n) * kRows;
      const std::vector<uint16_t> x = bf16_uniform(m, -2, 2, rng), g = bf16_uniform(m, -1, 1, rng),
                                  r = bf16_uniform(m, -1, 1, rng);
      double sums[kRows], squares[kRows], plain[2 * kRows], gated[2 * kRows];
      rows->sum(x.data(), kRows, n, sums);
      rows->squares(x.data(), kRows, n, centre, squares);
      rows->grad_sums(g.data(), x.data(), kRows, n, centre, nullptr, plain);
      rows->grad_sums(g.data(), x.data(), kRows, n, centre, k, gated);
      std::vector<uint16_t> y(m), yr(m), gx(m), gxr(m);
      rows->forward(x.data(), nullptr, y.data(), kRows, n, k, false);
      rows->forward(x.data(), r.data(), yr.data(), kRows, n, k, true);
      rows->backward(g.data(), x.data(), gx.data(), kRows, n, p, q, s, nullptr);
      rows->backward(g.data(), x.data(), gxr.data(), kRows, n, p, q, s, k);
      const double tol = 1e-6 * double(n) + 1e-6;  // float lanes within blocks of 256
      for (int row = 0; row < kRows; ++row) {
        CAPTURE(row);
        double sum = 0, sq = 0, sg = 0, sgx = 0, sg_gated = 0, sgx_gated = 0;
        const cpu::BnAffine& kr = k[row];
        const double cr = centre[row];
        int bad = 0;
        for (size_t i = size_t(row) * size_t(n); i < size_t(row + 1) * size_t(n); ++i) {
          const double xi = value(x[i]), gi = value(g[i]), pre = (xi - kr.mean) * kr.a + kr.b;
          sum += xi;
          sq += (xi - cr) * (xi - cr);
          sg += gi;
          sgx += gi * (xi - cr);
          if (pre > 0) sg_gated += gi, sgx_gated += gi * (xi - cr);
          const double with_r = pre + value(r[i]), pre_terms = std::abs((xi - kr.mean) * kr.a) + std::abs(kr.b);
          const double gated_g = pre > 0 ? gi : 0.0;
          const double pr = p[row], qr = q[row], sr = s[row];
          bad += !within_bf16(y[i], pre, pre_terms);
          bad += !within_bf16(yr[i], with_r > 0 ? with_r : 0.0, pre_terms + std::abs(value(r[i])));
          bad += !within_bf16(gx[i], gi * pr + xi * qr + sr, std::abs(gi * pr) + std::abs(xi * qr) + std::abs(sr));
          bad += !within_bf16(gxr[i], gated_g * pr + xi * qr + sr,
                              std::abs(gated_g * pr) + std::abs(xi * qr) + std::abs(sr));
        }
        CHECK(std::abs(sums[row] - sum) <= tol);
        CHECK(std::abs(squares[row] - sq) <= tol * (1 + sq));
        CHECK(std::abs(plain[2 * row] - sg) <= tol);
        CHECK(std::abs(plain[2 * row + 1] - sgx) <= tol);
        CHECK(std::abs(gated[2 * row] - sg_gated) <= tol);
        CHECK(std::abs(gated[2 * row + 1] - sgx_gated) <= tol);
        CHECK(bad == 0);
      }
    }
}

// Rows of at most a block are summed many at a time, their lane sums side by side: each row's sums
// must have the bits of the row summed alone, a row whose float sum overflows (summed again in double)
// and rows left over past a multiple of the width included.
TEST_CASE("bf16 batch norm rows: short rows summed together have the bits of each row alone") {
  std::mt19937 rng(5);
  for (const cpu::Bf16BatchNormRows* rows : widths_here())
    for (int64_t n : {1, 5, 16, 20, 64, 256}) {
      CAPTURE(rows->width);
      CAPTURE(n);
      const int64_t R = 37;
      std::vector<uint16_t> x = bf16_uniform(size_t(R * n), -3, 3, rng), g = bf16_uniform(size_t(R * n), -1, 1, rng);
      x[size_t(5 * n)] = BFloat16(3e19f).bits;  // row 5's square and its gradient terms pass float's range
      g[size_t(5 * n)] = BFloat16(3e19f).bits;
      std::vector<float> centre(static_cast<size_t>(R));
      std::vector<cpu::BnAffine> k(static_cast<size_t>(R));
      for (int64_t r = 0; r < R; ++r)
        centre[size_t(r)] = 0.1f * float(r % 7) - 0.3f, k[size_t(r)] = {0.5f + 0.1f * float(r % 3), 0.2f, -0.05f};
      std::vector<double> sum(static_cast<size_t>(R)), sq(static_cast<size_t>(R)), plain(static_cast<size_t>(2 * R)),
          gated(static_cast<size_t>(2 * R));
      rows->sum(x.data(), R, n, sum.data());
      rows->squares(x.data(), R, n, centre.data(), sq.data());
      rows->grad_sums(g.data(), x.data(), R, n, centre.data(), nullptr, plain.data());
      rows->grad_sums(g.data(), x.data(), R, n, centre.data(), k.data(), gated.data());
      int differ = 0;
      for (int64_t r = 0; r < R; ++r) {
        const uint16_t *xr = x.data() + r * n, *gr = g.data() + r * n;
        double one = 0, two[2] = {0, 0};
        rows->sum(xr, 1, n, &one);
        differ += std::memcmp(&one, &sum[size_t(r)], sizeof one) != 0;
        rows->squares(xr, 1, n, &centre[size_t(r)], &one);
        differ += std::memcmp(&one, &sq[size_t(r)], sizeof one) != 0;
        rows->grad_sums(gr, xr, 1, n, &centre[size_t(r)], nullptr, two);
        differ += std::memcmp(two, &plain[size_t(2 * r)], sizeof two) != 0;
        rows->grad_sums(gr, xr, 1, n, &centre[size_t(r)], &k[size_t(r)], two);
        differ += std::memcmp(two, &gated[size_t(2 * r)], sizeof two) != 0;
      }
      CHECK(differ == 0);
      CHECK(std::isfinite(sq[5]));
      CHECK(sq[5] > 1e38);
    }
}

TEST_CASE("bf16 batch norm rows: a block past float's range is summed again in double, and NaN is kept") {
  const uint16_t big = BFloat16(2e19f).bits, nan = BFloat16(std::nanf("")).bits;
  for (const cpu::Bf16BatchNormRows* rows : widths_here()) {
    CAPTURE(rows->width);
    std::vector<uint16_t> x(100, BFloat16(1.0f).bits);
    x[70] = big;  // its square, 4e38, is past float's largest value
    const double want = (2e19 - 1) * (2e19 - 1);
    const float one = 1.0f;
    double got = 0;
    rows->squares(x.data(), 1, 100, &one, &got);
    CHECK(got == doctest::Approx(want).epsilon(1e-2));
    CHECK(std::isfinite(got));
    x[3] = nan;
    rows->sum(x.data(), 1, 100, &got);
    CHECK(std::isnan(got));
    std::vector<uint16_t> y(100);
    const cpu::BnAffine k{1.0f, 0.0f, 0.0f};
    rows->forward(x.data(), nullptr, y.data(), 1, 100, &k, true);
    CHECK(std::isnan(value(y[3])));  // the ReLU keeps a NaN, as UnaryOp::Relu
    CHECK(value(y[0]) == 1.0);
  }
}

// (33, 7, 15, 17): 58905 values, past the grain of the elementwise passes (32768) and of the row sums
// (128 rows of 255), so two threads split both, the elementwise ones inside a row. (24, 160, 4, 5): rows
// of 20, many to a call, the pieces of the elementwise passes cutting some of them.
TEST_CASE("batch_norm_relu on bf16: wide_bf16_batch_norm off and on agree, the same bits on 1 and 2 threads") {
  for (const Shape& shape : {Shape{33, 7, 15, 17}, Shape{24, 160, 4, 5}}) {
    CAPTURE(shape_str(shape));
    Generator gen(23);
    const int64_t C = shape[1];
    const Tensor x0 = (randn(shape, {}, &gen) * 2.0 + 1.0).to(kBF16);
    const Tensor dy = randn(shape, {}, &gen).to(kBF16);
    const Tensor w0 = rand({C}, {}, &gen) + 0.5, b0 = randn({C}, {}, &gen);
    auto run = [&](bool wide) {
      toggles::Scoped flip(toggles::Toggle::wide_bf16_batch_norm, wide);
      Tensor x = x0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true),
             b = b0.clone().requires_grad_(true);
      Tensor y = F::batch_norm_relu(x, Tensor(), Tensor(), w, b, true);
      y.backward(dy);
      return std::vector<std::vector<float>>{y.to(kF32).to_vector<float>(), x.grad().to(kF32).to_vector<float>(),
                                             w.grad().to_vector<float>(), b.grad().to_vector<float>()};
    };
    const auto off = run(false), on = run(true);
    for (size_t k = 0; k < off.size(); ++k) {
      CAPTURE(k);
      REQUIRE(off[k].size() == on[k].size());
      double err = 0;  // relative to max(1, |off|): a bf16 rounding apart at most
      for (size_t i = 0; i < off[k].size(); ++i)
        err = std::max(err, std::abs(double(on[k][i]) - off[k][i]) / std::max(1.0, std::abs(double(off[k][i]))));
      CHECK(err <= 1.6e-2);
    }
    const int threads = get_num_threads();
    set_num_threads(1);
    const auto one = run(true);
    set_num_threads(std::max(threads, 2));
    const auto two = run(true);
    set_num_threads(threads);
    for (size_t k = 0; k < one.size(); ++k) CHECK(one[k] == two[k]);
  }
}
