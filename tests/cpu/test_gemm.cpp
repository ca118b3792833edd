// gemm_f32, gemm_f64 and the ladder's rungs against a plain double-precision loop: edge sizes,
// sizes past every block size, transposed A and B, strided C, alpha/beta, NaN in C with beta = 0.
// gemm_f32 is checked on each micro-kernel (scalar, AVX2, AVX-512, and the bf16 ones: AMX, AVX512-BF16
// and its emulation); one the CPU lacks is skipped.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cpu/gemm.h"
#include "tensor/error.h"
#include "switches/list/toggles.h"

namespace {

struct Shape {
  int64_t M, N, K;
};

const Shape kShapes[] = {{0, 0, 0},     {0, 5, 3},     {4, 0, 3},      {3, 4, 0},       {1, 1, 1},     {1, 17, 1},
                         {17, 1, 9},    {1, 1, 300},   {6, 16, 8},     {7, 13, 5},      {12, 32, 256}, {65, 33, 129},
                         {11, 31, 193}, {13, 33, 191}, {25, 65, 7},    {241, 97, 40},   {2, 4130, 5},  {145, 17, 3},
                         {5, 4081, 2},  {3, 700, 300}, {20, 1000, 64}, {300, 200, 257}, {97, 161, 520}};

template <class T>
std::vector<T> random_vec(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<T> v(size_t(std::max<int64_t>(n, 1)));
  for (auto& x : v) x = T(dist(rng));
  return v;
}

// Whether run_case rounds A and B to bf16 first (for the bf16 kernel).
bool g_bf16_inputs = false;

// x rounded to the nearest bf16 (ties to even), as a float.
float round_to_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  std::memcpy(&x, &u, 4);
  return x;
}

// A matrix stored with strides (rs, cs) inside a buffer with room for any layout below.
struct Layout {
  int64_t rs, cs, size;
};
Layout row_major(int64_t r, int64_t c, int64_t pad = 0) { return {c + pad, 1, r * (c + pad)}; }
Layout col_major(int64_t r, int64_t c, int64_t pad = 0) { return {1, r + pad, c * (r + pad)}; }

// Checks C_out against alpha * A @ B + beta * C_in, all in double; tolerance grows with K and |A||B|.
template <class T>
void check(const Shape& s, T alpha, T beta, const std::vector<T>& A, Layout la, const std::vector<T>& B, Layout lb,
           const std::vector<T>& c_in, const std::vector<T>& c_out, Layout lc, double eps) {
  for (int64_t i = 0; i < s.M; ++i)
    for (int64_t j = 0; j < s.N; ++j) {
      double ref = 0, mag = 0;
      for (int64_t p = 0; p < s.K; ++p) {
        double t = double(A[i * la.rs + p * la.cs]) * double(B[p * lb.rs + j * lb.cs]);
        ref += t;
        mag += std::abs(t);
      }
      const double cin = c_in[i * lc.rs + j * lc.cs];
      ref = double(alpha) * ref + (beta == T(0) ? 0.0 : double(beta) * cin);
      mag = std::abs(double(alpha)) * mag + std::abs(double(beta) * (beta == T(0) ? 0.0 : cin));
      const double got = c_out[i * lc.rs + j * lc.cs];
      const double tol = eps * (double(s.K) + 2) * (mag + 1e-30);
      if (!(std::abs(got - ref) <= tol)) {
        INFO("M=", s.M, " N=", s.N, " K=", s.K, " i=", i, " j=", j, " got=", got, " want=", ref);
        CHECK(std::abs(got - ref) <= tol);
        return;
      }
    }
}

