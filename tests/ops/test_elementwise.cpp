// Every elementwise unary and binary op against a plain double-precision loop, on contiguous,
// transposed, stepped, expanded and broadcast operands, 0-dim, zero-size and one-element
// tensors, in f32 f64 f16 bf16 i32 i64; then type promotion, the threaded path, NaN and errors.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "mdl.h"
#include "tests/support/test_util.h"
#include "kernels/core.h"  // kernels::binary, to reach the integer division kernel directly

using namespace mdl;
using namespace mdl::test;
using V = std::vector<double>;

namespace {

// v (row-major, shape `from`) broadcast to shape `to`, by NumPy's rules.
V broadcast(const V& v, const Shape& from, const Shape& to) {
  V out;
  for (int64_t src : broadcast_index(from, to)) out.push_back(v[size_t(src)]);
  return out;
}

// How an input tensor is laid out in memory.
enum class Layout { Contiguous, Transposed, Stepped, Expanded };
const char* layout_name(Layout l) {
  return l == Layout::Contiguous   ? "contiguous"
         : l == Layout::Transposed ? "transposed"
         : l == Layout::Stepped    ? "stepped"
                                   : "expanded";
}

// A tensor of `shape` and `dtype` with values uniform in [lo, hi] (whole numbers for integral
// dtypes or when `whole`), laid out as asked: transposed (permuted from the reversed shape),
// stepped (every other element of a wider last dim) or expanded (stride 0 in the last dim).
Tensor make_input(const Shape& shape, DType dtype, Layout layout, double lo, double hi, uint32_t seed,
                  bool whole = false) {
  if (shape.empty()) layout = Layout::Contiguous;
  Shape base = shape;
  if (layout == Layout::Transposed) base.assign(shape.rbegin(), shape.rend());
  if (layout == Layout::Stepped) base.back() = 2 * shape.back() + 1;
  if (layout == Layout::Expanded) base.back() = 1;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  V vals(static_cast<size_t>(shape_numel(base)));
  for (double& v : vals) {
    v = dist(rng);
    if (whole || !is_floating(dtype)) v = std::round(v);
  }
  Tensor t = from_vector<double>(vals, base.empty() ? Shape{1} : base).to(dtype);
  if (base.empty()) t = t.view({});
  switch (layout) {
    case Layout::Contiguous: return t;
    case Layout::Transposed: {
      Shape perm;
      for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) perm.push_back(d);
      return t.permute(perm);
    }
    case Layout::Stepped: return t.slice(-1, 1, base.back(), 2);
    case Layout::Expanded: return t.expand(shape);
  }
  return t;
}

Tol tol_for(DType t) {
  switch (t) {
    case DType::F64: return {1e-13, 1e-14};
    case DType::F16: return {1e-3, 1e-4};
    case DType::BF16: return {8e-3, 1e-3};
    case DType::F32: return {1e-5, 1e-6};
    default: return {0, 0};
  }
}

// The double `r` rounded to dtype t, as a kernel that rounds once would store it.
double round_to(double r, DType t) {
  switch (t) {
    case DType::F32: return double(float(r));
    case DType::F16: return double(float(Half(r)));
    case DType::BF16: return double(float(BFloat16(r)));
    default: return r;
  }
}

double sigmoid_ref(double x) { return 1 / (1 + std::exp(-x)); }

struct UnaryCase {
  const char* name;
  std::function<Tensor(const Tensor&)> op;
  double (*ref)(double);
  double lo, hi;
  bool keeps_integers;  // integral input gives integral output
};

