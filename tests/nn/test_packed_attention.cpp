// packed_self_attention (self-attention on one packed (B, L, 3E) projection, its heads read and
// written in place) against scaled_dot_product_attention on the split, transposed heads: the same
// bits, forward and backward, in every floating dtype, across query blocks, causal or not, with
// padding and full masks and fully masked rows; the composed path (fused_attention off); a gradcheck;
// errors; MultiheadAttention with packed_attention off and on; and the copies a GPT step saves.
#include <doctest/doctest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "mdl.h"
#include "nn/functional.h"
#include "nn/models/models.h"
#include "switches/list/toggles.h"
#include "tests/support/gradcheck_cases.h"
#include "tests/support/test_util.h"

using namespace mdl;
using namespace mdl::test;
namespace F = mdl::nn::functional;

namespace {

using V = std::vector<Tensor>;

// The block's old path: split the projection, heads (B, H, L, D), attention, heads joined (B, L, E).
Tensor split_heads_attention(const Tensor& qkv, int64_t H, const Tensor& mask, bool causal) {
  const int64_t B = qkv.size(0), L = qkv.size(1), E = qkv.size(2) / 3, D = E / H;
  const std::vector<Tensor> p = split(qkv, E, -1);
  auto heads = [&](const Tensor& t) { return reshape(t, {B, L, H, D}).transpose(1, 2); };
  return reshape(F::scaled_dot_product_attention(heads(p[0]), heads(p[1]), heads(p[2]), mask, causal).transpose(1, 2),
                 {B, L, E});
}

// The output and qkv's gradient under gy.
V run(bool packed, const Tensor& qkv0, int64_t H, const Tensor& mask, bool causal, const Tensor& gy) {
  Tensor qkv = qkv0.detach().requires_grad_(true);
  Tensor y = packed ? F::packed_self_attention(qkv, H, mask, causal) : split_heads_attention(qkv, H, mask, causal);
  y.backward(gy);
  return {y.detach(), qkv.grad()};
}

}  // namespace

TEST_CASE("packed_self_attention: the same bits as attention on the split heads, every dtype, masks, blocks") {
  const int64_t B = 2, H = 3, D = 8, E = H * D;
  for (DType t : {kF64, kF32, kF16, kBF16})
    for (int64_t L : {1, 63, 64, 65, 130})
      for (bool causal : {false, true})
        for (int mask_kind : {0, 1, 2}) {
          CAPTURE(t);
          CAPTURE(L);
          CAPTURE(causal);
          CAPTURE(mask_kind);
          Generator g(uint64_t(L * 10 + mask_kind));
          const Tensor qkv = randn({B, L, 3 * E}, TensorOptions(kF64), &g).to(t);
          const Tensor gy = randn({B, L, E}, TensorOptions(kF64), &g).to(t);
          Tensor mask;
          if (mask_kind == 1) {  // key padding (B, 1, 1, L): batch 1 sees no key at all
            mask = ones({B, 1, 1, L}, TensorOptions(kBool));
            mask.select(0, 1).fill_(0.0);
          } else if (mask_kind == 2) {  // a full (L, L) mask shared by every batch and head
            mask = gt(randn({L, L}, TensorOptions(kF64), &g), scalar_tensor(-0.5));
          }
          const V want = run(false, qkv, H, mask, causal, gy), got = run(true, qkv, H, mask, causal, gy);
          check_close(got[0], want[0], kExact, "output");
          check_close(got[1], want[1], kExact, "qkv gradient");
          CHECK(got[0].is_contiguous());
          if (mask_kind == 1) CHECK(values(got[1].select(0, 1)) == std::vector<double>(size_t(L * 3 * E), 0.0));
        }
}

TEST_CASE("packed_self_attention: a non-contiguous qkv, and a custom scale") {
  Generator g(3);
  const Tensor qkv = randn({12, 2, 5}, TensorOptions(kF32), &g).permute({1, 2, 0});  // (2, 5, 12), strided
  REQUIRE_FALSE(qkv.is_contiguous());
  const Tensor gy = randn({2, 5, 4}, TensorOptions(kF32), &g);
  CHECK(max_rel_diff(F::packed_self_attention(qkv, 2), split_heads_attention(qkv.contiguous(), 2, Tensor(), false)) ==
        0.0);
  const V want = run(false, qkv, 2, Tensor(), true, gy), got = run(true, qkv, 2, Tensor(), true, gy);
  check_close(got[1], want[1], kExact, "qkv gradient");
  const Tensor scaled = F::packed_self_attention(qkv, 2, Tensor(), false, 0.3);
  const Tensor unit = F::packed_self_attention(qkv, 2, Tensor(), false);
  CHECK(max_rel_diff(scaled, unit) > 1e-3);
}

