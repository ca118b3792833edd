// amp::precision_report on a small MLP: f32 against itself is exact; bf16's forward strays further
// than f16's; a loss of about 1e-8 underflows f16 without a scaler and not with a large enough
// scale, while a scale too large overflows; the model's modes and gradients are put back; bad
// input is named.
#include <doctest/doctest.h>

#include <cmath>
#include <memory>

#include "amp/keep_f32.h"
#include "amp/precision_report.h"
#include "mdl.h"
#include "nn/functional.h"

using namespace mdl;
namespace F = mdl::nn::functional;

namespace {

struct Batch {
  std::shared_ptr<nn::Sequential> model;
  Tensor x, y;
};

// A two-layer MLP with dropout (which eval mode turns off) and a batch of 32 samples of 8 features.
Batch small_mlp() {
  manual_seed(11);
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::Linear>(8, 32));
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<nn::Dropout>(0.5));
  m->push_back(std::make_shared<nn::Linear>(32, 4));
  return {m, randn({32, 8}), randint(0, 4, {32})};
}

}  // namespace

TEST_CASE("amp precision: f32 against itself has every error exactly 0 and nothing lost") {
  Batch b = small_mlp();
  const auto r = amp::precision_report(
      *b.model, b.x, [&](const Tensor& out) { return F::cross_entropy(out, b.y); }, kF32);
  CHECK(r.dtype == kF32);
  CHECK(r.output_error == 0.0);
  CHECK(r.loss_error == 0.0);
  REQUIRE(r.at_scales.size() == 2);
  CHECK(r.at_scales[0].loss_scale == 1.0);
  CHECK(r.at_scales[1].loss_scale == amp::GradScalerOptions{}.init_scale);
  for (const amp::ScalePrecision& s : r.at_scales) {
    CAPTURE(s.loss_scale);
    REQUIRE(s.parameters.size() == 4);  // two weights, two biases
    CHECK(s.parameters[0].name == "0.weight");
    CHECK(s.parameters[0].values == 32 * 8);
    for (const amp::ParameterPrecision& p : s.parameters) {
      CAPTURE(p.name);
      CHECK(p.nonzero > 0);
      CHECK(p.error == 0.0);
      CHECK(p.nonfinite == 0);
    }
    CHECK(s.median_error == 0.0);
    CHECK(s.max_error == 0.0);
    CHECK(s.nonfinite_fraction == 0.0);
  }
}

// Gradient values below f16's smallest normal that f32 arithmetic produced were never 16-bit: a model
// kept whole in f32 under f16 autocast has the f32 gradients exactly, and nothing counts as lost.
TEST_CASE("amp precision: a model kept in f32 under f16 autocast loses nothing, small gradient values included") {
  manual_seed(1);
  auto cnn = nn::models::SimpleCNN();
  Tensor x = randn({8, 1, 28, 28}), y = randint(0, 10, {8});
  amp::keep_f32(*cnn);
  const auto r = amp::precision_report(
      *cnn, x, [&](const Tensor& out) { return F::cross_entropy(out, y); }, kF16);
  for (const amp::ScalePrecision& s : r.at_scales) {
    CAPTURE(s.loss_scale);
    CHECK(s.max_error == 0.0);
    CHECK(s.underflow_fraction == 0.0);
    CHECK(s.zero_fraction == 0.0);
  }
}

TEST_CASE("amp precision: bf16's forward strays further than f16's; both gradients stay close") {
  Batch b = small_mlp();
  auto loss = [&](const Tensor& out) { return F::cross_entropy(out, b.y); };
  const auto f16 = amp::precision_report(*b.model, b.x, loss, kF16);
  const auto bf16 = amp::precision_report(*b.model, b.x, loss, kBF16);
  CHECK(f16.output_error > 0.0);
  CHECK(bf16.output_error > f16.output_error);
  // Rounding's relative error: f16 keeps 11 significant bits, bf16 8.
  CHECK(f16.output_error < 4e-3);
  CHECK(bf16.output_error < 3e-2);
  for (const auto* r : {&f16, &bf16}) {
    CAPTURE(dtype_name(r->dtype));
    for (const amp::ScalePrecision& s : r->at_scales) {
      CAPTURE(s.loss_scale);
      CHECK(s.median_error > 0.0);
      CHECK(s.median_error <= s.max_error);
      CHECK(s.max_error < 5e-2);
      CHECK(s.nonfinite_fraction == 0.0);
    }
  }
}

