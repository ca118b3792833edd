// Reductions (sum, mean, max, min, prod, max/min with indices, var/std, sum_to) against plain
// double-precision loops: every dim set, negative dims, keepdim, non-contiguous and expanded
// inputs, 0-dim, one-element and zero-size tensors, f32 f64 f16 bf16 and integers, tensors big
// enough to thread, results independent of the thread count, NaN, and every error message.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "mdl.h"
#include "tests/support/test_util.h"
#include "ops/native/native.h"  // native::reduce for prod, native::sum_to
#include "tensor/parallel.h"    // set_num_threads

using namespace mdl;
using namespace mdl::test;
using V = std::vector<double>;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

// Reference: reduce row-major values v of `shape` over the masked dims; keepdim order.
V ref_reduce(ReduceOp op, const V& v, const Shape& shape, const std::vector<bool>& mask) {
  Shape oshape = shape;
  for (size_t d = 0; d < shape.size(); ++d)
    if (mask[d]) oshape[d] = 1;
  const int64_t M = shape_numel(oshape);
  V acc(size_t(M), op == ReduceOp::Prod ? 1.0 : op == ReduceOp::Max ? -INFINITY : op == ReduceOp::Min ? INFINITY : 0.0);
  std::vector<int64_t> count(size_t(M), 0);
  const Shape ostr = contiguous_strides(oshape);
  for (int64_t i = 0; i < int64_t(v.size()); ++i) {
    int64_t rem = i, o = 0;
    for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
      const int64_t k = rem % shape[size_t(d)];
      rem /= shape[size_t(d)];
      if (!mask[size_t(d)]) o += k * ostr[size_t(d)];
    }
    double& a = acc[size_t(o)];
    const double x = v[size_t(i)];
    ++count[size_t(o)];
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Mean: a += x; break;
      case ReduceOp::Prod: a *= x; break;
      case ReduceOp::Max: a = (std::isnan(x) || x > a) && !std::isnan(a) ? x : a; break;
      case ReduceOp::Min: a = (std::isnan(x) || x < a) && !std::isnan(a) ? x : a; break;
    }
  }
  if (op == ReduceOp::Mean)
    for (size_t m = 0; m < acc.size(); ++m) acc[m] = count[m] ? acc[m] / double(count[m]) : kNaN;
  return acc;
}

V ref_var(const V& v, const Shape& shape, const std::vector<bool>& mask, int64_t correction) {
  V mean = ref_reduce(ReduceOp::Mean, v, shape, mask);
  Shape oshape = shape;
  for (size_t d = 0; d < shape.size(); ++d)
    if (mask[d]) oshape[d] = 1;
  const Shape ostr = contiguous_strides(oshape);
  V ss(mean.size(), 0.0);
  int64_t n = 1;
  for (size_t d = 0; d < shape.size(); ++d)
    if (mask[d]) n *= shape[d];
  for (int64_t i = 0; i < int64_t(v.size()); ++i) {
    int64_t rem = i, o = 0;
    for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
      const int64_t k = rem % shape[size_t(d)];
      rem /= shape[size_t(d)];
      if (!mask[size_t(d)]) o += k * ostr[size_t(d)];
    }
    const double dv = v[size_t(i)] - mean[size_t(o)];
    ss[size_t(o)] += dv * dv;
  }
  for (double& s : ss) s /= double(std::max<int64_t>(0, n - correction));
  return ss;
}

std::vector<bool> mask_of(int64_t bits, int64_t ndim) {
  std::vector<bool> m(static_cast<size_t>(ndim));
  for (int64_t d = 0; d < ndim; ++d) m[size_t(d)] = (bits >> d) & 1;
  return m;
}

std::vector<int64_t> dims_of(const std::vector<bool>& m, bool negative) {
  std::vector<int64_t> dims;
  const int64_t n = int64_t(m.size());
  for (int64_t d = 0; d < n; ++d)
    if (m[size_t(d)]) dims.push_back(negative ? d - n : d);
  return dims;
}

Shape squeezed(const Shape& s, const std::vector<bool>& m) {
  Shape r;
  for (size_t d = 0; d < s.size(); ++d)
    if (!m[d]) r.push_back(s[d]);
  return r;
}