const std::vector<UnaryCase>& unary_cases() {
  static const std::vector<UnaryCase> cases = {
      {"neg", [](const Tensor& x) { return neg(x); }, [](double x) { return -x; }, -4, 4, true},
      {"operator-", [](const Tensor& x) { return -x; }, [](double x) { return -x; }, -4, 4, true},
      {"abs", [](const Tensor& x) { return abs(x); }, [](double x) { return std::abs(x); }, -4, 4, true},
      {"exp", [](const Tensor& x) { return exp(x); }, [](double x) { return std::exp(x); }, -5, 5, false},
      {"log", [](const Tensor& x) { return log(x); }, [](double x) { return std::log(x); }, 0.05, 5, false},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, [](double x) { return std::sqrt(x); }, 0.05, 5, false},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, [](double x) { return 1 / std::sqrt(x); }, 0.05, 5, false},
      {"sin", [](const Tensor& x) { return sin(x); }, [](double x) { return std::sin(x); }, -4, 4, false},
      {"cos", [](const Tensor& x) { return cos(x); }, [](double x) { return std::cos(x); }, -4, 4, false},
      {"tanh", [](const Tensor& x) { return tanh(x); }, [](double x) { return std::tanh(x); }, -4, 4, false},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, sigmoid_ref, -8, 8, false},
      {"relu", [](const Tensor& x) { return relu(x); }, [](double x) { return x > 0 ? x : 0.0; }, -4, 4, true},
      {"gelu", [](const Tensor& x) { return gelu(x); },
       [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }, -4, 4, false},
      {"gelu_tanh", [](const Tensor& x) { return gelu(x, "tanh"); },
       [](double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }, -4, 4,
       false},
      {"silu", [](const Tensor& x) { return silu(x); }, [](double x) { return x * sigmoid_ref(x); }, -8, 8, false},
      {"square", [](const Tensor& x) { return square(x); }, [](double x) { return x * x; }, -4, 4, true},
      {"clamp", [](const Tensor& x) { return clamp(x, -1.0, 2.0); }, [](double x) { return std::clamp(x, -1.0, 2.0); },
       -4, 4, true},
      {"clamp_min", [](const Tensor& x) { return clamp(x, 0.0, std::nullopt); },
       [](double x) { return std::max(x, 0.0); }, -4, 4, true},
      {"clamp_max", [](const Tensor& x) { return clamp(x, std::nullopt, 1.0); },
       [](double x) { return std::min(x, 1.0); }, -4, 4, true},
  };
  return cases;
}

struct BinaryCase {
  const char* name;
  std::function<Tensor(const Tensor&, const Tensor&)> op;
  double (*ref)(double, double);
  enum Kind { Rounded, Approximate, Exact, Compare } kind;  // how the result is checked
  double lo, hi;
  bool whole;  // whole-number inputs, so that ties and equal elements occur
};

const std::vector<BinaryCase>& binary_cases() {
  using K = BinaryCase;
  static const std::vector<BinaryCase> cases = {
      {"add", [](const Tensor& a, const Tensor& b) { return add(a, b); }, [](double a, double b) { return a + b; },
       K::Rounded, -10, 10, false},
      {"operator+", [](const Tensor& a, const Tensor& b) { return a + b; }, [](double a, double b) { return a + b; },
       K::Rounded, -10, 10, false},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }, [](double a, double b) { return a - b; },
       K::Rounded, -10, 10, false},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }, [](double a, double b) { return a * b; },
       K::Rounded, -10, 10, false},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; }, [](double a, double b) { return a / b; },
       K::Rounded, 1, 10, false},
      {"pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); },
       [](double a, double b) { return std::pow(a, b); }, K::Approximate, 0, 3, false},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); },
       [](double a, double b) { return std::max(a, b); }, K::Exact, -3, 3, true},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); },
       [](double a, double b) { return std::min(a, b); }, K::Exact, -3, 3, true},
      {"eq", [](const Tensor& a, const Tensor& b) { return eq(a, b); },
       [](double a, double b) { return double(a == b); }, K::Compare, -3, 3, true},
      {"ne", [](const Tensor& a, const Tensor& b) { return ne(a, b); },
       [](double a, double b) { return double(a != b); }, K::Compare, -3, 3, true},
      {"lt", [](const Tensor& a, const Tensor& b) { return lt(a, b); },
       [](double a, double b) { return double(a < b); }, K::Compare, -3, 3, true},
      {"le", [](const Tensor& a, const Tensor& b) { return le(a, b); },
       [](double a, double b) { return double(a <= b); }, K::Compare, -3, 3, true},
      {"gt", [](const Tensor& a, const Tensor& b) { return gt(a, b); },
       [](double a, double b) { return double(a > b); }, K::Compare, -3, 3, true},
      {"ge", [](const Tensor& a, const Tensor& b) { return ge(a, b); },
       [](double a, double b) { return double(a >= b); }, K::Compare, -3, 3, true},
  };
  return cases;
}