template <class T, class Gemm>
void run_case(Gemm gemm, const Shape& s, T alpha, T beta, bool trans_a, bool trans_b, bool strided_c, bool nan_c,
              double eps, uint32_t seed) {
  const Layout la = trans_a ? col_major(s.M, s.K, 3) : row_major(s.M, s.K);
  const Layout lb = trans_b ? col_major(s.K, s.N) : row_major(s.K, s.N, 5);
  const Layout lc = strided_c ? Layout{2 * s.N + 1, 2, s.M * (2 * s.N + 1)} : row_major(s.M, s.N);
  auto A = random_vec<T>(la.size, seed), B = random_vec<T>(lb.size, seed + 1), C = random_vec<T>(lc.size, seed + 2);
  if constexpr (std::is_same_v<T, float>)
    if (g_bf16_inputs)  // values a bf16 kernel multiplies exactly, so the f32 tolerance holds
      for (auto* v : {&A, &B})
        for (float& x : *v) x = round_to_bf16(x);
  if (nan_c)
    for (auto& x : C) x = std::numeric_limits<T>::quiet_NaN();
  const std::vector<T> c_in = C;
  gemm(s.M, s.N, s.K, alpha, A.data(), la.rs, la.cs, B.data(), lb.rs, lb.cs, beta, C.data(), lc.rs, lc.cs);
  check<T>(s, alpha, beta, A, la, B, lb, c_in, C, lc, eps);
  if (strided_c)  // the gaps between C's elements stay untouched
    for (int64_t i = 0; i < lc.size; ++i)
      if (i % lc.rs == lc.rs - 1 || i % lc.rs % 2 == 1) {
        bool same = C[i] == c_in[i] || (std::isnan(C[i]) && std::isnan(c_in[i]));
        if (!same) {
          CHECK(same);
          break;
        }
      }
}

template <class T, class Gemm>
void sweep(Gemm gemm, double eps) {
  const T ab[][2] = {{T(1), T(0)}, {T(0.5), T(1)}, {T(-1.5), T(0.25)}, {T(0), T(2)}, {T(2), T(-1)}, {T(1), T(1)}};
  uint32_t seed = 1;
  for (const Shape& s : kShapes)
    for (int layout = 0; layout < 8; ++layout)
      for (int k = 0; k < 6; ++k) {
        if (s.M * s.N * s.K > 1000000 && k != layout % 6) continue;  // big shapes: one alpha/beta per layout
        const auto& x = ab[k];
        CAPTURE(layout);
        CAPTURE(x[0]);
        CAPTURE(x[1]);
        run_case<T>(gemm, s, x[0], x[1], layout & 1, layout & 2, layout & 4, false, eps, seed++);
      }
}

using RungFn = void (*)(int64_t, int64_t, int64_t, const float*, const float*, float*);

void check_rung(RungFn rung) {
  uint32_t seed = 100;
  for (const Shape& s : kShapes) {
    auto A = random_vec<float>(s.M * s.K, seed), B = random_vec<float>(s.N * s.K, seed + 1);
    std::vector<float> C(size_t(std::max<int64_t>(s.M * s.N, 1)), std::numeric_limits<float>::quiet_NaN());
    const std::vector<float> c_in = C;
    rung(s.M, s.N, s.K, A.data(), B.data(), C.data());
    check<float>(s, 1.0f, 0.0f, A, row_major(s.M, s.K), B, row_major(s.K, s.N), c_in, C, row_major(s.M, s.N), 1e-6);
    seed += 3;
  }
}

}  // namespace

TEST_CASE("gemm_f32 matches a double reference over shapes, strides, alpha and beta") {
  sweep<float>(mdl::cpu::gemm_f32, 1e-6);
}

// The same sweep, the beta = 0 check and the thread-split check with each micro-kernel forced.
void check_kernel(mdl::cpu::GemmKernel k) {
  mdl::cpu::ScopedGemmKernel forced(k);
  REQUIRE(mdl::cpu::gemm_f32_kernel() == k);
  sweep<float>(mdl::cpu::gemm_f32, 1e-6);
  for (const Shape& s : kShapes) run_case<float>(mdl::cpu::gemm_f32, s, 1.0f, 0.0f, true, true, true, true, 1e-6, 17);
  const int64_t M = 131, N = 259, K = 400;
  auto A = random_vec<float>(M * K, 21), B = random_vec<float>(K * N, 22);
  std::vector<float> threaded(M * N), serial(M * N);
  mdl::cpu::gemm_f32(M, N, K, 1.0f, A.data(), K, 1, B.data(), N, 1, 0.0f, threaded.data(), N, 1);
  mdl::cpu::gemm_f32_packed(M, N, K, A.data(), B.data(), serial.data());
  CHECK(threaded == serial);
}

TEST_CASE("gemm_f32 on the scalar micro-kernel") { check_kernel(mdl::cpu::GemmKernel::scalar); }
TEST_CASE("gemm_f32 on the AVX2 micro-kernel" *
          doctest::skip(!mdl::cpu::gemm_kernel_available(mdl::cpu::GemmKernel::avx2))) {
  check_kernel(mdl::cpu::GemmKernel::avx2);
}
TEST_CASE("gemm_f32 on the AVX-512 micro-kernel" *
          doctest::skip(!mdl::cpu::gemm_kernel_available(mdl::cpu::GemmKernel::avx512))) {
  check_kernel(mdl::cpu::GemmKernel::avx512);
}

