// Autocast: the dtype each listed op computes in under f16 and bf16, op by op; nesting and
// disabling; f64 left alone; the cast cache (one cast per parameter per region, cleared on exit,
// renewed after an in-place update); gradients reaching f32 parameters as f32 and close to the
// f32 ones; f32 accumulation inside 16-bit matmul and conv; modules kept in f32 (hybrid
// precision); bad dtypes refused.
#include <doctest/doctest.h>

#include <cmath>
#include <memory>
#include <functional>
#include <vector>

#include "ops/autocast.h"
#include "amp/grad_scaler.h"
#include "amp/keep_f32.h"
#include "autograd/node.h"
#include "mdl.h"
#include "tests/support/test_util.h"
#include "nn/functional.h"
#include "nn/models/models.h"
#include "switches/list/toggles.h"

using namespace mdl;
namespace F = mdl::nn::functional;
using mdl::test::max_rel_diff;

namespace {

Tensor param(const Shape& s) { return randn(s).requires_grad_(); }

}  // namespace

TEST_CASE("autocast: off by default, on inside a guard, restored by nesting") {
  CHECK_FALSE(amp::is_autocast_enabled());
  {
    amp::AutocastGuard outer(kBF16);
    CHECK(amp::is_autocast_enabled());
    CHECK(amp::autocast_dtype() == kBF16);
    {
      amp::AutocastGuard inner(kF16);
      CHECK(amp::autocast_dtype() == kF16);
      {
        amp::AutocastGuard off(kF16, /*enabled=*/false);
        CHECK_FALSE(amp::is_autocast_enabled());
      }
      CHECK(amp::is_autocast_enabled());
      CHECK(amp::autocast_dtype() == kF16);
    }
    CHECK(amp::autocast_dtype() == kBF16);
  }
  CHECK_FALSE(amp::is_autocast_enabled());
}

TEST_CASE("autocast: a guard refuses a dtype other than f16 and bf16") {
  CHECK_THROWS_WITH_AS(amp::AutocastGuard guard(kF32), doctest::Contains("f16 or bf16, got f32"), Error);
  CHECK_THROWS_WITH_AS(amp::AutocastGuard guard(kF64), doctest::Contains("f16 or bf16, got f64"), Error);
  CHECK_FALSE(amp::is_autocast_enabled());
}

TEST_CASE("autocast: each op computes in the policy's dtype") {
  manual_seed(1);
  for (DType low : {kF16, kBF16}) {
    CAPTURE(dtype_name(low));
    Tensor x = randn({4, 8}), w = param({6, 8}), b = param({6});
    Tensor img = randn({2, 3, 8, 8}), cw = param({4, 3, 3, 3}), cb = param({4});
    Tensor q = randn({2, 5, 8}), k = randn({2, 7, 8}), v = randn({2, 7, 8});
    Tensor x16 = x.to(low), img16 = img.to(low);
    Tensor target = from_vector<int64_t>({0, 1, 2, 3});
    Tensor ln_w = ones({8}), ln_b = zeros({8});
    Tensor rm = zeros({3}), rv = ones({3});
    amp::AutocastGuard autocast(low);
    // The 16-bit list, from f32 inputs.
    CHECK(matmul(x, w.t()).dtype() == low);
    CHECK(matmul(x, randn({8})).dtype() == low);  // the 1-D path
    CHECK(F::linear(x, w, b).dtype() == low);
    CHECK(F::conv2d(img, cw, cb, {1, 1}, {1, 1}).dtype() == low);
    CHECK(F::scaled_dot_product_attention(q, k, v).dtype() == low);
    // The f32 list, from 16-bit inputs.
    CHECK(softmax(x16, 1).dtype() == kF32);
    CHECK(log_softmax(x16, 1).dtype() == kF32);
    CHECK(F::cross_entropy(x16, target).dtype() == kF32);
    CHECK(F::nll_loss(log_softmax(x16, 1).to(low), target).dtype() == kF32);
    CHECK(F::mse_loss(x16, x16).dtype() == kF32);
    CHECK(F::binary_cross_entropy_with_logits(x16, x16).dtype() == kF32);
    CHECK(F::layer_norm(x16, {8}, ln_w, ln_b).dtype() == kF32);
    CHECK(F::group_norm(img16, 3).dtype() == kF32);
    CHECK(sum(x16).dtype() == kF32);
    CHECK(sum(x16, {1}).dtype() == kF32);
    CHECK(mean(x16).dtype() == kF32);
    CHECK(exp(x16).dtype() == kF32);
    CHECK(log(abs(x16) + 1.0).dtype() == kF32);
    // Everything else keeps its inputs' dtypes (promotion for mixed ones).
    CHECK(F::batch_norm(img16, rm, rv, Tensor(), Tensor(), true).dtype() == low);  // f32 statistics
    CHECK(relu(x16).dtype() == low);
    CHECK(tanh(x16).dtype() == low);
    CHECK(F::max_pool2d(img16, {2, 2}).dtype() == low);
    CHECK((x16 + x).dtype() == kF32);
    CHECK((x16 * x16).dtype() == low);
    // f64 is never cast, in either list.
    Tensor x64 = x.to(kF64);
    CHECK(matmul(x64, x64.t()).dtype() == kF64);
    CHECK(softmax(x64, 1).dtype() == kF64);
  }
}

