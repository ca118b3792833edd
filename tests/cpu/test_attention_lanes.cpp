// The attention's f32 column loops (cpu/attention_lanes.h) at every width this CPU runs (4, 8, 16
// floats) against double math: tiles of 16 and 32 columns, row counts odd and even (the max's two
// chains), a column's max on its last row, -inf (hidden keys) and NaN; and the choice of width.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "cpu/attention_lanes.h"
#include "cpu/cpu_features.h"
#include "switches/list/toggles.h"

using namespace mdl;

namespace {

std::vector<const cpu::AttentionLanes*> widths_here() {
  std::vector<const cpu::AttentionLanes*> w{&cpu::attention_lanes4()};
  if (cpu::has_avx2_fma()) w.push_back(&cpu::attention_lanes8());
  if (cpu::has_avx512f()) w.push_back(&cpu::attention_lanes16());
  return w;
}

// rows x width scores in [-8, 8]; column i's largest on row (i * 7) % rows, the last row for some.
std::vector<float> scores(int64_t rows, int64_t width, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-8.0f, 8.0f);
  std::vector<float> st(size_t(rows * width));
  for (float& v : st) v = u(rng);
  for (int64_t i = 0; i < width; ++i) st[size_t(((i * 7 + rows - 1) % rows) * width + i)] = 9.0f + float(i);
  return st;
}

}  // namespace

TEST_CASE("attention lanes: max, exp with its sums, scale and the softmax's backward match double math") {
  std::mt19937 rng(3);
  for (const cpu::AttentionLanes* lanes : widths_here()) {
    for (int64_t width : {16, 32}) {
      for (int64_t rows : {1, 2, 7, 70, 257}) {
        CAPTURE(lanes->vector_width);
        CAPTURE(width);
        CAPTURE(rows);
        std::vector<float> st = scores(rows, width, rng);
        std::vector<float> mx(static_cast<size_t>(width)), sum(static_cast<size_t>(width));
        lanes->max(st.data(), rows, width, mx.data());
        for (int64_t i = 0; i < width; ++i) {
          float m = -std::numeric_limits<float>::infinity();
          for (int64_t j = 0; j < rows; ++j) m = std::max(m, st[size_t(j * width + i)]);
          CHECK(mx[size_t(i)] == m);
        }
        const std::vector<float> x = st;
        lanes->exp(st.data(), rows, width, mx.data(), sum.data());
        for (int64_t i = 0; i < width; ++i) {
          double s = 0;
          for (int64_t j = 0; j < rows; ++j) {
            const float diff = x[size_t(j * width + i)] - mx[size_t(i)];  // as the loop subtracts, in float
            const double e = std::exp(double(diff));
            CHECK(double(st[size_t(j * width + i)]) == doctest::Approx(e).epsilon(1e-6).scale(1e-30));
            s += e;
          }
          CHECK(double(sum[size_t(i)]) == doctest::Approx(s).epsilon(2e-6));
        }
        // p = softmax down each column, d = dP; D = sum(p * d) and d = p * (d - D)
        std::vector<float> by(static_cast<size_t>(width));
        for (int64_t i = 0; i < width; ++i) by[size_t(i)] = 1.0f / sum[size_t(i)];
        std::vector<float> p = st;
        lanes->scale(p.data(), rows, width, by.data());
        for (int64_t k = 0; k < rows * width; ++k) CHECK(p[size_t(k)] == st[size_t(k)] * by[size_t(k % width)]);
        std::vector<float> d = scores(rows, width, rng), D(static_cast<size_t>(width));
        const std::vector<float> d0 = d;
        lanes->softmax_grad(p.data(), d.data(), rows, width, D.data());
        for (int64_t i = 0; i < width; ++i) {
          double ref = 0, mag = 0;
          for (int64_t j = 0; j < rows; ++j) {
            ref += double(p[size_t(j * width + i)]) * double(d0[size_t(j * width + i)]);
            mag += std::abs(double(p[size_t(j * width + i)]) * double(d0[size_t(j * width + i)]));
          }
          CHECK(std::abs(double(D[size_t(i)]) - ref) <= 1e-6 * (mag + 1e-30));
          for (int64_t j = 0; j < rows; ++j) {
            const size_t k = size_t(j * width + i);
            const double want = double(p[k]) * (double(d0[k]) - double(D[size_t(i)]));
            CHECK(double(d[k]) == doctest::Approx(want).epsilon(1e-6).scale(1e-30));
          }
        }
      }
    }
  }
}

TEST_CASE("attention lanes: NaN and -inf down a column") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  for (const cpu::AttentionLanes* lanes : widths_here()) {
    CAPTURE(lanes->vector_width);
    const int64_t rows = 5, width = 16;
    std::vector<float> st(size_t(rows * width), -inf);  // every key hidden: the max is -inf
    st[size_t(1 * width + 3)] = nan;                    // column 3: a NaN among -inf
    st[size_t(4 * width + 5)] = nan;                    // column 5: a NaN on the last (odd) row
    st[size_t(0 * width + 5)] = 2.0f;
    st[size_t(2 * width + 7)] = 1.0f;  // column 7: one visible key
    std::vector<float> mx(static_cast<size_t>(width)), sum(static_cast<size_t>(width)),
        zero(static_cast<size_t>(width), 0.0f);
    lanes->max(st.data(), rows, width, mx.data());
    CHECK(std::isnan(mx[3]));
    CHECK(std::isnan(mx[5]));
    CHECK(mx[7] == 1.0f);
    CHECK(mx[0] == -inf);
    // e^(-inf - 0) = 0: a column that sees no key sums to 0
    lanes->exp(st.data(), rows, width, zero.data(), sum.data());
    CHECK(sum[0] == 0.0f);
    CHECK(std::isnan(sum[3]));
    CHECK(sum[7] == doctest::Approx(std::exp(1.0)));
  }
}

TEST_CASE("attention lanes: the widest the CPU runs, 16 only with avx512_vec_math on") {
  for (bool wide : {true, false}) {
    CAPTURE(wide);
    toggles::Scoped s(toggles::Toggle::avx512_vec_math, wide);
    const int want32 = wide && cpu::has_avx512f() ? 16 : cpu::has_avx2_fma() ? 8 : 4;
    CHECK(cpu::attention_lanes(32).vector_width == want32);
    CHECK(cpu::attention_lanes(16).vector_width == want32);
    CHECK(cpu::attention_lanes(8).vector_width == (cpu::has_avx2_fma() ? 8 : 4));
    CHECK(cpu::attention_lanes(12).vector_width == 4);
  }
}
