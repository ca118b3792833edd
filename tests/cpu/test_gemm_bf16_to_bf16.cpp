// gemm_bf16_to_bf16 (a bf16 product with a column bias, rounded once in the pair kernel's registers)
// against gemm_bf16 into f32, the bias added and f32_to_bf16, bit for bit, on the pair kernel and its
// emulation: K up to the kernel's K step (384), every operand layout, edge tiles, the thread split,
// a row gap in C left untouched, bias or none, inf and NaN in the operands; and refused on the other
// kernels and past the K step.
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
const Shape kShapes[] = {{1, 1, 1},     {7, 13, 5},    {12, 32, 2},   {13, 33, 3},     {25, 65, 191}, {65, 33, 384},
                         {65, 33, 385}, {3, 700, 300}, {241, 97, 40}, {131, 259, 383}, {700, 3, 64},  {2, 4130, 7}};

// Strides of an r x c matrix: 0 row-major, 1 column-major.
struct Layout {
  int64_t rs, cs;
};
Layout layout(int kind, int64_t r, int64_t c) { return kind == 0 ? Layout{c, 1} : Layout{1, r}; }

std::vector<BFloat16> random_bf16(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<BFloat16> v(size_t(std::max<int64_t>(n, 1)));
  for (auto& x : v) x = BFloat16(dist(rng));
  return v;
}

// Returns the number of products compared: those the kernel rounds in its registers; the others are refused.
int check_kernel() {
  int compared = 0;
  uint32_t seed = 1;
  for (const Shape& s : kShapes)
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
    CHECK(check_kernel() == 11 * 4 * 2);  // every shape but the one with K = 385, 4 layouts, bias or none
  }
}

TEST_CASE("gemm_bf16_to_bf16 only where the pair kernel rounds in its registers; other kernels and K are refused") {
  for (GemmKernel k : {GemmKernel::scalar, GemmKernel::avx2, GemmKernel::avx512, GemmKernel::amx_bf16}) {
    if (!mdl::cpu::gemm_kernel_available(k)) continue;
    CAPTURE(mdl::cpu::gemm_kernel_name(k));
    mdl::cpu::ScopedGemmKernel forced(k);
    CHECK_FALSE(mdl::cpu::gemm_bf16_rounds_in_registers(64));
    CHECK(check_kernel() == 0);
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