TEST_CASE("autocast: values equal the explicit casts, and outside the guard nothing changes") {
  manual_seed(2);
  Tensor x = randn({5, 16}), w = randn({3, 16}), b = randn({3});
  Tensor expected = F::linear(x.to(kF16), w.to(kF16), b.to(kF16));
  Tensor got;
  {
    amp::AutocastGuard autocast(kF16);
    got = F::linear(x, w, b);
  }
  CHECK(got.dtype() == kF16);
  CHECK(got.to(kF32).to_vector<float>() == expected.to(kF32).to_vector<float>());
  CHECK(F::linear(x, w, b).dtype() == kF32);
  Tensor h = randn({4, 4}).to(kF16);
  CHECK(softmax(h, 1).dtype() == kF16);
  CHECK(sum(h).dtype() == kF16);
}

TEST_CASE("autocast: the cast cache makes one cast per parameter per region and clears on exit") {
  // The casts that record to_dtype nodes; with amp_f32_grads on, linear casts without them (below).
  toggles::Scoped node_casts(toggles::Toggle::amp_f32_grads, false);
  manual_seed(3);
  Tensor w = param({4, 4});
  Tensor x = randn({2, 4});
  CHECK(amp::cast_cache_size() == 0);
  {
    amp::AutocastGuard autocast(kF16);
    Tensor y1 = F::linear(x, w);
    CHECK(amp::cast_cache_size() == 1);  // w; the activation x is not cached
    Tensor y2 = F::linear(relu(y1), w);
    CHECK(amp::cast_cache_size() == 1);  // reused
    {
      amp::AutocastGuard nested(kF16);
      F::linear(x, w);
      CHECK(amp::cast_cache_size() == 1);  // an inner guard neither adds nor clears
    }
    CHECK(amp::cast_cache_size() == 1);
    {
      amp::AutocastGuard bf(kBF16);
      F::linear(x, w);
      CHECK(amp::cast_cache_size() == 2);  // one cast per target dtype
    }
    {
      NoGradGuard no_grad;
      F::linear(x, w);
      CHECK(amp::cast_cache_size() == 3);  // a cast made without grad is never reused with grad
    }
  }
  CHECK(amp::cast_cache_size() == 0);
}

TEST_CASE("autocast: with amp_f32_grads on, linear's casts are plain values, cached once with the no-grad ones") {
  toggles::Scoped plain_casts(toggles::Toggle::amp_f32_grads, true);
  manual_seed(3);
  Tensor w = param({4, 4});
  Tensor x = randn({2, 4});
  amp::AutocastGuard autocast(kF16);
  Tensor y = F::linear(x, w);
  CHECK(amp::cast_cache_size() == 1);
  {
    NoGradGuard no_grad;
    F::linear(x, w);
  }
  CHECK(amp::cast_cache_size() == 1);
  // The linear node's weight edge leads to w's AccumulateGrad, not to a to_dtype node.
  REQUIRE(y.grad_fn() != nullptr);
  REQUIRE(y.grad_fn()->next_edges.size() >= 2);
  const auto& weight_edge = y.grad_fn()->next_edges[1].fn;
  REQUIRE(weight_edge != nullptr);
  CHECK(std::string(weight_edge->name()) == "AccumulateGrad");
}