// The same [3,4,5] values laid out four ways: contiguous, permuted, stepped, and expanded.
std::vector<std::pair<std::string, Tensor>> layouts(DType t) {
  std::vector<std::pair<std::string, Tensor>> r;
  r.emplace_back("contiguous", randn({3, 4, 5}, t));
  r.emplace_back("permuted", randn({5, 3, 4}, t).permute({1, 2, 0}));
  r.emplace_back("stepped", randn({3, 9, 5}, t).slice(1, 1, 9, 2));
  r.emplace_back("expanded", randn({3, 1, 5}, t).expand({3, 4, 5}));
  r.emplace_back("transposed", randn({5, 4, 3}, t).transpose(0, 2));
  return r;
}

double rtol_for(DType t) { return t == kF16 ? 2e-3 : t == kBF16 ? 1.6e-2 : t == kF32 ? 2e-6 : 1e-12; }

const ReduceOp kOps[] = {ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max, ReduceOp::Min, ReduceOp::Prod};

}  // namespace

TEST_CASE("reduce: every op, dim set, layout and floating dtype against a double loop") {
  manual_seed(1);
  for (DType t : {kF32, kF64, kF16, kBF16})
    for (auto& [layout, x0] : layouts(t))
      for (ReduceOp op : kOps) {
        // Products of 60 normals underflow; keep factors near 1.
        const Tensor x = op == ReduceOp::Prod ? (x0 * 0.1 + 1.0).to(t) : x0;
        const V xv = x.to_vector<double>();
        for (int64_t bits = 0; bits < 8; ++bits)
          for (bool keepdim : {false, true})
            for (bool negative : {false, true}) {
              const std::vector<bool> m = mask_of(bits, 3);
              const std::vector<int64_t> dims = dims_of(m, negative);
              if (bits == 0 && negative) continue;
              const Tensor r = native::reduce(op, x, dims, keepdim);
              const std::vector<bool> mm = bits == 0 ? mask_of(7, 3) : m;  // no dims: all of them
              Shape ks = x.shape();
              for (size_t d = 0; d < 3; ++d)
                if (mm[d]) ks[d] = 1;
              const std::string what = std::string(reduce_op_name(op)) + " " + dtype_name(t) + " " + layout + " dims " +
                                       shape_str(dims) + (keepdim ? " keepdim" : "");
              INFO(what);
              CHECK(r.dtype() == t);
              CHECK(r.shape() == (keepdim ? ks : squeezed(x.shape(), mm)));
              const double rtol = rtol_for(t) * (op == ReduceOp::Prod ? 4 : 1);
              check_close(r, ref_reduce(op, xv, x.shape(), mm), {.rtol = rtol, .atol = rtol}, what);
            }
      }
}

TEST_CASE("reduce: four dims, including the batch-norm set {0,2,3} and the bias set {0}") {
  manual_seed(2);
  const Tensor x = randn({4, 6, 7, 8});
  const V xv = x.to_vector<double>();
  for (int64_t bits = 1; bits < 16; ++bits) {
    const std::vector<bool> m = mask_of(bits, 4);
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max}) {
      const Tensor r = native::reduce(op, x, dims_of(m, false), true);
      check_close(r, ref_reduce(op, xv, x.shape(), m), {.rtol = 2e-6, .atol = 2e-6},
                  std::string(reduce_op_name(op)) + " dims " + shape_str(dims_of(m, false)));
    }
  }
}

TEST_CASE("reduce: the public sum, mean, max, min") {
  manual_seed(3);
  const Tensor x = randn({6, 7});
  const V xv = x.to_vector<double>();
  check_close(sum(x), ref_reduce(ReduceOp::Sum, xv, {6, 7}, {true, true}), {.rtol = 1e-6, .atol = 1e-6}, "sum");
  check_close(sum(x, {1}), ref_reduce(ReduceOp::Sum, xv, {6, 7}, {false, true}), {.rtol = 1e-6, .atol = 1e-6}, "sum 1");
  check_close(mean(x, {0}, true), ref_reduce(ReduceOp::Mean, xv, {6, 7}, {true, false}), {.rtol = 1e-6, .atol = 1e-6},
              "mean 0");
  CHECK(sum(x).dim() == 0);
  CHECK(mean(x, {0}, true).shape() == Shape{1, 7});
  CHECK(max(x).item<double>() == ref_reduce(ReduceOp::Max, xv, {6, 7}, {true, true})[0]);
  CHECK(min(x).item<double>() == ref_reduce(ReduceOp::Min, xv, {6, 7}, {true, true})[0]);
}

