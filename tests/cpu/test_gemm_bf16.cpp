// gemm_bf16 (bf16 operands packed as they are) against gemm_f32_bf16_values on the same values
// widened to f32, bit for bit, on every micro-kernel the CPU has (forced): the packings from bf16
// must build the panels the f32 ones build. Shapes cross every block edge and the thread split;
// A and B row-major, transposed and with general strides; a double reference holds both. And
// gemm_bf16_to_bf16 (the bias added and each sum rounded in the pair kernel's registers) against
// gemm_bf16 into f32, the bias and f32_to_bf16, bit for bit, on the pair kernel and its emulation: K
// up to the kernel's K step (384), edge tiles, the thread split, a row gap in C left untouched, bias
// or none, inf and NaN; refused on the other kernels and past the K step.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "cpu/gemm.h"
#include "tensor/error.h"
#include "tensor/half.h"

namespace {

using mdl::BFloat16;
using mdl::cpu::GemmKernel;

struct Shape {
  int64_t M, N, K;
};
const Shape kShapes[] = {{1, 1, 1},     {7, 13, 5},    {12, 32, 2},   {13, 33, 3},     {25, 65, 191},
                         {65, 33, 385}, {3, 700, 300}, {241, 97, 40}, {131, 259, 400}, {2, 4130, 5}};

// Strides of an r x c matrix: 0 row-major, 1 column-major, 2 neither (a gap between elements).
struct Layout {
  int64_t rs, cs, size;
};
Layout layout(int kind, int64_t r, int64_t c) {
  if (kind == 0) return {c, 1, r * c};
  if (kind == 1) return {1, r, r * c};
  return {2 * c + 1, 2, r * (2 * c + 1)};
}

std::vector<BFloat16> random_bf16(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<BFloat16> v(size_t(std::max<int64_t>(n, 1)));
  for (auto& x : v) x = BFloat16(dist(rng));
  return v;
}

std::vector<float> widened(const std::vector<BFloat16>& v) {
  std::vector<float> f(v.size());
  for (size_t i = 0; i < v.size(); ++i) f[i] = float(v[i]);
  return f;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])))) return false;
  return true;
}

void check_kernel(GemmKernel k) {
  mdl::cpu::ScopedGemmKernel forced(k);
  REQUIRE(mdl::cpu::gemm_bf16_values_kernel() == k);
  uint32_t seed = 1;
  for (const Shape& s : kShapes)
    for (int la_kind = 0; la_kind < 3; ++la_kind)
      for (int lb_kind = 0; lb_kind < 3; ++lb_kind) {
        CAPTURE(s.M);
        CAPTURE(s.N);
        CAPTURE(s.K);
        CAPTURE(la_kind);
        CAPTURE(lb_kind);
        const Layout la = layout(la_kind, s.M, s.K), lb = layout(lb_kind, s.K, s.N);
        const auto A = random_bf16(la.size, seed++), B = random_bf16(lb.size, seed++);
        const auto c0 = widened(random_bf16(s.M * s.N, seed++));
        const float alpha = la_kind == 2 ? 0.5f : 1.0f, beta = lb_kind == 1 ? 0.25f : 0.0f;
        std::vector<float> got = c0, want = c0;
        mdl::cpu::gemm_bf16(s.M, s.N, s.K, alpha, A.data(), la.rs, la.cs, B.data(), lb.rs, lb.cs, beta, got.data(), s.N,
                            1);
        const auto fa = widened(A), fb = widened(B);
        mdl::cpu::gemm_f32_bf16_values(s.M, s.N, s.K, alpha, fa.data(), la.rs, la.cs, fb.data(), lb.rs, lb.cs, beta,
                                       want.data(), s.N, 1);
        CHECK(same_bits(got, want));
        // Both against the double reference at one corner and the far one.
        for (const auto& [i, j] : {std::pair<int64_t, int64_t>{0, 0}, {s.M - 1, s.N - 1}}) {
          double ref = 0, mag = 0;
          for (int64_t p = 0; p < s.K; ++p) {
            const double t = double(fa[size_t(i * la.rs + p * la.cs)]) * double(fb[size_t(p * lb.rs + j * lb.cs)]);
            ref += t;
            mag += std::abs(t);
          }
          ref = alpha * ref + beta * c0[size_t(i * s.N + j)];
          CHECK(std::abs(got[size_t(i * s.N + j)] - ref) <= 1e-6 * double(s.K + 2) * (mag + 1e-30));
        }
      }
  // A NaN in A's row 1 reaches every element of C's row 1, and only that row.
  const int64_t M = 5, N = 40, K = 33;
  auto A = random_bf16(M * K, 7), B = random_bf16(K * N, 8);
  A[size_t(1 * K + 17)] = BFloat16(std::numeric_limits<float>::quiet_NaN());
  std::vector<float> C(size_t(M * N));
  mdl::cpu::gemm_bf16(M, N, K, 1.0f, A.data(), K, 1, B.data(), N, 1, 0.0f, C.data(), N, 1);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) CHECK(std::isnan(C[size_t(i * N + j)]) == (i == 1));
}

}  // namespace

