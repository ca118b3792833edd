// matmul (torch.matmul's rules) against a double-precision reference that applies those rules
// itself: 1-D and 2-D operands, batches and broadcast batch dims, transposed and strided
// operands, zero sizes, f64, f16/bf16 with f32 accumulation, integers, and the error messages.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cpu/gemm.h"
#include "mdl.h"
#include "tests/support/test_util.h"

using namespace mdl;
using namespace mdl::test;
using V = std::vector<double>;

namespace {

struct Ref {
  Shape shape;
  V vals;  // the exact product, in double
  V mag;   // sum of |a_ik * b_kj|, for error bounds
  int64_t K;
};

// torch.matmul in double: a 1-D a is a row (1, K), a 1-D b a column (K, 1), both dropped again
// from the result; the batch dims (all but the last two) broadcast.
Ref ref_matmul(const Tensor& a, const Tensor& b) {
  const V av = values(a), bv = values(b);
  Shape as = a.shape(), bs = b.shape();
  if (a.dim() == 1) as.insert(as.begin(), 1);
  if (b.dim() == 1) bs.push_back(1);
  const int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  REQUIRE(bs[bs.size() - 2] == K);
  const Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  Shape batch(std::max(ab.size(), bb.size()));
  for (size_t i = 0; i < batch.size(); ++i) {
    const size_t ia = i + ab.size() - batch.size(), ib = i + bb.size() - batch.size();
    const int64_t da = ia < ab.size() ? ab[ia] : 1, db = ib < bb.size() ? bb[ib] : 1;
    batch[i] = da == 1 ? db : da;
  }
  const std::vector<int64_t> amap = broadcast_index(ab, batch), bmap = broadcast_index(bb, batch);
  Ref r;
  r.K = K;
  r.shape = batch;
  if (a.dim() > 1) r.shape.push_back(M);
  if (b.dim() > 1) r.shape.push_back(N);
  for (size_t t = 0; t < amap.size(); ++t)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0, m = 0;
        for (int64_t k = 0; k < K; ++k) {
          const double p = av[size_t(amap[t] * M * K + i * K + k)] * bv[size_t(bmap[t] * K * N + k * N + j)];
          s += p;
          m += std::abs(p);
        }
        r.vals.push_back(s);
        r.mag.push_back(m);
      }
  return r;
}

// Random values uniform in [-1, 1] (whole numbers in [-5, 5] for integral dtypes).
Tensor random(const Shape& shape, DType dtype, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(-1, 1);
  V v(static_cast<size_t>(shape_numel(shape)));
  for (double& x : v) x = is_floating(dtype) ? dist(rng) : std::round(5 * dist(rng));
  return from_vector<double>(v, shape.empty() ? Shape{1} : shape).view(shape).to(dtype);
}

// Checks matmul(a, b) against the reference: shape, dtype, and each element within
// eps * (K + 2) * sum|a_ik b_kj| (eps 0 for exact integer products).
void check_matmul(const Tensor& a, const Tensor& b, double eps, const std::string& what) {
  INFO(what, ": ", shape_str(a.shape()), " @ ", shape_str(b.shape()), " in ", std::string(dtype_name(a.dtype())));
  const Ref r = ref_matmul(a, b);
  Tensor out = matmul(a, b);
  CHECK(out.shape() == r.shape);
  CHECK(out.dtype() == a.dtype());
  CHECK(out.is_contiguous());
  const V got = values(out);
  REQUIRE(got.size() == r.vals.size());
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::abs(got[i] - r.vals[i]) <= eps * double(r.K + 2) * r.mag[i])) ++bad;
  CHECK(bad == 0);
}

constexpr double kEpsF32 = 0x1p-24, kEpsF64 = 0x1p-53;

}  // namespace

TEST_CASE("matmul: 1-D and 2-D operands follow torch.matmul's shape rules") {
  Tensor v5 = random({5}, kF32, 1), w5 = random({5}, kF32, 2);
  check_matmul(v5, w5, kEpsF32, "dot");
  CHECK(matmul(v5, w5).dim() == 0);
  check_matmul(random({3}, kF32, 3), random({3, 4}, kF32, 4), kEpsF32, "vector @ matrix");
  check_matmul(random({3, 4}, kF32, 5), random({4}, kF32, 6), kEpsF32, "matrix @ vector");
  check_matmul(random({2, 3}, kF32, 7), random({3, 4}, kF32, 8), kEpsF32, "matrix @ matrix");
  check_matmul(random({3}, kF32, 9), random({2, 3, 4}, kF32, 10), kEpsF32, "vector @ batch");
  check_matmul(random({2, 3, 4}, kF32, 11), random({4}, kF32, 12), kEpsF32, "batch @ vector");
  check_matmul(random({1, 1}, kF32, 13), random({1, 1}, kF32, 14), kEpsF32, "1x1");
  check_matmul(random({67, 129}, kF32, 15), random({129, 93}, kF32, 16), kEpsF32, "past the GEMM blocks");
  // A value check that needs no reference: [1 2; 3 4] @ [5 6; 7 8].
  CHECK(values(matmul(from_vector<float>({1, 2, 3, 4}, {2, 2}), from_vector<float>({5, 6, 7, 8}, {2, 2}))) ==
        V{19, 22, 43, 50});
}