// Runs one binary case on a and b and checks every element against the reference.
void check_binary(const BinaryCase& c, const Tensor& a, const Tensor& b, const std::string& what) {
  Tensor out = c.op(a, b);
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), "test");
  CHECK(out.shape() == shape);
  const DType dt = promote_types(a.dtype(), b.dtype());
  const bool int_div = std::string(c.name) == "div" && !is_floating(dt);
  const DType want_dtype = c.kind == BinaryCase::Compare ? kBool : int_div ? kF32 : dt;
  CHECK(out.dtype() == want_dtype);
  const V av = broadcast(values(a), a.shape(), shape), bv = broadcast(values(b), b.shape(), shape);
  V want(av.size());
  for (size_t i = 0; i < av.size(); ++i) {
    want[i] = c.ref(av[i], bv[i]);
    if (c.kind == BinaryCase::Rounded) want[i] = round_to(want[i], want_dtype);
  }
  check_close(values(out), want, c.kind == BinaryCase::Approximate ? tol_for(want_dtype) : kExact, what);
}

const DType kDtypes[] = {kF32, kF64, kF16, kBF16, kI32, kI64};

}  // namespace

TEST_CASE("elementwise: unary ops against a double reference on every layout and dtype") {
  const std::vector<std::pair<Shape, Layout>> inputs = {
      {{3, 4, 5}, Layout::Contiguous}, {{3, 4, 5}, Layout::Transposed}, {{3, 4, 5}, Layout::Stepped},
      {{4, 6}, Layout::Expanded},      {{}, Layout::Contiguous},        {{0, 3}, Layout::Contiguous},
      {{1}, Layout::Contiguous},       {{2, 0}, Layout::Transposed},
  };
  uint32_t seed = 1;
  for (const UnaryCase& u : unary_cases())
    for (DType dt : kDtypes)
      for (const auto& [shape, layout] : inputs) {
        const bool integral = !is_floating(dt);
        const double lo = integral ? std::ceil(u.lo) : u.lo, hi = integral ? std::floor(u.hi) : u.hi;
        Tensor x = make_input(shape, dt, layout, lo, hi, seed++);
        if (layout != Layout::Contiguous && x.numel() > 1) CHECK_FALSE(x.is_contiguous());
        std::ostringstream what;
        what << u.name << " " << dt << " " << shape_str(shape) << " " << layout_name(layout);
        Tensor y = u.op(x);
        const DType want_dtype = integral && !u.keeps_integers ? kF32 : dt;
        CHECK_MESSAGE(y.dtype() == want_dtype, what.str());
        CHECK_MESSAGE(y.shape() == shape, what.str());
        V want = values(x);
        for (double& v : want) v = u.ref(v);
        check_close(values(y), want, tol_for(want_dtype), what.str());
      }
}

TEST_CASE("elementwise: binary ops against a double reference on every layout, broadcast and dtype") {
  struct Pair {
    Shape a, b;
    Layout la, lb;
  };
  const std::vector<Pair> pairs = {
      {{3, 4, 5}, {3, 4, 5}, Layout::Contiguous, Layout::Contiguous},
      {{3, 4, 5}, {3, 4, 5}, Layout::Transposed, Layout::Stepped},
      {{3, 4, 5}, {3, 4, 5}, Layout::Stepped, Layout::Expanded},
      {{3, 1, 5}, {4, 1}, Layout::Contiguous, Layout::Contiguous},
      {{3, 1, 5}, {4, 1}, Layout::Transposed, Layout::Contiguous},
      {{}, {2, 3}, Layout::Contiguous, Layout::Contiguous},
      {{2, 3}, {}, Layout::Transposed, Layout::Contiguous},
      {{}, {}, Layout::Contiguous, Layout::Contiguous},
      {{0, 3}, {3}, Layout::Contiguous, Layout::Contiguous},
      {{2, 0}, {2, 1}, Layout::Contiguous, Layout::Contiguous},
      {{1}, {1}, Layout::Contiguous, Layout::Contiguous},
      {{1}, {2, 3}, Layout::Contiguous, Layout::Stepped},
  };
  uint32_t seed = 1000;
  for (const BinaryCase& c : binary_cases())
    for (DType dt : kDtypes)
      for (const Pair& p : pairs) {
        const bool integral = !is_floating(dt);
        // pow on integers: small bases and non-negative exponents, so results stay exact.
        const double lo = integral ? std::ceil(c.lo) : c.lo, hi = integral ? std::floor(c.hi) : c.hi;
        Tensor a = make_input(p.a, dt, p.la, lo, hi, seed++, c.whole);
        Tensor b = make_input(p.b, dt, p.lb, lo, hi, seed++, c.whole);
        std::ostringstream what;
        what << c.name << " " << dt << " " << shape_str(p.a) << " " << layout_name(p.la) << " with " << shape_str(p.b)
             << " " << layout_name(p.lb);
        check_binary(c, a, b, what.str());
      }
}

