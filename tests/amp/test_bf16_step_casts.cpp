// Under autocast bf16 on the CPU, activations stay bf16 from op to op: a SimpleCNN training step
// converts only its parameters (the cast cache, once a step), their gradients back to f32, the
// input batch and the logits (the loss runs in f32), never an activation. Every conversion (a copy
// kernel between dtypes) the profiler records in the step has the size of one of those tensors.
// (With amp_weight_cache on the step rewrites the parameters' casts instead: held off here.)
#include <doctest/doctest.h>

#include <set>
#include <vector>

#include "amp/grad_scaler.h"
#include "mdl.h"
#include "nn/functional.h"
#include "nn/models/models.h"
#include "ops/autocast.h"
#include "switches/list/toggles.h"
#include "tests/support/profiler_test_util.h"

using namespace mdl;
namespace F = mdl::nn::functional;

TEST_CASE("autocast bf16: a SimpleCNN training step converts parameters, gradients, input and logits, no activation") {
  toggles::Scoped per_step_casts(toggles::Toggle::amp_weight_cache, false);
  manual_seed(3);
  auto model = nn::models::SimpleCNN(1, 10);
  optim::Adam opt(model->parameters(), {.lr = 1e-3});
  constexpr int64_t N = 24;  // no activation of the step has a parameter's, the input's or the logits' size
  std::vector<int64_t> classes(N);
  for (int64_t i = 0; i < N; ++i) classes[size_t(i)] = i * 7 % 10;
  const Tensor x = randn({N, 1, 28, 28}), labels = from_vector<int64_t>(classes, {N});
  const auto step = [&] {
    opt.zero_grad();
    Tensor loss;
    {
      amp::AutocastGuard guard(kBF16);
      loss = F::cross_entropy(model->forward(x), labels);
    }
    loss.backward();
    opt.step();
  };
  step();  // warm-up: the optimizer's state
  std::set<int64_t> allowed = {N * 28 * 28, N * 10};
  for (const Tensor& p : model->parameters()) allowed.insert(p.numel());

  profiler::Session prof({.record_shapes = true, .memory = false});
  step();
  prof.stop();
  int64_t conversions = 0;
  for (size_t i : profiler_test::find_all(prof, "copy", profiler::EventKind::Kernel)) {
    const profiler::Event& e = prof.events()[i];
    REQUIRE(e.n_shapes == 2);
    if (e.shapes[0].dtype == e.shapes[1].dtype) continue;  // a copy, not a conversion
    int64_t numel = 1;
    for (int d = 0; d < e.shapes[0].ndim; ++d) numel *= e.shapes[0].dims[d];
    INFO("copy ", e.shapes_str());
    CHECK(allowed.count(numel) == 1);
    ++conversions;
  }
  CHECK(conversions >= int64_t(model->parameters().size()));  // at least each parameter's cast
}
