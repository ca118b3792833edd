// cuDNN's fused attention, the yardstick bench_cuda times beside mdl's attention (bench/cudnn_sdpa.h),
// against mdl's own kernels on the same inputs, forward and the three gradients: f16 and bf16, causal
// and not, lengths on and off the 64-wide tiles, head dims 64 and 128; its logsumexp stats against
// f64 on the CPU. The GPUs mdl is checked on (sm_80 and later, cuDNN 9) have cuDNN's fused attention,
// so a graph cuDNN refuses there fails the case, with cuDNN's reason. Built in CUDA builds only (the
// yardstick is); the comparison is skipped without a GPU, the refusal of an f32 input is not.
#ifdef MDL_WITH_CUDA
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "bench/cudnn_sdpa.h"
#include "mdl.h"
#include "nn/functional.h"
#include "tests/support/attention_test_util.h"
#include "tests/support/test_util.h"

using namespace mdl;
using namespace mdl::test;

namespace {

// Each row's logsumexp of scale * q k^T (keys past the row hidden when causal), in f64 on the CPU:
// (B, H, L, 1) from q (B, H, L, D) and k (B, H, S, D).
Tensor logsumexp_reference(const Tensor& q_in, const Tensor& k_in, bool causal, double scale) {
  const Tensor q = q_in.to(Device::cpu()).to(kF64).contiguous(), k = k_in.to(Device::cpu()).to(kF64).contiguous();
  const int64_t BH = q.size(0) * q.size(1), L = q.size(2), S = k.size(2), D = q.size(3);
  Tensor out = empty({q.size(0), q.size(1), L, 1}, kF64);
  const double *qp = q.data_ptr<double>(), *kp = k.data_ptr<double>();
  std::vector<double> row(static_cast<size_t>(S));
  for (int64_t bh = 0; bh < BH; ++bh)
    for (int64_t i = 0; i < L; ++i) {
      const int64_t keys = causal ? std::min(S, i + 1) : S;
      double m = -INFINITY;
      for (int64_t j = 0; j < keys; ++j) {
        double dot = 0;
        for (int64_t e = 0; e < D; ++e) dot += qp[(bh * L + i) * D + e] * kp[(bh * S + j) * D + e];
        row[size_t(j)] = dot * scale;
        m = std::max(m, row[size_t(j)]);
      }
      double z = 0;
      for (int64_t j = 0; j < keys; ++j) z += std::exp(row[size_t(j)] - m);
      out.data_ptr<double>()[bh * L + i] = m + std::log(z);
    }
  return out;
}

}  // namespace

// Needs no GPU: the reason is given before any cuDNN handle is made.
TEST_CASE("cudnn_sdpa: an input cuDNN's fused attention does not take is refused with cuDNN's version named") {
  const Tensor q = zeros({1, 2, 8, 64}, kF32), k = zeros({1, 2, 8, 64}, kF32);
  const std::string why = bench::cudnn_sdpa_unsupported(q, k, true);
  CHECK_MESSAGE(why.find("cuDNN 9.") == 0, why);
  CHECK_MESSAGE(why.find("f16 or bf16") != std::string::npos, why);
  CHECK_THROWS_AS(bench::cudnn_sdpa_forward(q, k, k, true, 0.125f), Error);
  CHECK_THROWS_AS(bench::cudnn_sdpa_unsupported(q, zeros({1, 3, 8, 64}, kF32), false), Error);
}

TEST_CASE("cuda: cuDNN's fused attention yardstick agrees with mdl's flash attention" * MDL_CUDA_ONLY) {
  uint64_t seed = 700;
  for (DType t : {kF16, kBF16})
    for (int64_t E : {64, 128})
      for (int64_t L : {64, 257})
        for (bool causal : {false, true}) {
          const Tensor q = sample({2, 3, L, E}, t, seed++).to(Device::cuda()),
                       k = sample({2, 3, L, E}, t, seed++).to(Device::cuda()),
                       v = sample({2, 3, L, E}, t, seed++).to(Device::cuda());
          const std::string what = std::string(dtype_name(t)) + " E=" + std::to_string(E) + " L=" + std::to_string(L) +
                                   " causal=" + std::to_string(causal);
          const std::string why = bench::cudnn_sdpa_unsupported(q, k, causal);
          if (!why.empty()) {
            FAIL_CHECK("cuDNN cannot run the fused attention graph for ", what, ": ", why);
            continue;
          }
          const double scale = 1.0 / std::sqrt(double(E));
          const bench::CudnnSdpa got = bench::cudnn_sdpa_forward(q, k, v, causal, float(scale));
          Tensor a = q.detach().requires_grad_(), b = k.detach().requires_grad_(), c = v.detach().requires_grad_();
          const Tensor want = nn::functional::scaled_dot_product_attention(a, b, c, Tensor(), causal);
          const double tol = t == kF16 ? 1e-2 : 6e-2;
          const double err = rel_err(got.out, want.detach());
          CHECK_MESSAGE(err <= tol, what, ": cuDNN against mdl's kernel, relative error ", err);
          const double stats_err = rel_err(got.stats.to(kF64), logsumexp_reference(q, k, causal, scale));
          CHECK_MESSAGE(stats_err <= 1e-3, what, ": cuDNN's logsumexp against f64, relative error ", stats_err);

          const std::string why_backward = bench::cudnn_sdpa_backward_unsupported(q, k, causal);
          if (!why_backward.empty()) {
            FAIL_CHECK("cuDNN cannot run the fused attention backward graph for ", what, ": ", why_backward);
            continue;
          }
          MESSAGE(what, ": cuDNN planned the backward with ", bench::cudnn_sdpa_backward_form(q, k, causal));
          const Tensor go = sample({2, 3, L, E}, t, seed++).to(Device::cuda());
          const bench::CudnnSdpaGrads grads = bench::cudnn_sdpa_backward(q, k, v, got, go, causal, float(scale));
          want.backward(go);
          // Two rounded results, each within tol of the exact gradient.
          const Tensor theirs[] = {grads.dq, grads.dk, grads.dv}, mine[] = {a.grad(), b.grad(), c.grad()};
          const char* names[] = {"dq", "dk", "dv"};
          for (int i = 0; i < 3; ++i) {
            const double grad_err = rel_err(theirs[i], mine[i]);
            CHECK_MESSAGE(grad_err <= 2 * tol, what, " ", names[i], ": cuDNN against mdl's backward, relative error ",
                          grad_err);
          }
        }
}
#endif
