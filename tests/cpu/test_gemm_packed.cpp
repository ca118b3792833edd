// Operands packed once (cpu/gemm.h: PackedA, PackedB): on each f32 micro-kernel their products have
// the bits gemm_f32 gives for the same sub-matrices, including prefixes of the packed rows, columns
// and k (past KC and across panel edges), strided and transposed operands, alpha and beta; a bf16
// kernel's place is taken by an f32 one; out-of-range products are refused. Packed for bf16 products,
// they have the bits of the pair kernel's GEMM (native and emulated), odd prefixes of k included, and
// fall back to f32's layout where no pair kernel applies. Given bf16 operands (pack, times_panel and
// times from bf16), they have the bits of the same products from those values as floats.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "cpu/gemm.h"
#include "cpu/scratch.h"
#include "switches/list/toggles.h"
#include "tensor/half.h"
#include "tensor/error.h"

using mdl::cpu::GemmKernel;

namespace {

std::vector<float> random_floats(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(size_t(std::max<int64_t>(n, 1)));
  for (float& x : v) x = dist(rng);
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Each f32 kernel this CPU runs, forced in turn.
template <class F>
void on_each_f32_kernel(const F& f) {
  int kernels = 0;
  for (GemmKernel k : {GemmKernel::scalar, GemmKernel::avx2, GemmKernel::avx512}) {
    if (!mdl::cpu::gemm_kernel_available(k)) continue;
    ++kernels;
    mdl::cpu::ScopedGemmKernel forced(k);
    CAPTURE(mdl::cpu::gemm_kernel_name(k));
    f();
  }
  CHECK(kernels >= 1);
}

struct Case {
  int64_t rows, cols;  // the packed matrix
  int64_t m, n, k;     // the product's sizes (prefixes of the packed one)
  bool transposed;     // the packed matrix stored column by column
};

}  // namespace

TEST_CASE("PackedB: products with the packed B have gemm_f32's bits, prefixes of k and n included") {
  // K x N packed; M x k times its first k x n.
  const Case cases[] = {{1, 1, 1, 1, 1, false},        {8, 40, 5, 33, 8, false},     {300, 70, 13, 70, 300, true},
                        {300, 70, 25, 33, 250, false}, {193, 97, 12, 96, 193, true}, {64, 256, 40, 200, 31, true},
                        {17, 5, 7, 0, 17, false},      {17, 5, 7, 5, 0, false}};
  on_each_f32_kernel([&] {
    uint32_t seed = 1;
    for (const Case& c : cases)
      for (float beta : {0.0f, 0.5f}) {
        INFO("K=", c.rows, " N=", c.cols, " M=", c.m, " n=", c.n, " k=", c.k, " transposed=", c.transposed,
             " beta=", beta);
        const int64_t K = c.rows, N = c.cols, M = c.m, ldc = c.n + 3;
        const int64_t rsb = c.transposed ? 1 : N, csb = c.transposed ? K : 1;
        const auto B = random_floats(K * N, seed++), A = random_floats(M * (c.k + 2), seed++);
        const auto C0 = random_floats(M * ldc, seed++);
        mdl::cpu::PackedB packed;
        packed.pack(K, N, B.data(), rsb, csb);
        CHECK(packed.rows() == K);
        CHECK(packed.cols() == N);
        std::vector<float> got = C0, want = C0;  // A (M x k) with row stride k + 2
        packed.times(M, c.n, c.k, 1.5f, A.data(), c.k + 2, 1, beta, got.data(), ldc, 1);
        mdl::cpu::gemm_f32(M, c.n, c.k, 1.5f, A.data(), c.k + 2, 1, B.data(), rsb, csb, beta, want.data(), ldc, 1);
        CHECK(same_bits(got, want));
      }
  });
}

TEST_CASE("PackedA: a packed A times one panel has gemm_f32's bits, row-major A through the vector transpose too") {
  // M x K packed; its first m x k times a k x n panel (n <= the panel width).
  const int64_t W = mdl::cpu::gemm_panel_width();
  const Case cases[] = {{1, 1, 1, 1, 1, false},           {64, 64, 64, W, 64, false},  {256, 64, 200, W, 64, false},
                        {70, 300, 70, W - 3, 250, false}, {33, 193, 33, 1, 193, true}, {100, 40, 37, W, 40, true},
                        {13, 9, 0, W, 9, false},          {13, 9, 13, W, 0, false}};
  REQUIRE((W == 16 || W == 32));
  on_each_f32_kernel([&] {
    CHECK(mdl::cpu::gemm_panel_width() == (mdl::cpu::gemm_f32_kernel() == GemmKernel::avx512 ? 32 : 16));
    const int64_t w = mdl::cpu::gemm_panel_width();
    uint32_t seed = 7;
    for (const Case& c : cases)
      for (bool vector : {false, true}) {
        INFO("M=", c.rows, " K=", c.cols, " m=", c.m, " n=", c.n, " k=", c.k, " transposed=", c.transposed,
             " vector=", vector);
        mdl::toggles::Scoped pack(mdl::toggles::Toggle::gemm_vector_pack, vector);
        const int64_t M = c.rows, K = c.cols, n = std::min(c.n, w), ldc = n + 1;
        const int64_t rsa = c.transposed ? 1 : K + 3, csa = c.transposed ? M + 2 : 1;
        const auto A = random_floats(std::max(M * rsa, K * csa), seed++), C0 = random_floats(c.m * ldc, seed++);
        const auto panel_values = random_floats(c.k * w, seed++);
        mdl::cpu::Scratch<float> panel(std::max<int64_t>(c.k * w, 1));
        std::copy(panel_values.begin(), panel_values.begin() + c.k * w, panel.data());
        mdl::cpu::PackedA packed;
        packed.pack(M, K, A.data(), rsa, csa);
        std::vector<float> got = C0, want = C0;
        packed.times_panel(c.m, n, c.k, -0.75f, panel.data(), 0.25f, got.data(), ldc, 1);
        mdl::cpu::gemm_f32(c.m, n, c.k, -0.75f, A.data(), rsa, csa, panel.data(), w, 1, 0.25f, want.data(), ldc, 1);
        CHECK(same_bits(got, want));
      }
  });
}

TEST_CASE("PackedA and PackedB multiply in f32 where gemm_f32 would round to bf16" *
          doctest::skip(!mdl::cpu::gemm_kernel_available(GemmKernel::avx512_bf16_emulated))) {
  const int64_t M = 40, N = 50, K = 60;
  const auto A = random_floats(M * K, 3), B = random_floats(K * N, 4);
  std::vector<float> f32(M * N), packed(M * N);
  {
    mdl::cpu::ScopedGemmKernel forced(GemmKernel::avx512);
    mdl::cpu::gemm_f32(M, N, K, 1.0f, A.data(), K, 1, B.data(), N, 1, 0.0f, f32.data(), N, 1);
  }
  mdl::cpu::ScopedGemmKernel forced(GemmKernel::avx512_bf16_emulated);
  CHECK(mdl::cpu::gemm_panel_width() == 32);
  mdl::cpu::PackedB b;
  b.pack(K, N, B.data(), N, 1);
  b.times(M, N, K, 1.0f, A.data(), K, 1, 0.0f, packed.data(), N, 1);
  CHECK(same_bits(packed, f32));
}

TEST_CASE("PackedA and PackedB refuse products past what they packed") {
  const auto X = random_floats(6 * 6, 5);
  mdl::cpu::PackedB b;
  b.pack(6, 6, X.data(), 6, 1);
  std::vector<float> C(64);
  CHECK_THROWS_AS(b.times(2, 7, 6, 1.0f, X.data(), 6, 1, 0.0f, C.data(), 8, 1), mdl::Error);
  CHECK_THROWS_AS(b.times(2, 6, 7, 1.0f, X.data(), 7, 1, 0.0f, C.data(), 8, 1), mdl::Error);
  mdl::cpu::PackedA a;
  mdl::cpu::Scratch<float> panel(6 * 32);
  CHECK_THROWS_AS(a.times_panel(1, 1, 1, 1.0f, panel.data(), 0.0f, C.data(), 8, 1), mdl::Error);  // nothing packed
  a.pack(6, 6, X.data(), 6, 1);
  CHECK_THROWS_AS(a.times_panel(7, 1, 6, 1.0f, panel.data(), 0.0f, C.data(), 8, 1), mdl::Error);
  CHECK_THROWS_AS(a.times_panel(6, 1, 7, 1.0f, panel.data(), 0.0f, C.data(), 8, 1), mdl::Error);
  CHECK_THROWS_AS(a.times_panel(6, mdl::cpu::gemm_panel_width() + 1, 6, 1.0f, panel.data(), 0.0f, C.data(), 40, 1),
                  mdl::Error);
  CHECK_THROWS_AS(a.times_panel(6, 1, 6, 1.0f, panel.data() + 1, 0.0f, C.data(), 8, 1), mdl::Error);  // misaligned
}

namespace {

// The pair kernels this CPU runs: VDPBF16PS where it has AVX512-BF16, its emulation on any AVX-512 CPU.
std::vector<GemmKernel> pair_kernels() {
  std::vector<GemmKernel> k;
  for (GemmKernel c : {GemmKernel::avx512_bf16, GemmKernel::avx512_bf16_emulated})
    if (mdl::cpu::gemm_kernel_available(c)) k.push_back(c);
  return k;
}

constexpr float kInf = std::numeric_limits<float>::infinity();

}  // namespace

// The pair kernel's KC is 384: prefixes of k below, at and past it, odd ones ending inside a pair whose
// other half (the packed operand's next k) holds an inf, which must not reach C.
TEST_CASE("PackedA and PackedB packed for bf16 products have the bits of the pair kernel's GEMM, odd prefixes of k "
          "included" *
          doctest::skip(!mdl::cpu::gemm_kernel_available(GemmKernel::avx512_bf16_emulated))) {
  const mdl::cpu::GemmPrecision bf16 = mdl::cpu::GemmPrecision::bf16;
  const Case b_cases[] = {{1, 1, 1, 1, 1, false},         {9, 40, 5, 33, 7, false},     {800, 70, 13, 70, 777, true},
                          {800, 70, 25, 33, 385, false},  {401, 97, 30, 96, 383, true}, {64, 256, 40, 200, 31, true},
                          {451, 64, 250, 64, 451, false}, {17, 5, 7, 5, 0, false}};
  const Case a_cases[] = {{1, 1, 1, 1, 1, false},        {64, 65, 64, 32, 63, false}, {256, 800, 200, 32, 777, false},
                          {70, 800, 70, 29, 385, false}, {33, 401, 33, 1, 383, true}, {100, 451, 37, 32, 451, true},
                          {13, 9, 13, 32, 0, false}};
  for (GemmKernel kernel : pair_kernels()) {
    mdl::cpu::ScopedGemmKernel forced(kernel);
    CAPTURE(mdl::cpu::gemm_kernel_name(kernel));
    REQUIRE(mdl::cpu::gemm_panel_width(bf16) == 32);
    uint32_t seed = 11;
    for (const Case& c : b_cases)
      for (float beta : {0.0f, 0.5f}) {
        INFO("PackedB K=", c.rows, " N=", c.cols, " M=", c.m, " n=", c.n, " k=", c.k, " transposed=", c.transposed,
             " beta=", beta);
        const int64_t K = c.rows, N = c.cols, M = c.m, ldc = c.n + 3;
        const int64_t rsb = c.transposed ? 1 : N, csb = c.transposed ? K : 1;
        auto B = random_floats(K * N, seed++);
        if (c.k < K)
          for (int64_t j = 0; j < N; ++j) B[size_t(c.k * rsb + j * csb)] = j % 2 ? kInf : -kInf;
        const auto A = random_floats(M * (c.k + 2), seed++), C0 = random_floats(M * ldc, seed++);
        mdl::cpu::PackedB packed;
        packed.pack(K, N, B.data(), rsb, csb, bf16);
        std::vector<float> got = C0, want = C0;
        packed.times(M, c.n, c.k, 1.5f, A.data(), c.k + 2, 1, beta, got.data(), ldc, 1);
        mdl::cpu::gemm_f32_bf16_values(M, c.n, c.k, 1.5f, A.data(), c.k + 2, 1, B.data(), rsb, csb, beta, want.data(),
                                       ldc, 1);
        CHECK(same_bits(got, want));
      }
    for (const Case& c : a_cases)
      for (bool vector : {false, true}) {
        INFO("PackedA M=", c.rows, " K=", c.cols, " m=", c.m, " n=", c.n, " k=", c.k, " transposed=", c.transposed,
             " vector=", vector);
        mdl::toggles::Scoped pack(mdl::toggles::Toggle::gemm_vector_pack, vector);
        const int64_t M = c.rows, K = c.cols, ldc = c.n + 1;
        const int64_t rsa = c.transposed ? 1 : K + 3, csa = c.transposed ? M + 2 : 1;
        auto A = random_floats(std::max(M * rsa, K * csa), seed++);
        if (c.k < K)
          for (int64_t i = 0; i < M; ++i) A[size_t(i * rsa + c.k * csa)] = i % 2 ? kInf : -kInf;
        const auto C0 = random_floats(c.m * ldc, seed++), panel_values = random_floats(c.k * 32, seed++);
        mdl::cpu::Scratch<float> panel(std::max<int64_t>(c.k * 32, 1));
        std::copy(panel_values.begin(), panel_values.begin() + c.k * 32, panel.data());
        mdl::cpu::PackedA packed;
        packed.pack(M, K, A.data(), rsa, csa, bf16);
        std::vector<float> got = C0, want = C0;
        packed.times_panel(c.m, c.n, c.k, -0.75f, panel.data(), 0.25f, got.data(), ldc, 1);
        mdl::cpu::gemm_f32_bf16_values(c.m, c.n, c.k, -0.75f, A.data(), rsa, csa, panel.data(), 32, 1, 0.25f,
                                       want.data(), ldc, 1);
        CHECK(same_bits(got, want));
      }
  }
}

TEST_CASE("PackedA and PackedB packed for bf16 products multiply in f32 where no pair kernel applies") {
  const mdl::cpu::GemmPrecision bf16 = mdl::cpu::GemmPrecision::bf16;
  const int64_t M = 40, N = 50, K = 61;
  const auto A = random_floats(M * K, 8), B = random_floats(K * N, 9);
  auto check_f32 = [&] {
    CHECK(mdl::cpu::gemm_panel_width(bf16) == mdl::cpu::gemm_panel_width());
    std::vector<float> f32(M * N), packed(M * N);
    mdl::cpu::gemm_f32(M, N, K, 1.0f, A.data(), K, 1, B.data(), N, 1, 0.0f, f32.data(), N, 1);
    mdl::cpu::PackedB b;
    b.pack(K, N, B.data(), N, 1, bf16);
    b.times(M, N, K, 1.0f, A.data(), K, 1, 0.0f, packed.data(), N, 1);
    CHECK(same_bits(packed, f32));
  };
  {
    INFO("avx512_bf16_dot off");
    mdl::toggles::Scoped dot(mdl::toggles::Toggle::avx512_bf16_dot, false);
    mdl::toggles::Scoped amx(mdl::toggles::Toggle::amx_bf16, false);
    check_f32();
  }
  on_each_f32_kernel(check_f32);
}

// bf16 operands are paired as they are on the pair kernel and widened on the f32 layouts: either way
// the products must have the bits of the same values given as floats, odd k and strided A included.
TEST_CASE("PackedA and PackedB given bf16 operands have the bits of the same values as floats, on every layout") {
  using mdl::BFloat16;
  auto bf16_values = [](int64_t n, uint32_t seed, std::vector<BFloat16>& h) {
    std::vector<float> f = random_floats(n, seed);
    h.resize(f.size());
    for (size_t i = 0; i < f.size(); ++i) h[i] = BFloat16(f[i]), f[i] = float(h[i]);
    return f;
  };
  auto check = [&](mdl::cpu::GemmPrecision precision) {
    const int64_t width = mdl::cpu::gemm_panel_width(precision);
    for (bool transposed : {false, true})
      for (int64_t k : {1, 7, 64, 385}) {
        CAPTURE(transposed);
        CAPTURE(k);
        const int64_t M = 45, K = 400, rsa = transposed ? 1 : K + 1, csa = transposed ? M + 3 : 1;
        std::vector<BFloat16> a16, p16, b16;
        const std::vector<float> a = bf16_values(std::max(M * rsa, K * csa), 31, a16),
                                 p = bf16_values(K * width, 32, p16);
        mdl::cpu::Scratch<float> panel(K * width);
        std::copy(p.begin(), p.end(), panel.data());
        mdl::cpu::PackedA from_floats, from_bf16;
        from_floats.pack(M, K, a.data(), rsa, csa, precision);
        from_bf16.pack(M, K, a16.data(), rsa, csa, precision);
        std::vector<float> want(size_t(M * width), 1.0f), got = want, got_packed = want;
        from_floats.times_panel(M, width - 3, k, 0.5f, panel.data(), 0.25f, want.data(), width, 1);
        from_bf16.times_panel(M, width - 3, k, 0.5f, p16.data(), 0.25f, got.data(), width, 1);
        from_bf16.times_panel(M, width - 3, k, 0.5f, panel.data(), 0.25f, got_packed.data(), width, 1);
        CHECK(same_bits(got, want));
        CHECK(same_bits(got_packed, want));
        // A (M x k) times a packed B (K x 50)
        const std::vector<float> b = bf16_values(K * 50, 33, b16);
        mdl::cpu::PackedB packed_b;
        packed_b.pack(K, 50, b.data(), 50, 1, precision);
        std::vector<float> want_b(size_t(M * 50), 0.0f), got_b = want_b;
        packed_b.times(M, 50, k, 1.0f, a.data(), rsa, csa, 0.0f, want_b.data(), 50, 1);
        packed_b.times(M, 50, k, 1.0f, a16.data(), rsa, csa, 0.0f, got_b.data(), 50, 1);
        CHECK(same_bits(got_b, want_b));
      }
  };
  on_each_f32_kernel([&] { check(mdl::cpu::GemmPrecision::f32); });
  for (GemmKernel kernel : pair_kernels()) {
    mdl::cpu::ScopedGemmKernel forced(kernel);
    CAPTURE(mdl::cpu::gemm_kernel_name(kernel));
    check(mdl::cpu::GemmPrecision::bf16);
  }
}