// gemm_vector_pack changes how a transposed B is packed, never what is multiplied: on each f32
// micro-kernel the product has the same bits as with the element-by-element pack, across panel edges
// (N not a multiple of NR), k-block edges (K past KC, K not a multiple of 16) and strided W rows.
TEST_CASE("gemm_f32 packs a transposed B in register blocks to the same bits as element by element") {
  using mdl::cpu::GemmKernel;
  const Shape shapes[] = {{128, 128, 3136}, {7, 33, 17}, {12, 64, 16}, {40, 97, 450}, {3, 31, 15}, {25, 130, 193}};
  int kernels = 0;
  for (GemmKernel k : {GemmKernel::scalar, GemmKernel::avx2, GemmKernel::avx512}) {
    if (!mdl::cpu::gemm_kernel_available(k)) continue;
    ++kernels;
    mdl::cpu::ScopedGemmKernel forced(k);
    for (const Shape& s : shapes)
      for (int64_t pad : {0, 5}) {
        CAPTURE(mdl::cpu::gemm_kernel_name(k));
        INFO("M=", s.M, " N=", s.N, " K=", s.K, " pad=", pad);
        const int64_t ldw = s.K + pad;  // w is (N, K) with row stride ldw; B = w^T
        auto A = random_vec<float>(s.M * s.K, 31), W = random_vec<float>(s.N * ldw, 32);
        std::vector<float> packed[2];
        for (bool vector : {false, true}) {
          mdl::toggles::Scoped pack(mdl::toggles::Toggle::gemm_vector_pack, vector);
          packed[vector].assign(size_t(s.M * s.N), std::numeric_limits<float>::quiet_NaN());
          mdl::cpu::gemm_f32(s.M, s.N, s.K, 1.0f, A.data(), s.K, 1, W.data(), 1, ldw, 0.0f, packed[vector].data(), s.N,
                             1);
        }
        CHECK(std::memcmp(packed[0].data(), packed[1].data(), packed[0].size() * sizeof(float)) == 0);
        check<float>(s, 1.0f, 0.0f, A, row_major(s.M, s.K), W, Layout{1, ldw, s.N * ldw},
                     std::vector<float>(packed[1].size()), packed[1], row_major(s.M, s.N), 1e-6);
      }
  }
  CHECK(kernels >= 1);
}

// The bf16 kernels: inputs rounded to bf16 first are multiplied exactly, so the f32 sweep's
// tolerance holds.
void check_bf16_kernel(mdl::cpu::GemmKernel k) {
  g_bf16_inputs = true;
  check_kernel(k);
  g_bf16_inputs = false;
}

TEST_CASE("gemm_f32 on the AMX bf16 micro-kernel" *
          doctest::skip(!mdl::cpu::gemm_kernel_available(mdl::cpu::GemmKernel::amx_bf16))) {
  check_bf16_kernel(mdl::cpu::GemmKernel::amx_bf16);
}

// VDPBF16PS and its emulation on AVX-512F: the same packing and loops, so the emulated sweep checks
// the native kernel's logic (pairs, odd K, edges, strides, blocks) on any AVX-512 CPU.
TEST_CASE("gemm_f32 on the AVX512-BF16 pair-dot micro-kernel" *
          doctest::skip(!mdl::cpu::gemm_kernel_available(mdl::cpu::GemmKernel::avx512_bf16))) {
  check_bf16_kernel(mdl::cpu::GemmKernel::avx512_bf16);
}
TEST_CASE("gemm_f32 on the pair-dot micro-kernel emulated in AVX-512F" *
          doctest::skip(!mdl::cpu::gemm_kernel_available(mdl::cpu::GemmKernel::avx512_bf16_emulated))) {
  check_bf16_kernel(mdl::cpu::GemmKernel::avx512_bf16_emulated);
}

