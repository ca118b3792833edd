// Bad indices found without a host read: the check_index kernel throws at once on the CPU and, on
// the GPU, records the first bad value on the device, raised as an mdl::Error naming the op at the
// next sync point (cuda::check_errors, synchronize, item(), any host<->device copy). A training
// step with no host read of its indices can be captured whole in a cuda::Graph. CUDA cases are
// skipped without a GPU.
#include <doctest/doctest.h>

#include <cmath>

#include "mdl.h"
#include "kernels/core.h"
#include "tests/support/test_util.h"

using namespace mdl;
namespace F = mdl::nn::functional;

namespace {

const Device kGpu = Device::cuda();

Tensor i64(std::vector<int64_t> v, Device d = Device::cpu()) {
  const int64_t n = int64_t(v.size());
  return from_vector<int64_t>(std::move(v), {n}).to(d);
}

}  // namespace

TEST_CASE("check_index: the CPU kernel throws at once, naming the op, the value and the bound") {
  CHECK_NOTHROW(kernels::check_index(Device::cpu(), i64({0, 4, 2}), kernels::IndexCheck{"gather", "index", 5, 1}));
  CHECK_THROWS_WITH_AS(kernels::check_index(Device::cpu(), i64({0, 5}), kernels::IndexCheck{"gather", "index", 5, 1}),
                       doctest::Contains("gather: index 5 is out of range for dim 1 with size 5"), Error);
  CHECK_THROWS_WITH_AS(kernels::check_index(Device::cpu(), i64({-1}), kernels::IndexCheck{"gather", "index", 5, 0}),
                       doctest::Contains("gather: index -1 is out of range for dim 0 with size 5"), Error);
  const kernels::IndexCheck targets{"cross_entropy", "target", 3, -1, true, -100};
  CHECK_NOTHROW(kernels::check_index(Device::cpu(), i64({2, -100, 0}), targets));
  CHECK_THROWS_WITH_AS(kernels::check_index(Device::cpu(), i64({2, -99}), targets),
                       doctest::Contains("cross_entropy: target -99 is out of range for 3 classes"), Error);
}

TEST_CASE("check_errors: harmless with nothing to report, with or without a GPU") {
  CHECK_NOTHROW(cuda::check_errors());
  CHECK_NOTHROW(cuda::check_errors());
}

TEST_CASE("cuda: an out-of-range embedding index throws at the next sync, naming embedding" * MDL_CUDA_ONLY) {
  cuda::check_errors();
  Tensor w = randn({5, 3}).to(kGpu);
  Tensor y;
  CHECK_NOTHROW(y = F::embedding(i64({1, 7, 2}, kGpu), w));  // queued, nothing read on the host
  CHECK_THROWS_WITH_AS(cuda::check_errors(),
                       doctest::Contains("embedding: index 7 is out of range for dim 0 with size 5"), Error);
  CHECK_NOTHROW(cuda::check_errors());  // cleared once raised
  // The bad row read as zeros: no access outside the weight (a sticky CUDA error would follow).
  const std::vector<float> v = y.to_vector<float>();
  CHECK((v[3] == 0.0f && v[4] == 0.0f && v[5] == 0.0f));
  // item() is a sync point too; the first error wins over later ones. Every index is copied to the
  // GPU first: a host-to-device copy is a sync point as well, and would raise the first error early.
  const Tensor bad_row = i64({-1}, kGpu), bad_col = i64({3}, kGpu);
  Tensor first = sum(F::embedding(bad_row, w));
  Tensor s = first + sum(index_select(w, 1, bad_col));
  CHECK_THROWS_WITH_AS(s.item<float>(), doctest::Contains("embedding: index -1 is out of range"), Error);
  CHECK_NOTHROW(cuda::check_errors());
}

TEST_CASE("cuda: index ops and cross_entropy report bad indices at the next sync" * MDL_CUDA_ONLY) {
  cuda::check_errors();
  Tensor x = randn({4, 6}).to(kGpu);
  (void)index_select(x, 1, i64({0, 6}, kGpu));
  CHECK_THROWS_WITH_AS(cuda::synchronize(), doctest::Contains("index_select: index 6 is out of range for dim 1"),
                       Error);
  (void)gather(x, 0, from_vector<int64_t>({0, 1, 4, 2, 3, 0}, {1, 6}).to(kGpu));
  CHECK_THROWS_WITH_AS(cuda::check_errors(), doctest::Contains("gather: index 4 is out of range for dim 0 with size 4"),
                       Error);
  Tensor loss = F::cross_entropy(x, i64({0, 5, 6, -100}, kGpu));  // -100 is ignored
  CHECK_THROWS_WITH_AS(loss.item<float>(), doctest::Contains("cross_entropy: target 6 is out of range for 6 classes"),
                       Error);
  // Good targets: the mean over the kept ones, counted on the device, equals the CPU's.
  Tensor t = i64({0, 5, -100, 3});
  test::check_close(F::cross_entropy(x, t.to(kGpu)), F::cross_entropy(x.to(Device::cpu()), t), test::same_tol(1e-6),
                    "cross_entropy mean over kept targets");
}

TEST_CASE("cuda: a training step with embedding and cross_entropy captures whole in a graph" * MDL_CUDA_ONLY) {
  // A host read of the indices (or any host<->device copy) inside the capture would throw
  // "copy: a host<->device copy cannot be captured in a CUDA Graph".
  cuda::check_errors();
  Generator g(3);
  Tensor w = randn({10, 8}, TensorOptions(kF32), &g).to(kGpu).requires_grad_();
  Tensor h = randn({8, 10}, TensorOptions(kF32), &g).to(kGpu).requires_grad_();
  optim::SGD opt(std::vector<Tensor>{w, h}, optim::SGDOptions{.lr = 0.1});
  Tensor tokens = i64({1, 2, 3, 4, 5, 6}, kGpu), targets = i64({2, 3, 4, 5, 6, 7}, kGpu);
  auto step = [&] {
    Tensor loss = F::cross_entropy(matmul(F::embedding(tokens, w), h), targets);
    loss.backward();
    opt.step();
    return loss;
  };
  opt.zero_grad(false);
  step();  // warm-up: creates the gradients and the optimizer's state outside the capture
  const Tensor w_before = w.detach().clone();
  cuda::Graph graph;
  graph.capture_begin();
  opt.zero_grad(false);
  Tensor loss = step();
  CHECK_NOTHROW(graph.capture_end());
  graph.replay();
  CHECK_NOTHROW(cuda::check_errors());
  CHECK(std::isfinite(loss.item<float>()));
  CHECK(max(abs(w.detach() - w_before)).item<float>() > 0.0f);  // the replay stepped
  // A bad token copied into the static input is reported at the next sync after a replay.
  tokens.copy_(i64({1, 2, 3, 4, 5, 60}));
  graph.replay();
  CHECK_THROWS_WITH_AS(cuda::check_errors(), doctest::Contains("embedding: index 60 is out of range"), Error);
}