TEST_CASE("gemm_bf16 packs bf16 operands to the f32 path's panels, bit for bit, on every kernel the CPU has") {
  int ran = 0;
  for (GemmKernel k : {GemmKernel::scalar, GemmKernel::avx2, GemmKernel::avx512, GemmKernel::amx_bf16,
                       GemmKernel::avx512_bf16, GemmKernel::avx512_bf16_emulated}) {
    if (!mdl::cpu::gemm_kernel_available(k)) continue;
    CAPTURE(mdl::cpu::gemm_kernel_name(k));
    check_kernel(k);
    ++ran;
  }
  CHECK(ran >= 1);
  MESSAGE("gemm_bf16 checked on ", ran, " micro-kernels");
}

TEST_CASE("gemm_bf16 rejects negative sizes and leaves C scaled by beta when K = 0") {
  std::vector<BFloat16> A(4), B(4);
  std::vector<float> C = {1, 2, 3, 4};
  CHECK_THROWS(mdl::cpu::gemm_bf16(-1, 2, 2, 1.0f, A.data(), 2, 1, B.data(), 2, 1, 0.0f, C.data(), 2, 1));
  mdl::cpu::gemm_bf16(2, 2, 0, 1.0f, A.data(), 0, 1, B.data(), 2, 1, 0.5f, C.data(), 2, 1);
  CHECK(C == std::vector<float>{0.5f, 1.0f, 1.5f, 2.0f});
}