// Each pair's products are exact in f32 and VDPBF16PS adds the odd one first, then the even one:
// the emulation's two FMAs in that order give its results bit for bit (no denormals here).
TEST_CASE("the pair-dot kernel and its emulation agree bit for bit" *
          doctest::skip(!mdl::cpu::gemm_kernel_available(mdl::cpu::GemmKernel::avx512_bf16))) {
  using mdl::cpu::GemmKernel;
  const int64_t M = 53, N = 77, K = 401;
  const auto A = random_vec<float>(M * K, 41), B = random_vec<float>(K * N, 42);
  auto run = [&](GemmKernel k) {
    mdl::cpu::ScopedGemmKernel forced(k);
    std::vector<float> C(M * N);
    mdl::cpu::gemm_f32(M, N, K, 1.0f, A.data(), K, 1, B.data(), N, 1, 0.0f, C.data(), N, 1);
    return C;
  };
  CHECK(run(GemmKernel::avx512_bf16) == run(GemmKernel::avx512_bf16_emulated));
}

void check_rounds_to_bf16(mdl::cpu::GemmKernel k) {
  CAPTURE(mdl::cpu::gemm_kernel_name(k));
  CHECK(mdl::cpu::gemm_kernel_rounds_to_bf16(k));
  mdl::cpu::ScopedGemmKernel forced(k);
  const int64_t M = 37, N = 45, K = 70;
  auto A = random_vec<float>(M * K, 31), B = random_vec<float>(K * N, 32);
  std::vector<float> C(M * N), Ar(A), Br(B);
  for (float& x : Ar) x = round_to_bf16(x);
  for (float& x : Br) x = round_to_bf16(x);
  mdl::cpu::gemm_f32(M, N, K, 1.0f, A.data(), K, 1, B.data(), N, 1, 0.0f, C.data(), N, 1);
  // Against the product of the rounded inputs: within f32 summation error.
  check<float>({M, N, K}, 1.0f, 0.0f, Ar, row_major(M, K), Br, row_major(K, N), C, C, row_major(M, N), 1e-6);
  // Against the unrounded inputs the difference is bf16's, far above f32's: the rounding happened.
  double worst = 0;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double ref = 0;
      for (int64_t p = 0; p < K; ++p) ref += double(A[i * K + p]) * double(B[p * N + j]);
      worst = std::max(worst, std::abs(ref - double(C[i * N + j])));
    }
  CHECK(worst > 1e-4);
  CHECK(worst < 0.1);
  A[5 * K + 3] = std::numeric_limits<float>::quiet_NaN();
  B[7 * N + 2] = std::numeric_limits<float>::infinity();
  mdl::cpu::gemm_f32(M, N, K, 1.0f, A.data(), K, 1, B.data(), N, 1, 0.0f, C.data(), N, 1);
  CHECK(std::isnan(C[5 * N + 9]));  // row 5 met the NaN
  CHECK(std::isinf(C[0 * N + 2]));  // column 2 met the infinity (row 0 has no NaN)
  CHECK(std::isfinite(C[1 * N + 3]));
}

TEST_CASE("the bf16 kernels round their inputs to bf16 and keep NaN and infinity") {
  using mdl::cpu::GemmKernel;
  int ran = 0;
  for (GemmKernel k : {GemmKernel::amx_bf16, GemmKernel::avx512_bf16, GemmKernel::avx512_bf16_emulated})
    if (mdl::cpu::gemm_kernel_available(k)) check_rounds_to_bf16(k), ++ran;
  if (ran == 0) MESSAGE("no bf16 kernel runs on this CPU (it lacks AVX-512F)");
  CHECK_FALSE(mdl::cpu::gemm_kernel_rounds_to_bf16(GemmKernel::avx512));
}

