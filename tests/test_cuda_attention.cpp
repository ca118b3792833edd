// Fused scaled-dot-product attention on CUDA against the CPU through nn::functional, forward and
// backward: causal and padding masks, rows that see no key, more keys and queries than one tile,
// L != S, broadcast batch dims and strided operands, in every floating dtype. Skipped (reported
// skipped) without a GPU; the too-large-head error is checked only where a GPU is present.
#include <doctest/doctest.h>

#include "mdl.h"
#include "nn/functional.h"
#include "kernels/attention.h"
#include "tests/test_util.h"

using namespace mdl;
using namespace mdl::test;
namespace F = mdl::nn::functional;

namespace {

const Device kGpu = Device::cuda();


// Attention on the CPU and the GPU from the same q, k, v (leaves) and mask; compares the output
// and the three gradients of sum(out * w).
void compare(const std::string& what, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
             bool causal) {
  auto run = [&](Device d) {
    Tensor a = q.to(d).detach().requires_grad_(), b = k.to(d).detach().requires_grad_(),
           c = v.to(d).detach().requires_grad_();
    Tensor y = F::scaled_dot_product_attention(a, b, c, mask.defined() ? mask.to(d) : Tensor(), causal);
    sum(y * sample(y.shape(), y.dtype(), 99).to(d)).backward();
    return std::vector<Tensor>{y.detach(), a.grad(), b.grad(), c.grad()};
  };
  const auto c = run(Device::cpu()), g = run(kGpu);
  const char* names[] = {"out", "dq", "dk", "dv"};
  // Sums over keys in other orders.
  const Tol tol = q.dtype() == kF32 ? same_tol(1e-4) : q.dtype() == kF16 ? same_tol(5e-3) : dtype_tol(q.dtype());
  for (size_t i = 0; i < c.size(); ++i)
    check_close(g[i], c[i], tol, what + " " + names[i] + " " + dtype_name(q.dtype()));
}

}  // namespace

TEST_CASE("cuda: fused attention matches the CPU, forward and backward, with causal and padding masks" *
          MDL_CUDA_ONLY) {
  for (DType t : {kF32, kF64, kF16, kBF16}) {
    Tensor q = sample({2, 3, 37, 16}, t, 1), k = sample({2, 3, 29, 16}, t, 2), v = sample({2, 3, 29, 24}, t, 3);
    compare("plain L != S", q, k, v, Tensor(), false);
    compare("causal L != S", q, k, v, Tensor(), true);
    // Padding mask (B, 1, 1, S): batch 1 hides its last 9 keys; every key of query row 4 hidden by a full mask.
    Tensor pad = ones({2, 1, 1, 29}, kBool);
    pad.slice(0, 1, 2).slice(3, 20, 29).fill_(0.0);
    compare("padding mask", q, k, v, pad, false);
    Tensor full = ones({37, 29}, kBool);
    full.slice(0, 4, 5).fill_(0.0);
    compare("a row that sees no key", q, k, v, full, true);
    // More than one tile of keys and queries (256 per tile).
    Tensor ql = sample({1, 2, 300, 8}, t, 4), kl = sample({1, 2, 300, 8}, t, 5), vl = sample({1, 2, 300, 8}, t, 6);
    compare("300 x 300 causal", ql, kl, vl, Tensor(), true);
    compare("300 x 300", ql, kl, vl, Tensor(), false);
    // Broadcast batch (k, v shared by every head) and strided q.
    Tensor qs = sample({2, 40, 3, 16}, t, 7).transpose(1, 2), kb = sample({2, 1, 33, 16}, t, 8),
           vb = sample({2, 1, 33, 16}, t, 9);
    compare("broadcast k, v and strided q", qs, kb, vb, Tensor(), false);
  }
}

TEST_CASE("cuda: fused attention names a head dim too large for its shared memory" * MDL_CUDA_ONLY) {
  Tensor q = zeros({1, 4, 8000}, kGpu), k = zeros({1, 4, 8000}, kGpu);
  CHECK_THROWS_WITH_AS(F::scaled_dot_product_attention(q, k, k), doctest::Contains("too large"), mdl::Error);
}