namespace {

// gemm_bf16_to_bf16's: K on both sides of the pair kernel's K step (384).
const Shape kRoundedShapes[] = {{1, 1, 1},     {7, 13, 5},      {12, 32, 2},   {13, 33, 3},
                                {25, 65, 191}, {65, 33, 384},   {65, 33, 385}, {3, 700, 300},
                                {241, 97, 40}, {131, 259, 383}, {700, 3, 64},  {2, 4130, 7}};

// Returns the number of products compared: those the kernel rounds in its registers; the others are refused.
int check_rounded_in_registers() {
  int compared = 0;
  uint32_t seed = 1;
  for (const Shape& s : kRoundedShapes)
    for (int kinds = 0; kinds < 4; ++kinds)
      for (bool with_bias : {true, false}) {
        CAPTURE(s.M);
        CAPTURE(s.N);
        CAPTURE(s.K);
        CAPTURE(kinds);
        CAPTURE(with_bias);
        const Layout la = layout(kinds & 1, s.M, s.K), lb = layout(kinds >> 1, s.K, s.N);
        auto A = random_bf16(s.M * s.K, seed++), B = random_bf16(s.K * s.N, seed++);
        if (s.M > 2 && s.K > 1) A[size_t(2 * la.rs + 1 * la.cs)] = BFloat16(std::numeric_limits<float>::infinity());
        if (s.N > 3 && s.K > 2) B[size_t(2 * lb.rs + 3 * lb.cs)] = BFloat16(std::numeric_limits<float>::quiet_NaN());
        std::vector<float> bias(size_t(s.N));
        std::mt19937 rng(seed++);
        for (float& b : bias) b = std::uniform_real_distribution<float>(-3.0f, 3.0f)(rng);
        const int64_t rsc = s.N + 5;
        std::vector<BFloat16> got(size_t(s.M * rsc), BFloat16(7.0f)), want = got;
        if (!mdl::cpu::gemm_bf16_rounds_in_registers(s.K)) {
          CHECK_THROWS_AS(mdl::cpu::gemm_bf16_to_bf16(s.M, s.N, s.K, A.data(), la.rs, la.cs, B.data(), lb.rs, lb.cs,
                                                      nullptr, got.data(), rsc),
                          mdl::Error);
          continue;
        }
        ++compared;
        mdl::cpu::gemm_bf16_to_bf16(s.M, s.N, s.K, A.data(), la.rs, la.cs, B.data(), lb.rs, lb.cs,
                                    with_bias ? bias.data() : nullptr, got.data(), rsc);
        std::vector<float> f(size_t(s.M * s.N));
        mdl::cpu::gemm_bf16(s.M, s.N, s.K, 1.0f, A.data(), la.rs, la.cs, B.data(), lb.rs, lb.cs, 0.0f, f.data(), s.N,
                            1);
        for (int64_t i = 0; i < s.M; ++i) {
          if (with_bias)
            for (int64_t j = 0; j < s.N; ++j) f[size_t(i * s.N + j)] += bias[size_t(j)];
          mdl::f32_to_bf16(f.data() + i * s.N, want.data() + i * rsc, s.N);
        }
        CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(BFloat16)) == 0);
      }
  return compared;
}

}  // namespace

TEST_CASE("gemm_bf16_to_bf16: the bits of gemm_bf16, the bias and one rounding, on the pair kernels the CPU has") {
  for (GemmKernel k : {GemmKernel::avx512_bf16, GemmKernel::avx512_bf16_emulated}) {
    if (!mdl::cpu::gemm_kernel_available(k)) continue;
    CAPTURE(mdl::cpu::gemm_kernel_name(k));
    mdl::cpu::ScopedGemmKernel forced(k);
    CHECK(check_rounded_in_registers() == 11 * 4 * 2);  // every shape but the one with K = 385, 4 layouts, bias or none
  }
}

TEST_CASE("gemm_bf16_to_bf16 only where the pair kernel rounds in its registers; other kernels and K are refused") {
  for (GemmKernel k : {GemmKernel::scalar, GemmKernel::avx2, GemmKernel::avx512, GemmKernel::amx_bf16}) {
    if (!mdl::cpu::gemm_kernel_available(k)) continue;
    CAPTURE(mdl::cpu::gemm_kernel_name(k));
    mdl::cpu::ScopedGemmKernel forced(k);
    CHECK_FALSE(mdl::cpu::gemm_bf16_rounds_in_registers(64));
    CHECK(check_rounded_in_registers() == 0);
  }
  if (!mdl::cpu::gemm_kernel_available(GemmKernel::avx512_bf16_emulated)) return;
  mdl::cpu::ScopedGemmKernel forced(GemmKernel::avx512_bf16_emulated);
  CHECK(mdl::cpu::gemm_bf16_rounds_in_registers(384));
  CHECK_FALSE(mdl::cpu::gemm_bf16_rounds_in_registers(385));
  CHECK_FALSE(mdl::cpu::gemm_bf16_rounds_in_registers(0));
  std::vector<BFloat16> A(4), B(4), C(4);
  CHECK_THROWS_AS(mdl::cpu::gemm_bf16_to_bf16(-1, 2, 2, A.data(), 2, 1, B.data(), 2, 1, nullptr, C.data(), 2),
                  mdl::Error);
}