TEST_CASE("matmul: batched and broadcast batch dims") {
  check_matmul(random({4, 3, 5}, kF32, 20), random({4, 5, 2}, kF32, 21), kEpsF32, "batched");
  Tensor bc = matmul(random({2, 1, 3, 4}, kF32, 22), random({5, 4, 6}, kF32, 23));
  CHECK(bc.shape() == Shape{2, 5, 3, 6});
  check_matmul(random({2, 1, 3, 4}, kF32, 22), random({5, 4, 6}, kF32, 23), kEpsF32, "broadcast batch");
  check_matmul(random({3, 4}, kF32, 24), random({2, 4, 5}, kF32, 25), kEpsF32, "matrix @ batch");
  check_matmul(random({2, 3, 4}, kF32, 26), random({4, 5}, kF32, 27), kEpsF32, "batch @ matrix");
  check_matmul(random({3, 1, 2, 4}, kF32, 28), random({1, 2, 4, 3}, kF32, 29), kEpsF32, "both broadcast");
  check_matmul(random({64, 8, 16}, kF32, 30), random({64, 16, 8}, kF32, 31), kEpsF32, "many small, threaded");
  Tensor shared = random({4, 5}, kF32, 32).expand({3, 4, 5});  // stride 0 batch dim
  check_matmul(random({3, 2, 4}, kF32, 33), shared, kEpsF32, "expanded operand");
}

TEST_CASE("matmul: transposed and strided operands") {
  Tensor at = random({129, 70}, kF32, 40).t();  // (70, 129), column-major
  Tensor bt = random({50, 129}, kF32, 41).t();  // (129, 50)
  CHECK_FALSE(at.is_contiguous());
  check_matmul(at, bt, kEpsF32, "both transposed");
  check_matmul(at, random({129, 50}, kF32, 42), kEpsF32, "a transposed");
  check_matmul(random({70, 129}, kF32, 43), bt, kEpsF32, "b transposed");
  Tensor ap = random({3, 4, 5}, kF32, 44).permute({1, 0, 2});  // (4, 3, 5), batch stride 5
  Tensor bp = random({6, 5, 4}, kF32, 45).permute({2, 1, 0});  // (4, 5, 6)
  check_matmul(ap, bp, kEpsF32, "permuted batches");
  Tensor as = random({6, 9}, kF32, 46).slice(1, 0, 9, 2).slice(0, 1, 6, 2);  // (3, 5), both strides stepped
  check_matmul(as, random({10, 4}, kF32, 47).slice(0, 0, 10, 2), kEpsF32, "stepped");
  check_matmul(random({8}, kF32, 48).slice(0, 0, 8, 2), random({4, 3}, kF32, 49), kEpsF32, "stepped vector");
}

TEST_CASE("matmul: zero-size operands") {
  Tensor k0 = matmul(empty({3, 0}), empty({0, 4}));
  CHECK(k0.shape() == Shape{3, 4});
  CHECK(values(k0) == V(12, 0.0));  // an empty sum is 0
  CHECK(values(matmul(empty({0}), empty({0}))) == V{0});
  CHECK(values(matmul(empty({2, 3, 0}, kF16), empty({0, 2}, kF16))) == V(12, 0.0));
  CHECK(values(matmul(empty({2, 0}, kI64), empty({0, 2}, kI64))) == V(4, 0.0));
  CHECK(matmul(zeros({0, 3}), zeros({3, 4})).shape() == Shape{0, 4});
  CHECK(matmul(zeros({2, 3}), zeros({3, 0})).shape() == Shape{2, 0});
  CHECK(matmul(zeros({0, 2, 3}), zeros({3, 4})).shape() == Shape{0, 2, 4});
  CHECK(matmul(zeros({0}), zeros({0, 5})).shape() == Shape{5});
}