TEST_CASE("reduce: integer and bool inputs (sums widen to i64, max/min keep the dtype)") {
  manual_seed(4);
  for (DType t : {kI32, kI64, kU8, kBool}) {
    const Tensor x = t == kBool ? randint(0, 2, {5, 6}, kI64).to(kBool)
                     : t == kU8 ? randint(0, 200, {5, 6}, kU8)
                                : randint(-100, 100, {5, 6}, t);
    const V xv = x.to_vector<double>();
    for (int64_t bits = 1; bits < 4; ++bits) {
      const std::vector<bool> m = mask_of(bits, 2);
      INFO(dtype_name(t), " dims ", shape_str(dims_of(m, false)));
      const Tensor s = native::reduce(ReduceOp::Sum, x, dims_of(m, false), false);
      CHECK(s.dtype() == kI64);
      check_close(s, ref_reduce(ReduceOp::Sum, xv, x.shape(), m), kExact, "sum");
      for (ReduceOp op : {ReduceOp::Max, ReduceOp::Min}) {
        const Tensor r = native::reduce(op, x, dims_of(m, false), false);
        CHECK(r.dtype() == t);
        check_close(r, ref_reduce(op, xv, x.shape(), m), kExact, reduce_op_name(op));
      }
    }
  }
  // Products wrap like int64 arithmetic; a small exact one.
  const Tensor p = from_vector<int32_t>({2, -3, 4, 5, 1, -1}, {2, 3});
  CHECK(native::reduce(ReduceOp::Prod, p, {1}, false).to_vector<int64_t>() == std::vector<int64_t>{-24, -5});
  // Sums past int32 range do not overflow.
  const Tensor big = full({1000}, 2147483647.0, kI32);
  CHECK(sum(big).item<int64_t>() == int64_t(2147483647) * 1000);
}

TEST_CASE("reduce: 0-dim, one-element and zero-size tensors") {
  const Tensor s = scalar_tensor(2.5);
  for (const std::vector<int64_t>& dims : {std::vector<int64_t>{}, {0}, {-1}})
    for (bool keepdim : {false, true}) {
      const Tensor r = native::reduce(ReduceOp::Sum, s, dims, keepdim);
      CHECK(r.dim() == 0);
      CHECK(r.item<float>() == 2.5f);
      CHECK(native::reduce(ReduceOp::Max, s, dims, keepdim).item<float>() == 2.5f);
      CHECK(native::reduce(ReduceOp::Mean, s, dims, keepdim).item<float>() == 2.5f);
    }
  const Tensor one = full({1, 1, 1}, -4.0);
  CHECK(native::reduce(ReduceOp::Sum, one, {1}, false).shape() == Shape{1, 1});
  CHECK(native::reduce(ReduceOp::Min, one, {}, false).item<float>() == -4.0f);
  CHECK(native::reduce(ReduceOp::Prod, one, {0, 2}, true).shape() == Shape{1, 1, 1});

  const Tensor z = zeros({2, 0, 3});
  CHECK(native::reduce(ReduceOp::Sum, z, {1}, false).to_vector<float>() == std::vector<float>(6, 0.0f));
  CHECK(native::reduce(ReduceOp::Prod, z, {1}, false).to_vector<float>() == std::vector<float>(6, 1.0f));
  for (float v : native::reduce(ReduceOp::Mean, z, {1}, false).to_vector<float>()) CHECK(std::isnan(v));
  CHECK(native::reduce(ReduceOp::Sum, z, {0}, false).shape() == Shape{0, 3});
  CHECK(native::reduce(ReduceOp::Max, z, {0}, true).shape() == Shape{1, 0, 3});  // dim 0 is not empty
  CHECK(sum(z).item<float>() == 0.0f);
  CHECK(std::isnan(mean(z).item<float>()));
  CHECK(sum(zeros({0}, kI32)).dtype() == kI64);
}