TEST_CASE("elementwise: dtype promotion") {
  Tensor a64 = from_vector<int64_t>({1, 2, 3});
  Tensor b32 = from_vector<float>({0.5f, 0.25f, -1.0f});
  Tensor r = a64 + b32;
  CHECK(r.dtype() == kF32);
  CHECK(values(r) == V{1.5, 2.25, 2});
  CHECK((b32 + a64).dtype() == kF32);
  Tensor h = from_vector<Half>({Half(1.0f), Half(2.0f), Half(3.0f)});
  CHECK((h + b32).dtype() == kF32);
  CHECK(values(h + b32) == V{1.5, 2.25, 2});
  CHECK((h * from_vector<BFloat16>({BFloat16(2.0f), BFloat16(2.0f), BFloat16(2.0f)})).dtype() == kF32);
  // A 0-dim operand does not widen a dimensioned one of the same category.
  Tensor s64 = scalar_tensor(0.1, kF64);
  Tensor rs = b32 + s64;
  CHECK(rs.dtype() == kF32);
  CHECK(values(rs) == V{double(0.5f + 0.1f), double(0.25f + 0.1f), double(-1.0f + 0.1f)});
  CHECK((s64 + b32).dtype() == kF32);
  CHECK((scalar_tensor(1, kF32) + from_vector<double>({1})).dtype() == kF64);
  CHECK((from_vector<int32_t>({1}) + scalar_tensor(5, kI64)).dtype() == kI32);
  CHECK((h + scalar_tensor(1, kF32)).dtype() == kF16);
  // ... but a 0-dim floating operand does lift an integral one.
  CHECK((a64 + scalar_tensor(0.5, kF64)).dtype() == kF64);
  CHECK((from_vector<int32_t>({1}) + from_vector<int64_t>({1})).dtype() == kI64);
  CHECK((from_vector<uint8_t>({1}) + from_vector<int32_t>({1})).dtype() == kI32);
  CHECK((from_vector<bool>({true}) + from_vector<int32_t>({1})).dtype() == kI32);
  CHECK(values(from_vector<bool>({true, false}) + from_vector<int32_t>({1, 1})) == V{2, 1});
  // True division of integers, and comparisons.
  Tensor q = from_vector<int32_t>({7, -7, 1}) / from_vector<int32_t>({2, 2, 3});
  CHECK(q.dtype() == kF32);
  CHECK(values(q) == V{3.5, -3.5, double(1.0f / 3.0f)});
  CHECK((from_vector<int64_t>({1}) / from_vector<int64_t>({2})).dtype() == kF32);
  Tensor c = lt(h, b32);
  CHECK(c.dtype() == kBool);
  CHECK(values(c) == V{0, 0, 0});
  CHECK(values(ge(a64, b32)) == V{1, 1, 1});
  CHECK(eq(a64, a64).dtype() == kBool);
}

TEST_CASE("elementwise: operators with scalars on both sides") {
  Tensor x = from_vector<float>({1, 2, 4});
  CHECK(values(x + 1) == V{2, 3, 5});
  CHECK(values(1 + x) == V{2, 3, 5});
  CHECK(values(x - 1) == V{0, 1, 3});
  CHECK(values(10 - x) == V{9, 8, 6});
  CHECK(values(x * 3) == V{3, 6, 12});
  CHECK(values(3 * x) == V{3, 6, 12});
  CHECK(values(x / 2) == V{0.5, 1, 2});
  CHECK(values(2 / x) == V{2, 1, 0.5});
  CHECK(values(-x) == V{-1, -2, -4});
  CHECK(values(x * 0.1) == V{double(1 * 0.1f), double(2 * 0.1f), double(4 * 0.1f)});
  CHECK((x + 1).dtype() == kF32);
  CHECK((x * 1e300).dtype() == kF32);  // the scalar takes the tensor's dtype, here overflowing
  CHECK(values(x * 1e300) == V{HUGE_VAL, HUGE_VAL, HUGE_VAL});

  Tensor i = from_vector<int32_t>({1, 2, 4});
  CHECK((i + 1).dtype() == kI32);
  CHECK(values(10 - i) == V{9, 8, 6});
  CHECK((10 - i).dtype() == kI32);
  CHECK((i * 2.5).dtype() == kF32);
  CHECK(values(i * 2.5) == V{2.5, 5, 10});
  CHECK(values(i + 0.5) == V{1.5, 2.5, 4.5});
  CHECK((7 / i).dtype() == kF32);
  CHECK(values(7 / i) == V{7, 3.5, 1.75});
  CHECK(values(-i) == V{-1, -2, -4});

  Tensor h = from_vector<Half>({Half(1.0f), Half(2048.0f)});
  CHECK((h * 2.0).dtype() == kF16);
  CHECK(values(h + 1) == V{2, 2048});  // 2049 rounds to even in f16
  CHECK(values(pow(x, 2.0)) == V{1, 4, 16});
  CHECK(values(pow(i, 3)) == V{1, 8, 64});
  CHECK(pow(i, 3).dtype() == kI32);
  check_close(values(pow(x, 0.5)), V{1, std::sqrt(2.0), 2}, tol_for(kF32), "pow(x, 0.5)");
}