TEST_CASE("packed_self_attention: with fused_attention off the composed ops give the fused results") {
  Generator g(11);
  const Tensor qkv = randn({2, 70, 36}, TensorOptions(kF64), &g), gy = randn({2, 70, 12}, TensorOptions(kF64), &g);
  Tensor mask = ones({2, 1, 1, 70}, TensorOptions(kBool));
  mask.select(0, 1).narrow(-1, 50, 20).fill_(0.0);
  const V fused = run(true, qkv, 2, mask, true, gy);
  toggles::Scoped composed(toggles::Toggle::fused_attention, false);
  const V ops = run(true, qkv, 2, mask, true, gy);
  check_close(fused[0], ops[0], same_tol(1e-12), "output");
  check_close(fused[1], ops[1], same_tol(1e-12), "qkv gradient");
}

TEST_CASE("packed_self_attention: bad input names the op and what was wrong") {
  const Tensor qkv = zeros({2, 4, 12});
  CHECK_THROWS_WITH_AS(F::packed_self_attention(qkv, 5), doctest::Contains("packed_self_attention: expected qkv"),
                       Error);
  CHECK_THROWS_WITH_AS(F::packed_self_attention(zeros({4, 12}), 2), doctest::Contains("got shape [4,12]"), Error);
  CHECK_THROWS_WITH_AS(F::packed_self_attention(Tensor(), 2), doctest::Contains("undefined"), Error);
  CHECK_THROWS_WITH_AS(F::packed_self_attention(qkv, 2, ones({3, 4}, TensorOptions(kBool))),
                       doctest::Contains("does not broadcast"), Error);
  CHECK_THROWS_WITH_AS(F::packed_self_attention(zeros({2, 4, 12}, TensorOptions(kI64)), 2),
                       doctest::Contains("floating"), Error);
}

TEST_CASE("packed_attention: MultiheadAttention and a GPT step give the same bits off and on, with 7 copies "
          "fewer a layer") {
  auto grads_of = [](bool on, const std::shared_ptr<nn::Module>& m, const std::function<Tensor()>& forward) {
    toggles::Scoped packed(toggles::Toggle::packed_attention, on);
    Tensor y = forward();
    y.backward(sin(y * 2.0 + 0.25));
    V out{y.detach()};
    for (Tensor p : m->parameters()) {
      out.push_back(p.grad());
      p.zero_grad();
    }
    return out;
  };
  auto same = [](const V& a, const V& b, const std::string& what) {
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) check_close(a[i], b[i], kExact, what + " result " + std::to_string(i));
  };
  manual_seed(1);
  auto mha = std::make_shared<nn::MultiheadAttention>(24, 4);
  Generator g(2);
  Tensor x = randn({3, 70, 24}, TensorOptions(kF32), &g).requires_grad_(true);
  Tensor pad = zeros({3, 70}, TensorOptions(kBool));
  pad.select(0, 2).narrow(0, 60, 10).fill_(1.0);  // true = a padded key
  auto attend = [&] { return mha->forward(x, x, x, pad, Tensor(), true); };
  same(grads_of(false, mha, attend), grads_of(true, mha, attend), "MultiheadAttention");

  manual_seed(3);
  const nn::models::GPTOptions o{.context = 32, .n_layer = 2, .n_head = 4, .n_embd = 32};
  auto gpt = std::make_shared<nn::models::GPT>(o);
  const Tensor tokens = randint(0, o.vocab_size, {2, 32}, TensorOptions(kI64), &g);
  auto logits = [&] { return (*gpt)(tokens); };
  same(grads_of(false, gpt, logits), grads_of(true, gpt, logits), "GPT");

  auto copies = [&](bool on) {
    toggles::Scoped packed(toggles::Toggle::packed_attention, on);
    profiler::Session prof({.memory = false, .record_modules = false});
    sum((*gpt)(tokens)).backward();
    prof.stop();
    return std::count_if(prof.events().begin(), prof.events().end(), [](const profiler::Event& e) {
      return e.kind == profiler::EventKind::Kernel && std::string(e.name) == "copy";
    });
  };
  const auto off = copies(false), on = copies(true);
  CAPTURE(off);
  CHECK(on == off - 7 * o.n_layer);
}

// packed_self_attention in f64: causal with a padding mask, and plain, across a query block.
const test::GradcheckCases kPackedAttentionGradcheckCases([](std::vector<test::GradcheckCase>& t) {
  Generator g(21);
  const V in{leaf_of(uniform({2, 5, 18}, g))};
  t.push_back({"packed_self_attention", "2 heads, causal, a padded key", in, [](const V& v) {
                 Tensor mask = ones({2, 1, 1, 5}, TensorOptions(kBool));
                 mask.select(0, 0).narrow(-1, 4, 1).fill_(0.0);
                 return F::packed_self_attention(v[0], 2, mask, true);
               }});
  t.push_back(
      {"packed_self_attention", "3 heads, no mask", in, [](const V& v) { return F::packed_self_attention(v[0], 3); }});
});