TEST_CASE("amp precision: a loss of about 1e-8 underflows f16 at scale 1, not at a large enough scale") {
  Batch b = small_mlp();
  auto tiny_loss = [&](const Tensor& out) { return F::cross_entropy(out, b.y) * 1e-8; };
  const double large = 1e8 * amp::GradScalerOptions{}.init_scale;
  const auto f16 = amp::precision_report(*b.model, b.x, tiny_loss, kF16, {.loss_scales = {1.0, large}});
  REQUIRE(f16.at_scales.size() == 2);
  CHECK(f16.at_scales[0].underflow_fraction > 0.5);
  CHECK(f16.at_scales[0].zero_fraction > 0.5);  // 1e-8 / 32 is below f16's smallest subnormal, 2^-24
  CHECK(f16.at_scales[0].zero_fraction <= f16.at_scales[0].underflow_fraction);
  CHECK(f16.at_scales[0].max_error > 0.5);  // the lost gradients are most of the norm
  CHECK(f16.at_scales[1].underflow_fraction == 0.0);
  CHECK(f16.at_scales[1].nonfinite_fraction == 0.0);
  CHECK(f16.at_scales[1].max_error < 5e-2);
  for (const amp::ParameterPrecision& p : f16.at_scales[0].parameters) {
    CHECK(p.zeroed <= p.underflowed);
    CHECK(p.underflowed <= p.nonzero);
  }

  // bf16 has f32's range: nothing underflows without a scaler.
  const auto bf16 = amp::precision_report(*b.model, b.x, tiny_loss, kBF16, {.loss_scales = {1.0}});
  CHECK(bf16.at_scales[0].underflow_fraction == 0.0);
}

TEST_CASE("amp precision: a scale too large for f16 shows as non-finite gradients") {
  Batch b = small_mlp();
  const auto r = amp::precision_report(*b.model, b.x, [&](const Tensor& out) { return F::cross_entropy(out, b.y); },
                                       kF16, {.loss_scales = {1e12}});
  CHECK(r.at_scales[0].nonfinite_fraction > 0.0);
  CHECK_FALSE(std::isfinite(r.at_scales[0].max_error));
}

TEST_CASE("amp precision: the model's modes and gradients are put back") {
  Batch b = small_mlp();
  auto loss = [&](const Tensor& out) { return F::cross_entropy(out, b.y); };
  const Tensor w = b.model->named_parameters()[0].second;
  const Tensor held = full(w.shape(), 0.25);
  w.set_grad(held);
  (*b.model)[2]->eval();  // the dropout alone in eval mode
  amp::precision_report(*b.model, b.x, loss, kF16);
  CHECK(b.model->is_training());
  CHECK((*b.model)[0]->is_training());
  CHECK_FALSE((*b.model)[2]->is_training());
  CHECK(w.grad().impl_ptr() == held.impl_ptr());
  CHECK_FALSE(b.model->named_parameters()[1].second.grad().defined());
}

TEST_CASE("amp precision: bad input is named") {
  Batch b = small_mlp();
  auto loss = [&](const Tensor& out) { return F::cross_entropy(out, b.y); };
  CHECK_THROWS_WITH_AS(amp::precision_report(*b.model, b.x, loss, kF64), doctest::Contains("f16, bf16 or f32, got f64"),
                       Error);
  CHECK_THROWS_WITH_AS(amp::precision_report(*b.model, b.x, loss, kF16, {.loss_scales = {1.0, 0.0}}),
                       doctest::Contains("positive and finite, got 0"), Error);
  CHECK_THROWS_WITH_AS(amp::precision_report(*b.model, b.x, loss, kF16, {.loss_scales = {}}),
                       doctest::Contains("no loss scale"), Error);
  CHECK_THROWS_WITH_AS(amp::precision_report(
                           *b.model, b.x, [](const Tensor& out) { return out; }, kF16),
                       doctest::Contains("expected a single value"), Error);
  CHECK_THROWS_WITH_AS(amp::smallest_normal(kI64), doctest::Contains("i64 is not a floating dtype"), Error);
  for (auto [name, p] : b.model->named_parameters()) p.requires_grad_(false);
  CHECK_THROWS_WITH_AS(amp::precision_report(*b.model, b.x, loss, kF16), doctest::Contains("requires grad"), Error);
}