TEST_CASE("reduce: NaN wins max and min, and propagates through sums") {
  Tensor x = from_vector<float>({1, 2, NAN, 4, 5, 6, 7, 8, 9, -1, 3, 2}, {3, 4});
  const V xv = x.to_vector<double>();
  for (ReduceOp op : kOps)
    for (int64_t bits = 1; bits < 4; ++bits) {
      const std::vector<bool> m = mask_of(bits, 2);
      check_close(native::reduce(op, x, dims_of(m, false), true), ref_reduce(op, xv, x.shape(), m),
                  {.rtol = 1e-6, .atol = 1e-6}, reduce_op_name(op));
    }
  // Long rows take the vectorised path; a NaN in any lane wins.
  Tensor big = randn({3, 1000});
  big.select(0, 1).narrow(0, 777, 1).fill_(NAN);
  const std::vector<float> mx = native::reduce(ReduceOp::Max, big, {1}, false).to_vector<float>();
  const std::vector<float> mn = native::reduce(ReduceOp::Min, big.t().contiguous(), {0}, false).to_vector<float>();
  CHECK(!std::isnan(mx[0]));
  CHECK(std::isnan(mx[1]));
  CHECK(!std::isnan(mx[2]));
  CHECK(std::isnan(mn[1]));
  CHECK(!std::isnan(mn[0]));
}

TEST_CASE("reduce: large tensors cross the parallel grain, all loop shapes, thread-count independent") {
  manual_seed(5);
  struct Case {
    Shape shape;
    std::vector<int64_t> dims;
  };
  const Case cases[] = {
      {{1 << 20}, {}},                // one output: threads split the blocks
      {{2, 1 << 19}, {1}},            // few long rows
      {{1 << 16, 16}, {0}},           // bias gradient: rows accumulate, few outputs
      {{1 << 12, 256}, {0}},          // rows accumulate, many outputs
      {{256, 1 << 12}, {1}},          // many row sums
      {{1 << 18, 4}, {1}},            // many tiny rows
      {{16, 32, 32, 64}, {0, 2, 3}},  // batch norm over N, H, W
      {{64, 16, 32, 32}, {0, 2, 3}},
  };
  for (const Case& c : cases) {
    const Tensor x = randn(c.shape) + 3.0;
    const V xv = x.to_vector<double>();
    std::vector<bool> m(c.shape.size(), c.dims.empty());
    for (int64_t d : c.dims) m[size_t(d)] = true;
    const std::string what = shape_str(c.shape) + " dims " + shape_str(c.dims);
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max}) {
      const Tensor r = native::reduce(op, x, c.dims, false);
      check_close(r, ref_reduce(op, xv, c.shape, m), {.rtol = 1e-6, .atol = 1e-6}, what + " " + reduce_op_name(op));
      const int before = get_num_threads();
      set_num_threads(1);
      const Tensor r1 = native::reduce(op, x, c.dims, false);
      set_num_threads(before);
      CHECK_MESSAGE(r1.to_vector<float>() == r.to_vector<float>(), what, " differs on one thread");
    }
    const Tensor h = x.to(kF16);
    check_close(native::reduce(ReduceOp::Mean, h, c.dims, false),
                ref_reduce(ReduceOp::Mean, h.to_vector<double>(), c.shape, m), {.rtol = 1e-3, .atol = 1e-3},
                what + " f16");
    check_close(var(x, c.dims, 1, false), ref_var(xv, c.shape, m, 1), {.rtol = 1e-5, .atol = 1e-6}, what + " var");
  }
}