TEST_CASE("elementwise: large tensors go through the threaded path and stay exact") {
  const Shape shape = {512, 520};  // 266240 elements, past 1 << 18
  Tensor a = make_input(shape, kF32, Layout::Contiguous, -10, 10, 1);
  Tensor b = make_input(shape, kF32, Layout::Contiguous, -10, 10, 2);
  Tensor bt = make_input(shape, kF32, Layout::Transposed, -10, 10, 3);
  Tensor row = make_input({520}, kF32, Layout::Contiguous, -10, 10, 4);
  const V av = values(a), bv = values(b), btv = values(bt), rv = broadcast(values(row), {520}, shape);
  V want(av.size());

  for (size_t i = 0; i < av.size(); ++i) want[i] = double(float(av[i] + bv[i]));
  check_close(values(a + b), want, kExact, "add");
  for (size_t i = 0; i < av.size(); ++i) want[i] = double(float(av[i] * btv[i]));
  check_close(values(a * bt), want, kExact, "mul with a transposed operand");
  for (size_t i = 0; i < av.size(); ++i) want[i] = double(float(av[i] + rv[i]));
  check_close(values(a + row), want, kExact, "broadcast add of a row");
  for (size_t i = 0; i < av.size(); ++i) want[i] = double(float(av[i] - 2.5f));
  check_close(values(a - 2.5), want, kExact, "sub of a scalar");
  for (size_t i = 0; i < av.size(); ++i) want[i] = av[i] < btv[i];
  check_close(values(lt(a, bt)), want, kExact, "lt");
  for (size_t i = 0; i < av.size(); ++i) want[i] = std::exp(btv[i] / 4);
  check_close(values(exp(bt / 4)), want, tol_for(kF32), "exp of a transposed operand");
  for (size_t i = 0; i < av.size(); ++i) want[i] = std::tanh(av[i]);
  check_close(values(tanh(a)), want, tol_for(kF32), "tanh");

  Tensor ah = a.to(kF16), bh = bt.to(kF16);
  const V ahv = values(ah), bhv = values(bh);
  for (size_t i = 0; i < av.size(); ++i) want[i] = round_to(ahv[i] * bhv[i], kF16);
  check_close(values(ah * bh), want, kExact, "f16 mul");
  for (size_t i = 0; i < av.size(); ++i) want[i] = ahv[i] > 0 ? ahv[i] : 0;
  check_close(values(relu(ah)), want, kExact, "f16 relu");
  Tensor ai = make_input(shape, kI64, Layout::Stepped, -1000, 1000, 5);
  const V aiv = values(ai);
  for (size_t i = 0; i < av.size(); ++i) want[i] = aiv[i] * aiv[i] - aiv[i];
  check_close(values(square(ai) - ai), want, kExact, "i64 square minus self");
}

TEST_CASE("elementwise: maximum, minimum, relu and clamp propagate NaN") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor a = from_vector<float>({nan, 1, nan, 2, -HUGE_VALF});
  Tensor b = from_vector<float>({1, nan, nan, 3, 0});
  V mx = values(maximum(a, b)), mn = values(minimum(a, b));
  CHECK(std::isnan(mx[0]));
  CHECK(std::isnan(mx[1]));
  CHECK(std::isnan(mx[2]));
  CHECK(mx[3] == 3);
  CHECK(mx[4] == 0);
  CHECK(std::isnan(mn[0]));
  CHECK(std::isnan(mn[1]));
  CHECK(std::isnan(mn[2]));
  CHECK(mn[3] == 2);
  CHECK(mn[4] == -HUGE_VAL);
  V r = values(relu(a));
  CHECK(std::isnan(r[0]));
  CHECK(r[1] == 1);
  CHECK(r[4] == 0);
  V c = values(clamp(a, -1.0, 1.5));
  CHECK(std::isnan(c[0]));
  CHECK(c[3] == 1.5);
  CHECK(c[4] == -1);
  for (DType dt : {kF16, kBF16, kF64}) {
    INFO(std::string(dtype_name(dt)));
    V m = values(maximum(a.to(dt), b.to(dt)));
    CHECK(std::isnan(m[0]));
    CHECK(std::isnan(m[1]));
    CHECK(m[3] == 3);
    CHECK(std::isnan(values(relu(a.to(dt)))[0]));
  }
  // Broadcast: a NaN row poisons every row it meets.
  V bm = values(maximum(from_vector<float>({nan, 0}, {2, 1}), from_vector<float>({5, 6, 7})));
  CHECK(std::isnan(bm[0]));
  CHECK(std::isnan(bm[2]));
  CHECK(bm[3] == 5);
  CHECK(bm[5] == 7);
}