TEST_CASE("matmul: f64, and f16/bf16 accumulating in f32") {
  check_matmul(random({17, 33}, kF64, 50), random({33, 9}, kF64, 51), kEpsF64, "f64");
  check_matmul(random({33, 17}, kF64, 52).t(), random({2, 33, 9}, kF64, 53), kEpsF64, "f64 transposed, batched");

  for (DType dt : {kF16, kBF16}) {
    INFO(std::string(dtype_name(dt)));
    struct Case {
      Tensor a, b;
    };
    const Case cases[] = {
        {random({13, 40}, dt, 60), random({40, 11}, dt, 61)},
        {random({40, 13}, dt, 62).t(), random({3, 40, 11}, dt, 63)},
        {random({40}, dt, 64), random({40, 7}, dt, 65)},
        // Big enough that threads split the widening; many small products on per-thread scratch;
        // an operand with no unit stride (gathered element by element).
        {random({300, 200}, dt, 66), random({200, 150}, dt, 67)},
        {random({64, 7, 9}, dt, 68), random({64, 9, 5}, dt, 69)},
        {random({40, 13, 2}, dt, 59).narrow(2, 0, 1).squeeze(2), random({13, 300}, dt, 58)},
    };
    for (const Case& c : cases) {
      // The 16-bit product is the f32 product of the same (widened) operands on the same GEMM
      // kernel (bf16 may run on AMX), rounded once.
      Tensor got = matmul(c.a, c.b);
      CHECK(got.dtype() == dt);
      const cpu::ScopedGemmKernel same_kernel(dt == kBF16 ? cpu::gemm_bf16_values_kernel() : cpu::gemm_f32_kernel());
      const V want = values(matmul(c.a.to(kF32), c.b.to(kF32)).to(dt));
      CHECK(values(got) == want);
      const double eps = dt == kF16 ? 0x1p-11 : 0x1p-8;  // the final rounding dominates
      check_matmul(c.a, c.b, eps, "16-bit");
    }
    // 4096 ones: an f16 or bf16 accumulator would stall at 2048 or 256; f32 reaches 4096.
    CHECK(values(matmul(ones({1, 4096}, dt), ones({4096, 1}, dt))) == V{4096});
    CHECK(values(matmul(ones({4096}, dt), ones({4096}, dt))) == V{4096});
  }
}

TEST_CASE("matmul: integer products are exact") {
  for (DType dt : {kI32, kI64}) {
    check_matmul(random({7, 19}, dt, 70), random({19, 5}, dt, 71), 0, "integer");
    check_matmul(random({19, 7}, dt, 72).t(), random({2, 19, 5}, dt, 73), 0, "integer transposed, batched");
    check_matmul(random({19}, dt, 74), random({19}, dt, 75), 0, "integer dot");
  }
  CHECK(values(matmul(from_vector<int64_t>({1, 2, 3, 4}, {2, 2}), from_vector<int64_t>({5, 6, 7, 8}, {2, 2}))) ==
        V{19, 22, 43, 50});
}

TEST_CASE("matmul: errors name the shapes and dtypes") {
  CHECK_THROWS_WITH_AS(matmul(zeros({2, 3}), zeros({4, 5})),
                       doctest::Contains("matmul: shapes [2,3] and [4,5] cannot be multiplied"), mdl::Error);
  CHECK_THROWS_WITH_AS(matmul(zeros({3}), zeros({4})),
                       doctest::Contains("matmul: shapes [3] and [4] cannot be multiplied"), mdl::Error);
  CHECK_THROWS_WITH_AS(matmul(zeros({2, 3, 4}), zeros({5})),
                       doctest::Contains("matmul: shapes [2,3,4] and [5] cannot be multiplied"), mdl::Error);
  CHECK_THROWS_WITH_AS(matmul(zeros({2, 2}), zeros({2, 2}, kF64)),
                       doctest::Contains("matmul: dtypes f32 and f64 differ (shapes [2,2] and [2,2])"), mdl::Error);
  CHECK_THROWS_WITH_AS(matmul(zeros({2}, kF16), zeros({2})), doctest::Contains("matmul: dtypes f16 and f32 differ"),
                       mdl::Error);
  CHECK_THROWS_WITH_AS(matmul(scalar_tensor(1), zeros({2})),
                       doctest::Contains("matmul: both arguments need at least 1 dim, got shapes [] and [2]"),
                       mdl::Error);
  CHECK_THROWS_WITH_AS(matmul(zeros({2}), scalar_tensor(1)),
                       doctest::Contains("matmul: both arguments need at least 1 dim, got shapes [2] and []"),
                       mdl::Error);
  CHECK_THROWS_WITH_AS(matmul(zeros({2, 3, 4}), zeros({3, 4, 5})),
                       doctest::Contains("matmul: shapes [2] and [3] cannot be broadcast together"), mdl::Error);
  CHECK_THROWS_WITH_AS(matmul(Tensor(), zeros({2})), doctest::Contains("matmul: undefined tensor"), mdl::Error);
}