TEST_CASE("reduce: max/min with indices along each dim; ties take the first, NaN its own index") {
  manual_seed(6);
  auto check = [](const Tensor& x, int64_t dim, bool keepdim, const std::string& what) {
    INFO(what, " dim ", dim, keepdim ? " keepdim" : "");
    const V xv = x.to_vector<double>();
    const int64_t nd = x.dim(), d = dim < 0 ? dim + nd : dim;
    for (bool is_max : {true, false}) {
      auto [v, i] = is_max ? max(x, dim, keepdim) : min(x, dim, keepdim);
      Shape ks = x.shape();
      ks[size_t(d)] = 1;
      Shape want = keepdim ? ks : x.shape();
      if (!keepdim) want.erase(want.begin() + d);
      CHECK(v.shape() == want);
      CHECK(i.shape() == want);
      CHECK(i.dtype() == kI64);
      CHECK(v.dtype() == x.dtype());
      const V vv = v.to_vector<double>();
      const std::vector<int64_t> iv = i.to_vector<int64_t>();
      // Reference: scan along d in order.
      const Shape st = contiguous_strides(x.shape());
      const int64_t n = x.size(d), M = x.numel() / n;
      for (int64_t m = 0; m < M; ++m) {
        int64_t rem = m, base = 0;
        for (int64_t e = nd - 1; e >= 0; --e) {
          if (e == d) continue;
          base += rem % x.size(e) * st[size_t(e)];
          rem /= x.size(e);
        }
        double best = xv[size_t(base)];
        int64_t bi = 0;
        for (int64_t k = 1; k < n && !std::isnan(best); ++k) {
          const double y = xv[size_t(base + k * st[size_t(d)])];
          if (std::isnan(y) || (is_max ? y > best : y < best)) best = y, bi = k;
        }
        CHECK(iv[size_t(m)] == bi);
        if (std::isnan(best)) CHECK(std::isnan(vv[size_t(m)]));
        else CHECK(vv[size_t(m)] == best);
      }
      CHECK((is_max ? argmax(x, dim, keepdim) : argmin(x, dim, keepdim)).to_vector<int64_t>() == iv);
    }
  };
  for (auto& [layout, x] : layouts(kF32))
    for (int64_t dim = -3; dim < 3; ++dim)
      for (bool keepdim : {false, true}) check(x, dim, keepdim, layout);
  // Many ties.
  const Tensor ties = randint(0, 3, {7, 300}, kI32);
  for (int64_t dim : {0, 1}) check(ties, dim, false, "ties i32");
  check(ties.t(), 0, false, "ties i32 transposed");
  check(ties.to(kBool), 1, true, "bool");
  check(randn({6, 9}, kF16), 0, false, "f16");
  check(randn({6, 9}, kBF16).t(), 1, false, "bf16");
  // NaN: the first NaN wins wherever it is.
  Tensor xn = randn({4, 50});
  xn.select(0, 1).narrow(0, 10, 1).fill_(NAN);
  xn.select(0, 1).narrow(0, 30, 1).fill_(NAN);
  xn.select(0, 3).narrow(0, 0, 1).fill_(NAN);
  check(xn, 1, false, "NaN rows");
  check(xn.t().contiguous(), 0, false, "NaN columns");
  // Big enough to thread, both shapes.
  check(randn({300, 500}), 1, false, "big rows");
  check(randn({300, 500}), 0, false, "big columns");
  // 0-dim: the value and index 0.
  auto [v0, i0] = max(scalar_tensor(3.0), 0);
  CHECK(v0.dim() == 0);
  CHECK(v0.item<float>() == 3.0f);
  CHECK(i0.item<int64_t>() == 0);
  // A zero-size dim that is not the reduced one gives empty results.
  auto [ve, ie] = min(zeros({0, 4}), 1);
  CHECK(ve.shape() == Shape{0});
  CHECK(ie.shape() == Shape{0});
}