TEST_CASE("elementwise: integer division by zero and negative powers throw, never trap") {
  // The public div is true division, so integers divide in f32 and zero gives inf or NaN.
  V q = values(from_vector<int32_t>({1, -1, 0}) / from_vector<int32_t>({0, 0, 0}));
  CHECK(q[0] == HUGE_VAL);
  CHECK(q[1] == -HUGE_VAL);
  CHECK(std::isnan(q[2]));
  // The kernel's integer division (reachable by direct kernel calls) reports division by zero.
  for (int64_t n : {int64_t(5), int64_t(1) << 18}) {
    Tensor a = full({n}, 7, kI32), b = ones({n}, kI32), out = empty({n}, kI32);
    b.slice(0, n - 1, n).fill_(0);  // in the last thread's chunk
    CHECK_THROWS_WITH_AS(kernels::binary(Device::cpu(), BinaryOp::Div, out, a, b),
                         doctest::Contains("div: integer division by zero (dtype i32)"), mdl::Error);
  }
  Tensor a = from_vector<int64_t>({7, -7, std::numeric_limits<int64_t>::min()});
  Tensor b = from_vector<int64_t>({2, 2, -1});
  Tensor out = empty({3}, kI64);
  kernels::binary(Device::cpu(), BinaryOp::Div, out, a, b);
  CHECK(std::vector<int64_t>(out.data_ptr<int64_t>(), out.data_ptr<int64_t>() + 3) ==
        std::vector<int64_t>{3, -3, std::numeric_limits<int64_t>::min()});  // truncates; MIN / -1 wraps
  CHECK_THROWS_WITH_AS(pow(from_vector<int32_t>({2, 3}), from_vector<int32_t>({1, -1})),
                       doctest::Contains("pow: integers to negative integer powers are not allowed (dtype i32)"),
                       mdl::Error);
}

TEST_CASE("elementwise: errors name the op and the shapes") {
  CHECK_THROWS_WITH_AS(add(zeros({2, 3}), zeros({4})),
                       doctest::Contains("add: shapes [2,3] and [4] cannot be broadcast together"), mdl::Error);
  CHECK_THROWS_WITH_AS(zeros({3}) * zeros({2}),
                       doctest::Contains("mul: shapes [3] and [2] cannot be broadcast together"), mdl::Error);
  CHECK_THROWS_WITH_AS(eq(zeros({2, 3}), zeros({3, 2})),
                       doctest::Contains("eq: shapes [2,3] and [3,2] cannot be broadcast together"), mdl::Error);
  CHECK_THROWS_WITH_AS(maximum(zeros({5, 1, 2}), zeros({3, 3})),
                       doctest::Contains("maximum: shapes [5,1,2] and [3,3] cannot be broadcast together"), mdl::Error);
  CHECK_THROWS_WITH_AS(add(Tensor(), zeros({1})), doctest::Contains("add: undefined tensor"), mdl::Error);
  CHECK_THROWS_WITH_AS(neg(from_vector<bool>({true})), doctest::Contains("neg: not defined for bool tensors"),
                       mdl::Error);
  CHECK_THROWS_WITH_AS(sub(from_vector<bool>({true}), from_vector<bool>({false})),
                       doctest::Contains("sub: not defined for bool tensors"), mdl::Error);
  CHECK_THROWS_WITH_AS(gelu(zeros({1}), "fast"),
                       doctest::Contains("gelu: approximate must be 'none' or 'tanh', got 'fast'"), mdl::Error);
  CHECK_THROWS_WITH_AS(clamp(zeros({1}), std::nullopt, std::nullopt),
                       doctest::Contains("clamp: at least one of min and max must be given"), mdl::Error);
}