TEST_CASE("autocast: an in-place update of a parameter inside the region renews its cached cast") {
  Tensor w = ones({1, 2}).requires_grad_();
  Tensor x = ones({1, 2});
  amp::AutocastGuard autocast(kF16);
  CHECK(F::linear(x, w).to(kF32).item<float>() == 2.0f);
  {
    NoGradGuard no_grad;
    w.mul_(3.0);
  }
  CHECK(F::linear(x, w).to(kF32).item<float>() == 6.0f);
}

// A loop may hold one autocast region across several steps. Each optimizer step writes the f32
// parameters in place and bumps their versions, so the next forward casts them again: a stale cast
// would give the pre-step output, which the test tells apart from the post-step one.
TEST_CASE("autocast: an optimizer step inside the region renews the parameters' cached casts") {
  struct Config {
    const char* name;
    bool multi_tensor, fused_adamw, scaler;
    std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)> make;
  };
  const auto sgd = [](std::vector<Tensor> p) {
    return std::make_unique<optim::SGD>(std::move(p), optim::SGDOptions{.lr = 0.5, .momentum = 0.9});
  };
  const auto adam = [](std::vector<Tensor> p) { return std::make_unique<optim::Adam>(std::move(p)); };
  const auto adamw = [](std::vector<Tensor> p) { return std::make_unique<optim::AdamW>(std::move(p)); };
  const Config configs[] = {{"SGD, one tensor at a time", false, false, false, sgd},
                            {"SGD, multi-tensor", true, false, false, sgd},
                            {"Adam, multi-tensor, GradScaler", true, false, true, adam},
                            {"AdamW, fused", true, true, false, adamw},
                            {"AdamW, unfused, GradScaler", false, false, true, adamw}};
  for (const Config& c : configs) {
    CAPTURE(c.name);
    toggles::Scoped multi(toggles::Toggle::multi_tensor_step, c.multi_tensor);
    toggles::Scoped fused(toggles::Toggle::fused_adamw, c.fused_adamw);
    manual_seed(5);
    Tensor w = param({8, 4}), b = param({8});
    const Tensor x = randn({16, 4}), target = randint(0, 8, {16});
    std::unique_ptr<optim::Optimizer> opt = c.make({w, b});
    amp::GradScaler scaler;
    amp::AutocastGuard autocast(kBF16);
    const Tensor before = F::linear(x, w, b);
    CHECK(amp::cast_cache_size() == 2);
    Tensor loss = F::cross_entropy(before, target);
    if (c.scaler) {
      scaler.scale(loss).backward();
      CHECK(bool(scaler.step(*opt)));
      scaler.update();
    } else {
      loss.backward();
      opt->step();
    }
    const Tensor after = F::linear(x, w, b);
    CHECK(amp::cast_cache_size() == 2);  // renewed in place, not added beside the stale casts
    Tensor fresh;
    {
      NoGradGuard no_grad;  // casts of tensors that are not parameters: never cached
      fresh = F::linear(x.to(kBF16), w.to(kBF16), b.to(kBF16));
    }
    CHECK(after.to(kF32).to_vector<float>() == fresh.to(kF32).to_vector<float>());
    CHECK(after.to(kF32).to_vector<float>() != before.to(kF32).to_vector<float>());
  }
}

