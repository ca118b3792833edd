// Gradcheck for every differentiable op. The table (tests/support/gradcheck_cases.h) holds the cases of this
// file, built from contiguous f64 leaves that reach their op through a non-contiguous view and,
// where the op broadcasts, through broadcast shapes, and the cases the nn ops' own test files add.
// Its op names must be exactly autograd::differentiable_ops(), and every case must pass.
#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "ops/gradcheck.h"
#include "autograd/node.h"
#include "autograd/op_registry.h"
#include "nn/functional.h"
#include "nn/linear_act.h"
#include "ops/native/factory.h"
#include "ops/ops.h"
#include "switches/list/toggles.h"
#include "tests/support/gradcheck_cases.h"

using namespace mdl;
namespace F = mdl::nn::functional;

namespace {

using V = std::vector<Tensor>;

using Entry = test::GradcheckCase;

// Leaf makers, all drawing from one seeded generator so the table is the same on every run.
struct Maker {
  Generator gen{2024};

  static Tensor leaf(const Tensor& t) {
    Tensor c = t.contiguous();
    c.requires_grad_();
    return c;
  }
  Tensor uniform(const Shape& s, double lo = -1.0, double hi = 1.0) {
    return leaf(rand(s, kF64, &gen) * (hi - lo) + lo);
  }
  Tensor positive(const Shape& s) { return uniform(s, 0.5, 2.0); }
  // start, start+step, ... shuffled: distinct values (no ties for max/min) that stay away
  // from the kinks of abs/relu/clamp when start is chosen off the grid.
  Tensor spaced(const Shape& s, double start, double step) {
    return leaf(reshape(randperm(shape_numel(s), &gen).to(kF64) * step + start, s));
  }
};

Tensor index(const std::vector<int64_t>& v, const Shape& s) { return from_vector(v, s); }
Tensor mask(const std::vector<int64_t>& v, const Shape& s) { return from_vector(v, s).to(kBool); }
Tensor T(const Tensor& x) { return transpose(x, 0, 1); }
// Every other element of the last dim: a view with stride 2.
Tensor every_other(const Tensor& x) { return slice(x, -1, 0, x.size(-1), 2); }

void add_elementwise(std::vector<Entry>& t, Maker& m) {
  // Binary ops: [3,1,4] (a permuted [4,1,3] leaf) against [2,4], broadcast to [3,2,4].
  auto P = [](const Tensor& x) { return permute(x, {2, 1, 0}); };
  t.push_back({"add", "[3,1,4] view + [2,4]", {m.uniform({4, 1, 3}), m.uniform({2, 4})}, [P](const V& v) {
                 return add(P(v[0]), v[1]);
               }});
  t.push_back({"add", "transposed + 0-dim, and + scalar", {m.uniform({4, 3}), m.uniform({})}, [](const V& v) {
                 return (T(v[0]) + v[1]) + 2.5;
               }});
  t.push_back({"sub", "[3,1,4] view - [2,4]", {m.uniform({4, 1, 3}), m.uniform({2, 4})}, [P](const V& v) {
                 return sub(P(v[0]), v[1]);
               }});
  t.push_back({"sub", "scalar - strided", {m.uniform({3, 8})}, [](const V& v) { return 1.0 - every_other(v[0]); }});
  t.push_back({"mul", "[3,1,4] view * [2,4]", {m.uniform({4, 1, 3}), m.uniform({2, 4})}, [P](const V& v) {
                 return mul(P(v[0]), v[1]);
               }});
  t.push_back({"mul", "x * x (same view twice)", {m.uniform({4, 3})}, [](const V& v) { return T(v[0]) * T(v[0]); }});
  t.push_back({"div", "[3,1,4] view / positive [2,4]", {m.uniform({4, 1, 3}), m.positive({2, 4})}, [P](const V& v) {
                 return div(P(v[0]), v[1]);
               }});
  t.push_back({"div", "[2,4] / positive [3,1,4] view", {m.uniform({2, 4}), m.positive({4, 1, 3})}, [P](const V& v) {
                 return div(v[0], P(v[1]));
               }});
  t.push_back({"div", "scalar / positive transposed", {m.positive({4, 3})}, [](const V& v) { return 2.0 / T(v[0]); }});
  t.push_back({"pow",
               "positive [3,1,4] view ^ [2,4] exponent (both need grad)",
               {m.positive({4, 1, 3}), m.uniform({2, 4}, -1.5, 1.5)},
               [P](const V& v) { return pow(P(v[0]), v[1]); }});
  t.push_back({"pow", "positive transposed ^ 2.5", {m.positive({4, 3})}, [](const V& v) { return pow(T(v[0]), 2.5); }});
  t.push_back({"pow", "signed transposed ^ 3", {m.uniform({4, 3})}, [](const V& v) { return pow(T(v[0]), 3.0); }});
  // Values on grids offset by 0.05: no ties between or within operands.
  t.push_back({"maximum",
               "[3,1,4] view vs [2,4]",
               {m.spaced({4, 1, 3}, -1.0, 0.2), m.spaced({2, 4}, -0.95, 0.3)},
               [P](const V& v) { return maximum(P(v[0]), v[1]); }});
  // Sums on a grid 0.03 away from the kink at 0.
  t.push_back({"add_relu",
               "[3,1,4] view + [2,4]",
               {m.spaced({4, 1, 3}, -1.0, 0.2), m.spaced({2, 4}, -0.93, 0.3)},
               [P](const V& v) { return add_relu(P(v[0]), v[1]); }});
  t.push_back({"minimum",
               "[3,1,4] view vs [2,4]",
               {m.spaced({4, 1, 3}, -1.0, 0.2), m.spaced({2, 4}, -0.95, 0.3)},
               [P](const V& v) { return minimum(P(v[0]), v[1]); }});
  Tensor c21 = mask({1, 0}, {2, 1});
  t.push_back(
      {"where", "cond [2,1], [3,1,4] view, [2,4]", {m.uniform({4, 1, 3}), m.uniform({2, 4})}, [P, c21](const V& v) {
         return where(c21, P(v[0]), v[1]);
       }});
  Tensor c34 = mask({1, 0, 0, 1, 1, 1, 0, 0, 0, 1, 0, 1}, {3, 4});
  t.push_back({"where", "cond [3,4], strided [3,4], 0-dim", {m.uniform({3, 8}), m.uniform({})}, [c34](const V& v) {
                 return where(c34, every_other(v[0]), v[1]);
               }});
  Tensor m24 = mask({1, 0, 0, 1, 0, 1, 1, 0}, {2, 4});
  t.push_back({"masked_fill", "[3,2,4] view, mask [2,4]", {m.uniform({4, 2, 3})}, [P, m24](const V& v) {
                 return masked_fill(P(v[0]), m24, 7.0);
               }});

  // Unary ops on a transposed [3,4] view; domains kept where the derivative is smooth.
  auto unary = [&](const char* op, Tensor x, std::function<Tensor(const Tensor&)> f) {
    t.push_back({op, "transposed", {x}, [f](const V& v) { return f(T(v[0])); }});
  };
  unary("neg", m.uniform({4, 3}), [](const Tensor& x) { return neg(x); });
  unary("abs", m.spaced({4, 3}, -0.55, 0.1), [](const Tensor& x) { return abs(x); });
  unary("exp", m.uniform({4, 3}), [](const Tensor& x) { return exp(x); });
  unary("log", m.positive({4, 3}), [](const Tensor& x) { return log(x); });
  unary("sqrt", m.positive({4, 3}), [](const Tensor& x) { return sqrt(x); });
  unary("rsqrt", m.positive({4, 3}), [](const Tensor& x) { return rsqrt(x); });
  unary("sin", m.uniform({4, 3}, -3, 3), [](const Tensor& x) { return sin(x); });
  unary("cos", m.uniform({4, 3}, -3, 3), [](const Tensor& x) { return cos(x); });
  unary("tanh", m.uniform({4, 3}, -2, 2), [](const Tensor& x) { return tanh(x); });
  unary("sigmoid", m.uniform({4, 3}, -3, 3), [](const Tensor& x) { return sigmoid(x); });
  unary("relu", m.spaced({4, 3}, -0.55, 0.1), [](const Tensor& x) { return relu(x); });
  unary("gelu", m.uniform({4, 3}, -3, 3), [](const Tensor& x) { return gelu(x); });
  unary("gelu_tanh", m.uniform({4, 3}, -3, 3), [](const Tensor& x) { return gelu(x, "tanh"); });
  unary("silu", m.uniform({4, 3}, -3, 3), [](const Tensor& x) { return silu(x); });
  unary("square", m.uniform({4, 3}), [](const Tensor& x) { return square(x); });
  // -1.05 ... 1.25 on a 0.1 grid: never within 0.05 of the bounds +-0.5.
  unary("clamp", m.spaced({4, 6}, -1.05, 0.1), [](const Tensor& x) { return clamp(x, -0.5, 0.5); });
  t.push_back({"clamp", "lower bound only, strided", {m.spaced({3, 8}, -1.05, 0.1)}, [](const V& v) {
                 return clamp(every_other(v[0]), -0.5, std::nullopt);
               }});
  t.push_back({"clamp", "upper bound only, strided", {m.spaced({3, 8}, -1.05, 0.1)}, [](const V& v) {
                 return clamp(every_other(v[0]), std::nullopt, 0.5);
               }});
}

void add_reductions(std::vector<Entry>& t, Maker& m) {
  // [4,3,5] from a permuted [5,3,4] leaf.
  auto P = [](const Tensor& x) { return permute(x, {2, 1, 0}); };
  using Reduce = Tensor (*)(const Tensor&, const std::vector<int64_t>&, bool);
  for (auto [op, fn] : {std::pair<const char*, Reduce>{"sum", &sum}, {"mean", &mean}}) {
    const char* name = op;
    Reduce f = fn;
    t.push_back({name, "dim 1", {m.uniform({5, 3, 4})}, [P, f](const V& v) { return f(P(v[0]), {1}, false); }});
    t.push_back(
        {name, "dim -1 keepdim", {m.uniform({5, 3, 4})}, [P, f](const V& v) { return f(P(v[0]), {-1}, true); }});
    t.push_back({name, "dims {0,2}", {m.uniform({5, 3, 4})}, [P, f](const V& v) { return f(P(v[0]), {0, 2}, false); }});
    t.push_back({name, "dims {2,0} keepdim", {m.uniform({5, 3, 4})}, [P, f](const V& v) {
                   return f(P(v[0]), {2, 0}, true);
                 }});
    t.push_back({name, "all dims", {m.uniform({5, 3, 4})}, [P, f](const V& v) { return f(P(v[0]), {}, false); }});
    t.push_back(
        {name, "all dims keepdim", {m.uniform({5, 3, 4})}, [P, f](const V& v) { return f(P(v[0]), {}, true); }});
  }
  t.push_back({"sum", "sum(x), strided", {m.uniform({3, 8})}, [](const V& v) { return sum(every_other(v[0])); }});
  t.push_back({"mean", "mean(x), transposed", {m.uniform({4, 3})}, [](const V& v) { return mean(T(v[0])); }});

  // Distinct values: the extreme is unique and stays so under a perturbation of eps.
  t.push_back(
      {"max", "all elements, permuted", {m.spaced({5, 3, 4}, -3.0, 0.1)}, [P](const V& v) { return max(P(v[0])); }});
  t.push_back(
      {"min", "all elements, permuted", {m.spaced({5, 3, 4}, -3.0, 0.1)}, [P](const V& v) { return min(P(v[0])); }});
  for (auto [op, which] : {std::pair<const char*, bool>{"max_dim", true}, {"min_dim", false}}) {
    const char* name = op;
    bool is_max = which;
    auto f = [is_max](const Tensor& x, int64_t d, bool k) { return is_max ? max(x, d, k).first : min(x, d, k).first; };
    t.push_back({name, "dim 1", {m.spaced({5, 3, 4}, -3.0, 0.1)}, [P, f](const V& v) { return f(P(v[0]), 1, false); }});
    t.push_back({name, "dim -1 keepdim", {m.spaced({5, 3, 4}, -3.0, 0.1)}, [P, f](const V& v) {
                   return f(P(v[0]), -1, true);
                 }});
    t.push_back({name, "dim 0 of a transposed 2-D", {m.spaced({4, 3}, -1.0, 0.1)}, [f](const V& v) {
                   return f(T(v[0]), 0, false);
                 }});
  }

  t.push_back(
      {"var", "dim 1, correction 1", {m.uniform({5, 3, 4})}, [P](const V& v) { return var(P(v[0]), {1}, 1, false); }});
  t.push_back({"var", "dim -1, correction 0, keepdim", {m.uniform({5, 3, 4})}, [P](const V& v) {
                 return var(P(v[0]), {-1}, 0, true);
               }});
  t.push_back({"std", "dim 1, correction 1", {m.uniform({5, 3, 4})}, [P](const V& v) {
                 return mdl::std(P(v[0]), {1}, 1, false);
               }});
  t.push_back({"std", "dims {0,2}, correction 0, keepdim", {m.uniform({5, 3, 4})}, [P](const V& v) {
                 return mdl::std(P(v[0]), {0, 2}, 0, true);
               }});
  t.push_back({"var", "dims {0,2}, correction 0", {m.uniform({5, 3, 4})}, [P](const V& v) {
                 return var(P(v[0]), {0, 2}, 0, false);
               }});
  t.push_back({"var", "all dims, correction 1", {m.uniform({5, 3, 4})}, [P](const V& v) {
                 return var(P(v[0]), {}, 1, false);
               }});

  for (auto [op, which] : {std::pair<const char*, bool>{"softmax", false}, {"log_softmax", true}}) {
    const char* name = op;
    bool log = which;
    auto f = [log](const Tensor& x, int64_t d) { return log ? log_softmax(x, d) : softmax(x, d); };
    t.push_back({name, "dim 0, transposed", {m.uniform({5, 4}, -2, 2)}, [f](const V& v) { return f(T(v[0]), 0); }});
    t.push_back({name, "dim -1, transposed", {m.uniform({5, 4}, -2, 2)}, [f](const V& v) { return f(T(v[0]), -1); }});
    t.push_back(
        {name, "dim 1 of a permuted 3-D", {m.uniform({5, 3, 4}, -2, 2)}, [f, P](const V& v) { return f(P(v[0]), 1); }});
  }
}

void add_shape_ops(std::vector<Entry>& t, Maker& m) {
  t.push_back({"view", "[6,4] transposed -> [3,2,4]", {m.uniform({4, 6})}, [](const V& v) {
                 return view(T(v[0]), {3, 2, 4});
               }});
  t.push_back({"view", "contiguous -> [2,-1]", {m.uniform({4, 6})}, [](const V& v) { return view(v[0], {2, -1}); }});
  t.push_back({"reshape", "transposed -> [3,8] (copies)", {m.uniform({4, 6})}, [](const V& v) {
                 return reshape(T(v[0]), {3, 8});
               }});
  t.push_back({"reshape", "flatten of a permuted 3-D", {m.uniform({2, 3, 4})}, [](const V& v) {
                 return flatten(permute(v[0], {2, 0, 1}), 1);
               }});
  t.push_back({"squeeze", "dim 1 of a permuted [4,1,3]", {m.uniform({3, 1, 4})}, [](const V& v) {
                 return squeeze(permute(v[0], {2, 1, 0}), 1);
               }});
  t.push_back({"squeeze", "all size-1 dims", {m.uniform({3, 1, 4, 1})}, [](const V& v) {
                 return squeeze(permute(v[0], {2, 1, 0, 3}));
               }});
  t.push_back(
      {"unsqueeze", "dim 1, transposed", {m.uniform({4, 3})}, [](const V& v) { return unsqueeze(T(v[0]), 1); }});
  t.push_back({"unsqueeze", "dim -1, strided", {m.uniform({3, 8})}, [](const V& v) {
                 return unsqueeze(every_other(v[0]), -1);
               }});
  t.push_back({"permute", "of a transposed 3-D", {m.uniform({2, 3, 4})}, [](const V& v) {
                 return permute(transpose(v[0], 0, 2), {1, 2, 0});
               }});
  t.push_back({"transpose", "of a strided view", {m.uniform({3, 8})}, [](const V& v) { return T(every_other(v[0])); }});
  t.push_back(
      {"transpose", "dims 0 and -1 of 3-D", {m.uniform({2, 3, 4})}, [](const V& v) { return transpose(v[0], 0, -1); }});
  t.push_back({"expand", "[1,3] transposed -> [2,4,3]", {m.uniform({3, 1})}, [](const V& v) {
                 return expand(T(v[0]), {2, 4, 3});
               }});
  t.push_back({"expand", "strided [3,1] -> [2,3,4]", {m.uniform({3, 2})}, [](const V& v) {
                 return expand(every_other(v[0]), {2, 3, 4});
               }});
  t.push_back(
      {"slice", "step 2 of a transposed", {m.uniform({4, 7})}, [](const V& v) { return slice(T(v[0]), 0, 1, 7, 2); }});
  t.push_back({"slice", "dim -1 step 2 of a transposed [8,3]", {m.uniform({3, 8})}, [](const V& v) {
                 return slice(T(v[0]), -1, 0, 3, 2);
               }});
  t.push_back(
      {"narrow", "dim 1, transposed", {m.uniform({4, 3})}, [](const V& v) { return narrow(T(v[0]), 1, 1, 2); }});
  t.push_back({"select", "dim 0, transposed", {m.uniform({4, 3})}, [](const V& v) { return select(T(v[0]), 0, 2); }});
  t.push_back({"select", "dim -1 of a permuted 3-D", {m.uniform({2, 3, 4})}, [](const V& v) {
                 return select(permute(v[0], {2, 0, 1}), -1, 1);
               }});
  t.push_back({"clone", "transposed", {m.uniform({4, 3})}, [](const V& v) { return clone(T(v[0])); }});
  t.push_back({"to_dtype", "f64 -> f64 (a copy), transposed", {m.uniform({4, 3})}, [](const V& v) {
                 return to_dtype(T(v[0]), kF64);
               }});
  // Through f32 the function is rounded: a larger step and loose tolerances.
  t.push_back({"to_dtype",
               "f64 -> f32 -> f64, transposed",
               {m.uniform({4, 3})},
               [](const V& v) { return to_dtype(to_dtype(T(v[0]), kF32), kF64); },
               1e-3,
               1e-2,
               1e-2});
  // cpu -> cpu only: the CUDA path needs a CUDA build.
  t.push_back({"to_device", "cpu -> cpu, transposed", {m.uniform({4, 3})}, [](const V& v) {
                 return to_device(T(v[0]), Device::cpu());
               }});
  t.push_back({"cat",
               "3 inputs along dim 1, one transposed",
               {m.uniform({3, 2}), m.uniform({2, 2}), m.uniform({2, 1})},
               [](const V& v) {
                 return cat({T(v[0]), v[1], v[2]}, 1);
               }});
  t.push_back({"split", "two halves of a transposed [4,3] multiplied", {m.uniform({3, 4})}, [](const V& v) {
                 auto p = split(T(v[0]), 2, 0);
                 return p[0] * p[1];
               }});
  t.push_back({"split", "sizes 1, 0, 2 along dim -1, one part used", {m.uniform({4, 3})}, [](const V& v) {
                 return split(v[0], std::vector<int64_t>{1, 0, 2}, -1)[2];
               }});
  t.push_back({"cat", "dim 0, strided and plain", {m.uniform({2, 8}), m.uniform({3, 4})}, [](const V& v) {
                 return cat({every_other(v[0]), v[1]}, 0);
               }});
  for (int64_t k : {-1, 0, 1}) {
    std::string what = "k = " + std::to_string(k) + ", transposed [4,5]";
    t.push_back({"tril", what, {m.uniform({5, 4})}, [k](const V& v) { return tril(T(v[0]), k); }});
    t.push_back({"triu", what, {m.uniform({5, 4})}, [k](const V& v) { return triu(T(v[0]), k); }});
  }
  t.push_back({"tril", "batched [2,3,3], permuted", {m.uniform({3, 3, 2})}, [](const V& v) {
                 return tril(permute(v[0], {2, 0, 1}));
               }});
  t.push_back({"triu", "batched [2,3,3], permuted", {m.uniform({3, 3, 2})}, [](const V& v) {
                 return triu(permute(v[0], {2, 0, 1}), 1);
               }});
}

void add_index_ops(std::vector<Entry>& t, Maker& m) {
  Tensor i5 = index({3, 0, 3, 1, 0}, {5});
  t.push_back({"index_select", "dim 1 with repeats, transposed", {m.uniform({4, 3})}, [i5](const V& v) {
                 return index_select(T(v[0]), 1, i5);
               }});
  Tensor i3 = index({2, 0, 2}, {3});
  t.push_back({"index_select", "dim 0 with repeats, transposed", {m.uniform({4, 3})}, [i3](const V& v) {
                 return index_select(T(v[0]), 0, i3);
               }});
  Tensor g1 = index({0, 4, 4, 1, 2, 2, 2, 0, 3, 1, 3, 4}, {3, 4});
  t.push_back({"gather", "dim 1 with repeats, transposed [3,5]", {m.uniform({5, 3})}, [g1](const V& v) {
                 return gather(T(v[0]), 1, g1);
               }});
  Tensor g0 = index({2, 0, 1, 1, 0, 2, 2, 0, 1, 2}, {2, 5});
  t.push_back({"gather", "dim 0 with repeats, transposed [3,5]", {m.uniform({5, 3})}, [g0](const V& v) {
                 return gather(T(v[0]), 0, g0);
               }});
  t.push_back({"scatter_add",
               "dim 1 with repeats, transposed self, strided src",
               {m.uniform({5, 3}), m.uniform({3, 8})},
               [g1](const V& v) { return scatter_add(T(v[0]), 1, g1, every_other(v[1])); }});
  t.push_back(
      {"scatter_add", "dim 0 with repeats, transposed self", {m.uniform({5, 3}), m.uniform({2, 5})}, [g0](const V& v) {
         return scatter_add(T(v[0]), 0, g0, v[1]);
       }});

  auto Tl = [](const Tensor& x) { return transpose(x, -1, -2); };
  t.push_back({"matmul", "[2,1,3,4] view @ [5,4,2]", {m.uniform({2, 1, 4, 3}), m.uniform({5, 4, 2})}, [Tl](const V& v) {
                 return matmul(Tl(v[0]), v[1]);
               }});
  t.push_back({"matmul", "2-D transposed @ 2-D", {m.uniform({4, 3}), m.uniform({4, 2})}, [](const V& v) {
                 return matmul(T(v[0]), v[1]);
               }});
  t.push_back({"matmul", "[3,4] @ [2,4]^T", {m.uniform({3, 4}), m.uniform({2, 4})}, [](const V& v) {
                 return matmul(v[0], T(v[1]));
               }});
  t.push_back({"matmul", "1-D strided @ 2-D", {m.uniform({8}), m.uniform({4, 3})}, [](const V& v) {
                 return matmul(every_other(v[0]), v[1]);
               }});
  t.push_back({"matmul", "2-D transposed @ 1-D", {m.uniform({4, 3}), m.uniform({4})}, [](const V& v) {
                 return matmul(T(v[0]), v[1]);
               }});
  t.push_back({"matmul", "1-D @ 1-D strided (dot)", {m.uniform({4}), m.uniform({8})}, [](const V& v) {
                 return matmul(v[0], every_other(v[1]));
               }});
  t.push_back({"matmul", "3-D permuted @ 1-D", {m.uniform({4, 2, 3}), m.uniform({4})}, [](const V& v) {
                 return matmul(permute(v[0], {1, 2, 0}), v[1]);
               }});
  t.push_back({"matmul", "1-D @ 3-D transposed", {m.uniform({3}), m.uniform({2, 4, 3})}, [Tl](const V& v) {
                 return matmul(v[0], Tl(v[1]));
               }});
}

// The nn ops on this file's views and generator; their own test files add cases of their own.
void add_nn_ops(std::vector<Entry>& t, Maker& m) {
  t.push_back(
      {"linear", "[2,3,4] permuted x, bias", {m.uniform({4, 2, 3}), m.uniform({5, 4}), m.uniform({5})}, [](const V& v) {
         toggles::Scoped bias_pass(toggles::Toggle::linear_bias_epilogue, false);  // linear's own node
         return F::linear(permute(v[0], {1, 2, 0}), v[1], v[2]);
       }});
  t.push_back({"linear_act",
               "linear with a bias in the epilogue (linear_bias_epilogue), [2,3,4] permuted x",
               {m.uniform({4, 2, 3}), m.uniform({5, 4}), m.uniform({5})},
               [](const V& v) {
                 toggles::Scoped epilogue(toggles::Toggle::linear_bias_epilogue, true);
                 return F::linear(permute(v[0], {1, 2, 0}), v[1], v[2]);
               }});
  t.push_back({"linear", "transposed weight, no bias", {m.uniform({3, 4}), m.uniform({4, 2})}, [](const V& v) {
                 return F::linear(v[0], T(v[1]));
               }});
  t.push_back({"linear_act",
               "gelu_tanh, [2,3,4] permuted x, bias",
               {m.uniform({4, 2, 3}), m.uniform({5, 4}), m.uniform({5})},
               [](const V& v) {
                 return F::linear(permute(v[0], {1, 2, 0}), v[1], v[2], Activation::GeluTanh);
               }});
  t.push_back({"conv2d",
               "stride (2,1), padding (1,0), transposed H/W",
               {m.uniform({1, 2, 5, 5}), m.uniform({3, 2, 3, 3}), m.uniform({3})},
               [](const V& v) {
                 return F::conv2d(transpose(v[0], 2, 3), v[1], v[2], {2, 1}, {1, 0});
               }});
  t.push_back(
      {"conv2d", "groups 2, dilation 2, no bias", {m.uniform({1, 4, 5, 5}), m.uniform({2, 2, 2, 2})}, [](const V& v) {
         return F::conv2d(v[0], v[1], Tensor(), {1, 1}, {0, 0}, {2, 2}, 2);
       }});
  t.push_back({"max_pool2d",
               "3x3 stride 2 padding 1, distinct values, transposed",
               {m.spaced({1, 2, 5, 5}, -2.5, 0.1)},
               [](const V& v) {
                 return F::max_pool2d(transpose(v[0], 2, 3), {3, 3}, {2, 2}, {1, 1});
               }});
  t.push_back({"max_pool2d_relu",
               "2x2, odd width, windows on both sides of zero, transposed",
               {m.spaced({1, 2, 5, 4}, -1.95, 0.1)},
               [](const V& v) {
                 return F::max_pool2d_relu(transpose(v[0], 2, 3), {2, 2});
               }});
  t.push_back(
      {"avg_pool2d", "3x3 stride 2 padding 1, pads excluded, transposed", {m.uniform({1, 2, 5, 5})}, [](const V& v) {
         return F::avg_pool2d(transpose(v[0], 2, 3), {3, 3}, {2, 2}, {1, 1}, false);
       }});
  t.push_back({"avg_pool2d", "2x2, pads counted", {m.uniform({1, 2, 4, 5})}, [](const V& v) {
                 return F::avg_pool2d(v[0], {2, 2}, {1, 2}, {1, 1}, true);
               }});
  t.push_back({"adaptive_avg_pool2d", "[5,7] -> [2,3], transposed", {m.uniform({1, 2, 7, 5})}, [](const V& v) {
                 return F::adaptive_avg_pool2d(transpose(v[0], 2, 3), {2, 3});
               }});
  t.push_back({"batch_norm",
               "training, affine, permuted",
               {m.uniform({5, 3, 4}), m.uniform({3}, 0.5, 1.5), m.uniform({3})},
               [](const V& v) {
                 Tensor rm = zeros({3}, kF64), rv = ones({3}, kF64);
                 return F::batch_norm(permute(v[0], {2, 1, 0}), rm, rv, v[1], v[2], true);
               }});
  t.push_back({"layer_norm",
               "last dim, affine, transposed",
               {m.uniform({3, 2, 4}), m.uniform({4}, 0.5, 1.5), m.uniform({4})},
               [](const V& v) { return F::layer_norm(transpose(v[0], 0, 1), {4}, v[1], v[2]); }});
  t.push_back({"group_norm",
               "2 groups of 2 channels, transposed",
               {m.uniform({4, 3, 2}), m.uniform({4}, 0.5, 1.5), m.uniform({4})},
               [](const V& v) { return F::group_norm(transpose(v[0], 0, 1), 2, v[1], v[2]); }});
  t.push_back({"dropout", "p 0.4, a fixed generator per call, transposed", {m.uniform({5, 4})}, [](const V& v) {
                 Generator local(77);
                 return F::dropout(T(v[0]), 0.4, true, &local);
               }});
  Tensor e = index({3, 1, 3, 0, 3, 2}, {3, 2});
  t.push_back({"embedding", "repeated rows, transposed weight", {m.uniform({3, 4})}, [e](const V& v) {
                 return F::embedding(e, T(v[0]));
               }});
  Tensor target = index({2, 0, 4, 2}, {4});
  t.push_back({"cross_entropy",
               "mean, label smoothing 0.1, transposed logits",
               {m.uniform({5, 4}, -2, 2)},
               [target](const V& v) { return F::cross_entropy(T(v[0]), target, {.label_smoothing = 0.1}); }});
  t.push_back({"cross_entropy", "sum, an ignored row", {m.uniform({4, 5}, -2, 2)}, [target](const V& v) {
                 return F::cross_entropy(v[0], target, {.ignore_index = 0, .reduction = F::Reduction::Sum});
               }});
  t.push_back({"bce_with_logits",
               "mean, transposed logits, target needing grad",
               {m.uniform({4, 3}, -3, 3), m.uniform({3, 4}, 0, 1)},
               [](const V& v) { return F::binary_cross_entropy_with_logits(T(v[0]), v[1]); }});
  Tensor amask = mask({1, 1, 0, 1, 0, 1, 0, 1, 1, 1, 1, 0, 0, 1, 1}, {3, 5});
  t.push_back(
      {"scaled_dot_product_attention",
       "mask [3,5], transposed q",
       {m.uniform({2, 4, 3}), m.uniform({2, 5, 4}), m.uniform({2, 5, 3})},
       [amask](const V& v) { return F::scaled_dot_product_attention(transpose(v[0], 1, 2), v[1], v[2], amask); }});
  t.push_back({"scaled_dot_product_attention",
               "causal, scale 0.7",
               {m.uniform({2, 3, 4}), m.uniform({2, 3, 4}), m.uniform({2, 3, 2})},
               [](const V& v) { return F::scaled_dot_product_attention(v[0], v[1], v[2], Tensor(), true, 0.7); }});
}

const test::GradcheckCases kViewAndBroadcastCases([](std::vector<Entry>& t) {
  Maker m;
  add_elementwise(t, m);
  add_reductions(t, m);
  add_shape_ops(t, m);
  add_index_ops(t, m);
  add_nn_ops(t, m);
});

// Whether a node named `op` is reachable from out's grad_fn: the case exercises its op.
bool records(const Tensor& out, const std::string& op) {
  std::vector<autograd::Node*> stack;
  std::set<autograd::Node*> seen;
  if (out.grad_fn()) stack.push_back(out.grad_fn().get());
  while (!stack.empty()) {
    autograd::Node* n = stack.back();
    stack.pop_back();
    if (!seen.insert(n).second) continue;
    if (n->name() == op) return true;
    for (const autograd::Edge& e : n->next_edges)
      if (e.fn) stack.push_back(e.fn.get());
  }
  return false;
}

std::string join(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

}  // namespace

TEST_CASE("gradcheck: the cases' ops are exactly the differentiable ops") {
  std::set<std::string> covered;
  for (const Entry& e : test::gradcheck_cases()) covered.insert(e.op);
  const std::vector<std::string> registry = autograd::differentiable_ops();
  std::vector<std::string> missing, unknown;
  for (const std::string& op : registry)
    if (!covered.count(op)) missing.push_back(op);
  for (const std::string& op : covered)
    if (std::find(registry.begin(), registry.end(), op) == registry.end()) unknown.push_back(op);
  CHECK_MESSAGE(missing.empty(), "ops with a backward but no gradcheck case: ", join(missing));
  CHECK_MESSAGE(unknown.empty(), "gradcheck cases for ops missing from the registry: ", join(unknown));
}

TEST_CASE("gradcheck: every case records its op and passes") {
  for (const Entry& e : test::gradcheck_cases()) {
    std::string name = e.op + " (" + e.what + ")";
    INFO(name);
    try {
      Tensor out = e.fn(e.inputs);
      CHECK_MESSAGE(records(out, e.op), name, ": no ", e.op, " node in the recorded graph");
      auto r = autograd::gradcheck(e.fn, e.inputs, e.eps, e.atol, e.rtol);
      CHECK_MESSAGE(r.ok, name, ": ", r.report);
    } catch (const std::exception& ex) {
      std::string msg = name + " threw: " + ex.what();
      FAIL_CHECK(msg);
    }
  }
}

TEST_CASE("gradcheck: an f32 -> f16 cast returns an f32 gradient to an f32 leaf") {
  Tensor x = from_vector<float>({0.5f, -1.25f, 3.0f, 2.0f, -0.75f, 1.5f}, {2, 3});
  x.requires_grad_();
  Tensor y = x.to(kF16);
  CHECK(y.dtype() == kF16);
  sum(y.to(kF32) * 2.0).backward();
  REQUIRE(x.grad().defined());
  CHECK(x.grad().dtype() == kF32);
  CHECK(x.grad().shape() == Shape{2, 3});
  for (float g : x.grad().to_vector<float>()) CHECK(g == 2.0f);
}

TEST_CASE("gradcheck: to_device to the same device keeps the leaf a leaf") {
  Tensor x = ones({2, 3}, kF64);
  x.requires_grad_();
  Tensor y = to_device(x, Device::cpu());
  CHECK(x.is_leaf());
  CHECK_FALSE(y.is_leaf());
  sum(y * 3.0).backward();
  REQUIRE(x.grad().defined());
  for (double g : x.grad().to_vector<double>()) CHECK(g == 3.0);
}