TEST_CASE("reduce: var and std over dim sets, corrections and dtypes") {
  manual_seed(7);
  for (DType t : {kF32, kF64, kF16, kBF16})
    for (auto& [layout, x] : layouts(t)) {
      const V xv = x.to_vector<double>();
      for (int64_t bits = 1; bits < 8; ++bits)
        for (int64_t correction : {0, 1, 2}) {
          const std::vector<bool> m = mask_of(bits, 3);
          const Tensor r = var(x, dims_of(m, true), correction, true);
          CHECK(r.dtype() == t);
          const std::string what = std::string(dtype_name(t)) + " " + layout + " dims " + shape_str(dims_of(m, false)) +
                                   " correction " + std::to_string(correction);
          const V want = ref_var(xv, x.shape(), m, correction);
          check_close(r, want, {.rtol = rtol_for(t) * 4, .atol = rtol_for(t) * 4}, what);
          V sd = want;
          for (double& s : sd) s = std::sqrt(s);
          check_close(mdl::std(x, dims_of(m, false), correction, true), sd,
                      {.rtol = rtol_for(t) * 4, .atol = rtol_for(t) * 4}, what + " std");
        }
    }
  // Two-pass: a large offset does not cost precision.
  const Tensor x = randn({4, 5000}, kF64).to(kF32) + 1e4;
  check_close(var(x, {1}), ref_var(x.to_vector<double>(), {4, 5000}, {false, true}, 1), {.rtol = 1e-5, .atol = 0},
              "offset 1e4");
  // One element with correction 1: 0/0.
  CHECK(std::isnan(var(ones({3, 1}), {1}).to_vector<float>()[0]));
  CHECK(var(ones({3, 1}), {1}, 0).to_vector<float>()[0] == 0.0f);
  CHECK(var(ones({2, 3}), {}, 1, false).dim() == 0);
  CHECK(std::isnan(var(zeros({0, 3}), {0}).to_vector<float>()[0]));
}

TEST_CASE("reduce: f32 sums of same-sign terms stay within a few ulps, and constant data has no spread") {
  const double eps = std::numeric_limits<float>::epsilon();
  for (double v : {0.1, 0.3, 3.7, 7.77, 1e8}) {
    CAPTURE(v);
    const double fv = double(float(v));
    const struct {
      Tensor x;
      std::vector<int64_t> dims;
    } cases[] = {
        {full({4096, 2}, v), {0}},        // rows accumulate into two outputs
        {full({100000, 3}, v), {0}},      // many blocks of rows
        {full({300000}, v), {0}},         // lanes along a contiguous row
        {full({300000}, v, kBF16), {0}},  // converted in chunks
        {full({64, 3, 500}, v), {0, 2}},  // runs of a strided row
    };
    for (const auto& c : cases) {
      CAPTURE(c.x.shape());
      CAPTURE(c.x.dtype());
      const double want = c.x.dtype() == kBF16 ? double(BFloat16(float(v))) : fv;
      for (double got : mean(c.x, c.dims).to_vector<double>()) CHECK(std::abs(got - want) <= 4 * eps * want);
      for (double got : var(c.x, c.dims).to_vector<double>()) CHECK(got == 0.0);
      for (double got : mdl::std(c.x, c.dims).to_vector<double>()) CHECK(got == 0.0);
    }
  }
  // Away from constant: a spread of 1 around 1e8 (f32 spacing 8) is resolved.
  Tensor x = full({10000}, 1e8);
  x.narrow(0, 0, 5000).fill_(1e8 + 8);
  CHECK(var(x, {0}, 0).item<float>() == doctest::Approx(16.0).epsilon(1e-6));
}

TEST_CASE("reduce: f32 var whose squares overflow float but whose mean square does not is finite") {
  Tensor x = zeros({1000});
  x.narrow(0, 0, 1).fill_(1e20);  // (1e20)^2 is over the f32 range; the variance, about 1e37, is not
  const double want = 1e37;       // squared deviations 0.999e40 in all, over 999
  CHECK(var(x, {0}).item<float>() == doctest::Approx(want).epsilon(1e-6));
  const Tensor cols = x.reshape({1000, 1}).expand({1000, 4}).contiguous();
  for (double got : var(cols, {0}).to_vector<double>()) CHECK(got == doctest::Approx(want).epsilon(1e-6));
  CHECK(std::isinf(var(from_vector<float>({3e38f, -3e38f}), {0}).item<float>()));  // a variance over the range
  CHECK(std::isnan(var(from_vector<float>({1.f, float(kNaN)}), {0}).item<float>()));
}