TEST_CASE("autocast: gradients reach f32 parameters as f32, close to the f32 gradients") {
  manual_seed(4);
  Tensor w1 = param({16, 8}), b1 = param({16}), w2 = param({4, 16}), b2 = param({4});
  Tensor x = randn({32, 8});
  Tensor target = randint(0, 4, {32});
  auto loss_of = [&] { return F::cross_entropy(F::linear(relu(F::linear(x, w1, b1)), w2, b2), target); };
  loss_of().backward();
  std::vector<Tensor> ref;
  for (Tensor* p : {&w1, &b1, &w2, &b2}) {
    ref.push_back(p->grad());
    p->zero_grad();
  }
  Tensor loss;
  {
    amp::AutocastGuard autocast(kF16);
    loss = loss_of();
    CHECK(amp::cast_cache_size() == 4);  // the four parameters
  }
  CHECK(loss.dtype() == kF32);
  loss.backward();
  int i = 0;
  for (Tensor* p : {&w1, &b1, &w2, &b2}) {
    CAPTURE(i);
    REQUIRE(p->grad().defined());
    CHECK(p->grad().dtype() == kF32);
    CHECK(max_rel_diff(p->grad(), ref[size_t(i)]) < 1e-2);  // f16 has 11 significant bits
    ++i;
  }
}

TEST_CASE("autocast: a parameter used twice gets the sum of both gradients through one cast") {
  Tensor w = from_vector<float>({0.5f, -1.0f}, {1, 2}).requires_grad_();
  Tensor x = from_vector<float>({1.0f, 2.0f}, {1, 2}), z = from_vector<float>({3.0f, 4.0f}, {1, 2});
  Tensor loss;
  {
    amp::AutocastGuard autocast(kF16);
    loss = sum(F::linear(x, w) + F::linear(z, w));
  }
  loss.backward();
  CHECK(w.grad().to_vector<float>() == std::vector<float>{4.0f, 6.0f});
}

TEST_CASE("autocast: backward run inside the region keeps the forward's dtypes") {
  Tensor w = param({3, 3});
  Tensor x = randn({2, 3});
  amp::AutocastGuard autocast(kF16);
  Tensor loss = sum(F::linear(x, w));
  loss.backward();
  CHECK(w.grad().dtype() == kF32);
  CHECK(amp::is_autocast_enabled());
}

TEST_CASE("16-bit matmul and conv accumulate in f32") {
  // 4096 ones summed: an f16 accumulator stops at 2048 (2048 + 1 rounds to 2048); f32 gets 4096.
  for (DType t : {kF16, kBF16}) {
    CAPTURE(dtype_name(t));
    const int64_t K = 4096;
    Tensor a = ones({1, K}, t), b = ones({K, 1}, t);
    Tensor mm = matmul(a, b);
    CHECK(mm.dtype() == t);
    CHECK(mm.to(kF32).item<float>() == 4096.0f);
    // conv2d: a 1x1 kernel over 4096 input channels is a K = 4096 dot product per pixel.
    Tensor x = ones({1, K, 1, 1}, t), w = ones({1, K, 1, 1}, t);
    Tensor y = F::conv2d(x, w);
    CHECK(y.dtype() == t);
    CHECK(y.to(kF32).item<float>() == 4096.0f);
    // Under autocast the same from f32 inputs.
    amp::AutocastGuard autocast(t);
    CHECK(F::linear(ones({1, K}), ones({1, K})).to(kF32).item<float>() == 4096.0f);
  }
  // Small products: 4096 times 2^-20 is 2^-8 exactly; an f16 accumulator stalls at 2^-9, where
  // its spacing is 2^-19 and adding 2^-20 is a tie that rounds to even.
  Tensor a = full({1, 4096}, 1.0 / 1024, kF16), b = full({4096, 1}, 1.0 / 1024, kF16);
  CHECK(matmul(a, b).to(kF32).item<float>() == 1.0f / 256);
}