TEST_CASE("gemm_f32 picks the widest kernel the CPU has; the avx512_gemm switch and forcing change it") {
  using mdl::cpu::GemmKernel;
  const GemmKernel best = mdl::cpu::gemm_kernel_available(GemmKernel::avx512) ? GemmKernel::avx512
                          : mdl::cpu::gemm_kernel_available(GemmKernel::avx2) ? GemmKernel::avx2
                                                                              : GemmKernel::scalar;
  CHECK(mdl::cpu::gemm_f32_kernel() == best);
  mdl::toggles::set_avx512_gemm(false);
  CHECK(mdl::cpu::gemm_f32_kernel() != GemmKernel::avx512);
  mdl::toggles::set_avx512_gemm(true);
  CHECK(mdl::cpu::gemm_f32_kernel() == best);
  {
    mdl::cpu::ScopedGemmKernel forced(GemmKernel::scalar);
    CHECK(std::string(mdl::cpu::gemm_f32_kernel_name()) == "scalar 6x16");
  }
  CHECK(mdl::cpu::gemm_f32_kernel() == best);
  mdl::toggles::set_bf16_gemm(true);
  CHECK(mdl::cpu::gemm_f32_kernel() ==
        (mdl::cpu::gemm_kernel_available(GemmKernel::amx_bf16) ? GemmKernel::amx_bf16 : best));
  mdl::toggles::set_bf16_gemm(false);
  CHECK(mdl::cpu::gemm_f32_kernel() == best);
  // bf16 values: AMX first, then VDPBF16PS, each behind its switch; else the f32 kernel.
  const bool amx = mdl::cpu::gemm_kernel_available(GemmKernel::amx_bf16);
  const bool dot = mdl::cpu::gemm_kernel_available(GemmKernel::avx512_bf16);
  CHECK(mdl::cpu::gemm_bf16_values_kernel() == (amx ? GemmKernel::amx_bf16 : dot ? GemmKernel::avx512_bf16 : best));
  {
    mdl::toggles::Scoped no_amx(mdl::toggles::Toggle::amx_bf16, false);
    CHECK(mdl::cpu::gemm_bf16_values_kernel() == (dot ? GemmKernel::avx512_bf16 : best));
    mdl::toggles::Scoped no_dot(mdl::toggles::Toggle::avx512_bf16_dot, false);
    CHECK(mdl::cpu::gemm_bf16_values_kernel() == best);
  }
  {
    mdl::cpu::ScopedGemmKernel forced(GemmKernel::scalar);
    CHECK(mdl::cpu::gemm_bf16_values_kernel() == GemmKernel::scalar);
  }
  if (!mdl::cpu::gemm_kernel_available(GemmKernel::avx512))
    CHECK_THROWS_WITH_AS(mdl::cpu::ScopedGemmKernel(GemmKernel::avx512),
                         doctest::Contains("this CPU cannot run the avx512f 12x32 micro-kernel"), mdl::Error);
}

TEST_CASE("gemm_f64 matches a double reference over shapes, strides, alpha and beta") {
  sweep<double>(mdl::cpu::gemm_f64, 1e-15);
}

TEST_CASE("gemm with beta = 0 never reads C (NaN does not leak)") {
  for (const Shape& s : kShapes) {
    run_case<float>(mdl::cpu::gemm_f32, s, 1.0f, 0.0f, false, false, false, true, 1e-6, 7);
    run_case<float>(mdl::cpu::gemm_f32, s, 0.0f, 0.0f, true, false, true, true, 1e-6, 8);
    run_case<double>(mdl::cpu::gemm_f64, s, 2.0, 0.0, false, true, true, true, 1e-15, 9);
  }
}

TEST_CASE("gemm ladder rungs match the reference") {
  SUBCASE("naive") { check_rung(mdl::cpu::gemm_f32_naive); }
  SUBCASE("blocked") { check_rung(mdl::cpu::gemm_f32_blocked); }
  SUBCASE("packed") { check_rung(mdl::cpu::gemm_f32_packed); }
}

TEST_CASE("gemm_f32 is deterministic and large enough to thread") {
  const int64_t M = 257, N = 300, K = 513;
  auto A = random_vec<float>(M * K, 11), B = random_vec<float>(K * N, 12);
  std::vector<float> C1(M * N), C2(M * N), C3(M * N);
  mdl::cpu::gemm_f32(M, N, K, 1.0f, A.data(), K, 1, B.data(), N, 1, 0.0f, C1.data(), N, 1);
  mdl::cpu::gemm_f32(M, N, K, 1.0f, A.data(), K, 1, B.data(), N, 1, 0.0f, C2.data(), N, 1);
  mdl::cpu::gemm_f32_packed(M, N, K, A.data(), B.data(), C3.data());
  CHECK(C1 == C2);
  CHECK(C1 == C3);  // the thread split never changes the order of any sum
  check<float>({M, N, K}, 1.0f, 0.0f, A, row_major(M, K), B, row_major(K, N), C1, C1, row_major(M, N), 1e-6);
}

TEST_CASE("gemm rejects negative sizes") {
  float x = 0;
  CHECK_THROWS(mdl::cpu::gemm_f32(-1, 1, 1, 1.0f, &x, 1, 1, &x, 1, 1, 0.0f, &x, 1, 1));
  CHECK_THROWS(mdl::cpu::gemm_f64(1, 1, -2, 1.0, nullptr, 1, 1, nullptr, 1, 1, 0.0, nullptr, 1, 1));
}