TEST_CASE("reduce: sum_to undoes broadcasting") {
  manual_seed(8);
  const Tensor x = randn({2, 3, 4});
  const V xv = x.to_vector<double>();
  CHECK(native::sum_to(x, {2, 3, 4}).is_same(x));
  auto want = [&](std::vector<bool> m) { return ref_reduce(ReduceOp::Sum, xv, {2, 3, 4}, m); };
  check_close(native::sum_to(x, {3, 4}), want({true, false, false}), {.rtol = 1e-6, .atol = 1e-6}, "[3,4]");
  check_close(native::sum_to(x, {1, 4}), want({true, true, false}), {.rtol = 1e-6, .atol = 1e-6}, "[1,4]");
  check_close(native::sum_to(x, {2, 1, 4}), want({false, true, false}), {.rtol = 1e-6, .atol = 1e-6}, "[2,1,4]");
  check_close(native::sum_to(x, {3, 1}), want({true, false, true}), {.rtol = 1e-6, .atol = 1e-6}, "[3,1]");
  const Tensor s = native::sum_to(x, {});
  CHECK(s.dim() == 0);
  CHECK(s.item<double>() == doctest::Approx(want({true, true, true})[0]).epsilon(1e-6));
  CHECK(native::sum_to(x, {1, 3, 1}).shape() == Shape{1, 3, 1});
  CHECK(native::sum_to(randint(0, 5, {4, 3}, kI32), {3}).dtype() == kI32);
  CHECK_THROWS_WITH_AS(native::sum_to(x, {5, 4}), doctest::Contains("sum_to: cannot reduce shape [2,3,4] to [5,4]"),
                       Error);
  CHECK_THROWS_WITH_AS(native::sum_to(x, {1, 2, 3, 4}), doctest::Contains("sum_to: cannot reduce shape [2,3,4]"),
                       Error);
}

TEST_CASE("reduce: error messages") {
  const Tensor x = randn({2, 3, 4});
  CHECK_THROWS_WITH_AS(sum(x, {3}), doctest::Contains("sum: dim 3 out of range for a tensor of 3 dims"), Error);
  CHECK_THROWS_WITH_AS(mean(x, {-4}), doctest::Contains("mean: dim -4 out of range"), Error);
  CHECK_THROWS_WITH_AS(sum(x, {1, 1}), doctest::Contains("sum: dim 1 appears more than once in dims [1,1]"), Error);
  CHECK_THROWS_WITH_AS(sum(x, {2, -1}), doctest::Contains("sum: dim 2 appears more than once in dims [2,-1]"), Error);
  CHECK_THROWS_WITH_AS(mean(randint(0, 5, {3}, kI64)),
                       doctest::Contains("mean: cannot average a tensor of integral dtype i64"), Error);
  CHECK_THROWS_WITH_AS(mean(ones({3}, kBool), {0}), doctest::Contains("integral dtype bool"), Error);
  CHECK_THROWS_WITH_AS(max(zeros({2, 0})), doctest::Contains("max: cannot reduce over dim 1 of size 0 (shape [2,0])"),
                       Error);
  CHECK_THROWS_WITH_AS(native::reduce(ReduceOp::Min, zeros({0, 3}), {0}, false),
                       doctest::Contains("min: cannot reduce over dim 0 of size 0"), Error);
  CHECK_THROWS_WITH_AS(max(zeros({3, 0}), 1), doctest::Contains("max: cannot reduce over dim 1 of size 0"), Error);
  CHECK_THROWS_WITH_AS(argmin(zeros({0}), 0), doctest::Contains("min: cannot reduce over dim 0 of size 0"), Error);
  CHECK_THROWS_WITH_AS(max(x, 3), doctest::Contains("max: dim 3 out of range"), Error);
  CHECK_THROWS_WITH_AS(argmax(x, -4), doctest::Contains("max: dim -4 out of range"), Error);
  CHECK_THROWS_WITH_AS(var(randint(0, 5, {3}, kI32), {0}),
                       doctest::Contains("var: expected a floating dtype (f32, f16, bf16, f64), got i32"), Error);
  CHECK_THROWS_WITH_AS(var(x, {0, 0}), doctest::Contains("var: dim 0 appears more than once"), Error);
  CHECK_THROWS_WITH_AS(sum(scalar_tensor(1.0), {1}),
                       doctest::Contains("sum: dim 1 out of range for a tensor of 0 dims"), Error);
}