TEST_CASE("16-bit matmul: every operand layout gives the f32 product of the widened operands, rounded once") {
  manual_seed(6);
  for (DType t : {kF16, kBF16}) {
    CAPTURE(dtype_name(t));
    Tensor row = randn({24, 40}).to(t);                         // dense rows
    Tensor col = randn({40, 24}).to(t).t();                     // dense columns
    Tensor padded = randn({24, 50}).to(t).narrow(1, 0, 40);     // rows with a gap
    Tensor strided = randn({24, 80}).to(t).slice(1, 0, 80, 2);  // neither stride 1
    Tensor rhs_col = randn({30, 40}).to(t).t(), rhs_row = randn({40, 30}).to(t);
    for (const Tensor& a : {row, col, padded, strided})
      for (const Tensor& b : {rhs_col, rhs_row}) {
        const Tensor want = matmul(a.to(kF32), b.to(kF32)).to(t);
        CHECK(matmul(a, b).to(kF32).to_vector<float>() == want.to(kF32).to_vector<float>());
      }
  }
}

TEST_CASE("autocast: mismatched dtypes it does not cast are still refused with the op's message") {
  Tensor x = randn({2, 4}).to(kF64), w = randn({3, 4});
  amp::AutocastGuard autocast(kF16);
  CHECK_THROWS_WITH_AS(F::linear(x, w), doctest::Contains("linear: weight"), Error);
}

TEST_CASE("hybrid precision: a module kept in f32 runs in f32 under autocast, the rest in f16") {
  manual_seed(5);
  auto model = nn::models::MLP(8, {16}, 4);  // Flatten, Linear, ReLU, Linear
  auto head = (*model)[3];
  amp::keep_f32(*head);
  CHECK(head->keeps_f32());
  // Records the dtype of each layer's output through a summary-style observer.
  struct Dtypes : nn::detail::ForwardObserver {
    std::vector<DType> seen;
    void on_output(const nn::Module&, const Tensor& y) override { seen.push_back(y.dtype()); }
  } dtypes;
  auto* prev = nn::detail::set_forward_observer(&dtypes);
  Tensor x = randn({2, 8});
  Tensor out;
  {
    amp::AutocastGuard autocast(kF16);
    out = (*model)(x);
  }
  nn::detail::set_forward_observer(prev);
  CHECK(dtypes.seen == std::vector<DType>{kF32, kF16, kF16, kF32, kF32});  // flatten .. head, model
  CHECK(out.dtype() == kF32);
  // The head's f32 result equals an f32 linear of the f16 hidden activations, cast up.
  Tensor hidden;
  {
    amp::AutocastGuard autocast(kF16);
    hidden = relu((*(*model)[1])(x));
  }
  auto* lin = dynamic_cast<nn::Linear*>(head.get());
  REQUIRE(lin);
  CHECK(allclose(out, F::linear(hidden.to(kF32), lin->weight, lin->bias), 0, 0));
  // Gradients still reach every parameter as f32.
  sum(out).backward();
  for (const auto& p : model->parameters()) CHECK(p.grad().dtype() == kF32);
  amp::keep_f32(*head, false);
  {
    amp::AutocastGuard autocast(kF16);
    CHECK((*model)(x).dtype() == kF16);
  }
}

TEST_CASE("hybrid precision: every module of a type kept in f32") {
  auto cnn = nn::models::SimpleCNN(1, 10);
  CHECK(amp::keep_f32_type(*cnn, "Conv2d") == 2);
  Tensor x = randn({2, 1, 28, 28});
  {
    amp::AutocastGuard autocast(kF16);
    // The convs run in f32 and the linears in f16.
    CHECK((*cnn)(x).dtype() == kF16);
    amp::keep_f32_type(*cnn, "Linear");
    CHECK((*cnn)(x).dtype() == kF32);
  }
  CHECK_THROWS_WITH_AS(amp::keep_f32_type(*cnn, "LayerNorm"), doctest::Contains("no module of type 'LayerNorm'"),
                       Error);
}

TEST_CASE("hybrid precision: keep_f32_type on a model that no shared_ptr owns") {
  nn::Sequential model;
  model.push_back(std::make_shared<nn::Linear>(4, 3));
  model.push_back(std::make_shared<nn::ReLU>());
  CHECK(amp::keep_f32_type(model, "Linear") == 1);
  amp::AutocastGuard autocast(kF16);
  CHECK(model(randn({2, 4})).dtype() == kF32);
}
