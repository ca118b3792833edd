// The fused normalisations, cross-entropy and GradScaler's unscale-and-check on CUDA against the
// CPU: batch norm (training with its running statistics, and eval; with the ReLU folded in, also
// against the composed ops on the GPU; with a residual added; the same bits on every run; with the
// statistics passes packed), layer
// norm, group norm and cross-entropy (label smoothing, ignore_index, spatial targets) through
// nn::functional, forward and backward, in each dtype's tolerance. Skipped (reported skipped)
// without a GPU.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "mdl.h"
#include "nn/functional.h"
#include "kernels/amp.h"
#include "switches/list/toggles.h"
#include "tests/support/test_util.h"

using namespace mdl;
using mdl::test::check_close;
using mdl::test::dtype_tol;
using mdl::test::kExact;
using mdl::test::same_tol;
using mdl::test::Tol;
namespace F = mdl::nn::functional;

namespace {

const Device kGpu = Device::cuda();

Tensor sample(const Shape& s, DType t, uint64_t seed, double shift = 0) {
  Generator g(seed);
  return (randn(s, TensorOptions(kF64), &g) + shift).to(t);
}

// Leaf copies on device d that require grad (undefined stays undefined).
std::vector<Tensor> leaves(const std::vector<Tensor>& ts, Device d) {
  std::vector<Tensor> r;
  for (const Tensor& t : ts) r.push_back(t.defined() ? t.to(d).detach().requires_grad_() : Tensor());
  return r;
}

// Runs f on the CPU and on the GPU with leaf copies of `inputs`; f returns the outputs to compare
// (its first one is reduced against a fixed random weight and back-propagated). Compares the
// outputs and every input's gradient.
void compare_devices(const std::string& what, const std::vector<Tensor>& inputs,
                     const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& f,
                     std::optional<Tol> tol = {}) {
  auto run = [&](Device d) {
    std::vector<Tensor> in = leaves(inputs, d);
    std::vector<Tensor> out = f(in);
    Tensor y = out[0];
    Tensor w = sample(y.shape(), y.dtype(), 99).to(d);
    sum(y * w).backward();
    for (Tensor& o : out) o = o.detach();
    for (const Tensor& t : in)
      if (t.defined()) out.push_back(t.grad());
    return out;
  };
  const std::vector<Tensor> c = run(Device::cpu()), g = run(kGpu);
  REQUIRE(c.size() == g.size());
  for (size_t i = 0; i < c.size(); ++i) {
    REQUIRE_MESSAGE(g[i].device() == kGpu, what, ": result ", i, " is on ", g[i].device());
    check_close(g[i], c[i], tol.value_or(dtype_tol(c[i].dtype())), what + " result " + std::to_string(i));
  }
}

std::string name(const char* what, DType t) { return std::string(what) + " " + dtype_name(t); }

}  // namespace

TEST_CASE("cuda: batch_norm training, eval and running statistics match the CPU" * MDL_CUDA_ONLY) {
  for (DType t : {kF32, kF64, kF16, kBF16})
    // Odd sizes (the scalar passes); S and C multiples of 8, as rows (channels-last) too (the
    // 16-byte passes, consecutive channels or one channel per vector); one past a wave of blocks.
    for (const Shape& s : {Shape{4, 6, 5, 7}, Shape{33, 5}, Shape{2, 3, 300}, Shape{64, 13}, Shape{3, 5, 8, 16},
                           Shape{96, 24}, Shape{16, 64, 32, 32}}) {
      const int64_t C = s[1];
      Tensor x = sample(s, t, 1, 0.5), w = sample({C}, t, 2), b = sample({C}, t, 3);
      for (bool training : {true, false}) {
        Tensor rm_c = sample({C}, kF32, 4) * 0.1, rv_c = abs(sample({C}, kF32, 5)) + 0.5;
        Tensor rm_g = rm_c.to(kGpu), rv_g = rv_c.to(kGpu);
        compare_devices(name(training ? "batch_norm train" : "batch_norm eval", t), {x, w, b},
                        [&](const std::vector<Tensor>& in) {
                          const bool gpu = in[0].device() == kGpu;
                          return std::vector<Tensor>{F::batch_norm(in[0], gpu ? rm_g : rm_c, gpu ? rv_g : rv_c, in[1],
                                                                   in[2], training, 0.1, 1e-5)};
                        });
        check_close(rm_g, rm_c, dtype_tol(kF32), name("running_mean", t));
        check_close(rv_g, rv_c, dtype_tol(kF32), name("running_var", t));
      }
      compare_devices(name("batch_norm without affine or running stats", t), {x}, [&](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{F::batch_norm(in[0], Tensor(), Tensor(), Tensor(), Tensor(), true)};
      });
    }
}

TEST_CASE("cuda: batch_norm_relu matches the CPU's, and the GPU's relu(batch_norm) exactly" * MDL_CUDA_ONLY) {
  for (DType t : {kF32, kF64, kF16, kBF16})
    for (MemoryFormat format : {MemoryFormat::Contiguous, MemoryFormat::ChannelsLast})
      // Odd (scalar passes), vector runs within a channel and across channels, past one wave.
      for (const Shape& s : {Shape{4, 6, 5, 7}, Shape{3, 5, 8, 16}, Shape{2, 24, 4, 4}, Shape{16, 64, 32, 32}}) {
        const int64_t C = s[1];
        const Tensor x = sample(s, t, 1, 0.3).contiguous(format), w = sample({C}, t, 2), b = sample({C}, t, 3);
        const std::string what = name("batch_norm_relu", t) + (format == MemoryFormat::ChannelsLast ? " NHWC " : " ") +
                                 shape_str(s);
        for (bool training : {true, false}) {
          Tensor rm = sample({C}, kF32, 4) * 0.1, rv = abs(sample({C}, kF32, 5)) + 0.5;
          // The mask of a value within rounding of zero may differ between devices, whose statistics
          // differ in the last bits: the CPU comparison keeps to sizes where none is that close.
          if (s[0] * s[2] * s[3] <= 512)
            compare_devices(what + (training ? " train" : " eval"), {x, w, b}, [&](const std::vector<Tensor>& in) {
              const Tensor rmd = rm.to(in[0].device()), rvd = rv.to(in[0].device());
              return std::vector<Tensor>{F::batch_norm_relu(in[0], rmd, rvd, in[1], in[2], training, 0.1, 1e-5)};
            });
          // On one device the fused op and the composed one see the same statistics: the same bits.
          std::vector<std::vector<Tensor>> sides;
          for (bool fused : {true, false}) {
            std::vector<Tensor> in = leaves({x, w, b}, kGpu);
            Tensor rmd = rm.to(kGpu), rvd = rv.to(kGpu);
            Tensor y = fused ? F::batch_norm_relu(in[0], rmd, rvd, in[1], in[2], training, 0.1, 1e-5)
                             : relu(F::batch_norm(in[0], rmd, rvd, in[1], in[2], training, 0.1, 1e-5));
            y.backward(sample(s, t, 6).to(kGpu));
            sides.push_back({y.detach(), in[0].grad(), in[1].grad(), in[2].grad(), rmd, rvd});
          }
          for (size_t i = 0; i < sides[0].size(); ++i)
            check_close(sides[0][i], sides[1][i], kExact,
                        what + " fused against composed, result " + std::to_string(i));
        }
      }
}

TEST_CASE("cuda: batch_norm_add_relu matches the CPU's, and in f32 the GPU's add_relu(batch_norm) exactly" *
          MDL_CUDA_ONLY) {
  for (DType t : {kF32, kF16, kBF16})
    for (MemoryFormat format : {MemoryFormat::Contiguous, MemoryFormat::ChannelsLast})
      // Odd (scalar passes), vector runs within a channel and across channels, past one wave.
      for (const Shape& s : {Shape{4, 6, 5, 7}, Shape{3, 5, 8, 16}, Shape{2, 24, 4, 4}, Shape{16, 64, 32, 32}}) {
        const int64_t C = s[1];
        const Tensor x = sample(s, t, 1, 0.3).contiguous(format), r = sample(s, t, 7).contiguous(format);
        const Tensor w = sample({C}, t, 2), b = sample({C}, t, 3);
        const std::string what = name("batch_norm_add_relu", t) +
                                 (format == MemoryFormat::ChannelsLast ? " NHWC " : " ") + shape_str(s);
        for (bool training : {true, false}) {
          Tensor rm = sample({C}, kF32, 4) * 0.1, rv = abs(sample({C}, kF32, 5)) + 0.5;
          // As for batch_norm_relu: the CPU comparison keeps to sizes where no sum lies within the
          // devices' last-bit differences of zero.
          if (s[0] * s[2] * s[3] <= 512)
            compare_devices(what + (training ? " train" : " eval"), {x, r, w, b}, [&](const std::vector<Tensor>& in) {
              const Tensor rmd = rm.to(in[0].device()), rvd = rv.to(in[0].device());
              return std::vector<Tensor>{
                  F::batch_norm_add_relu(in[0], in[1], rmd, rvd, in[2], in[3], training, 0.1, 1e-5)};
            });
          if (t != kF32) continue;  // 16 bits: the fused sum is rounded once, the composed one twice
          std::vector<std::vector<Tensor>> sides;
          for (bool fused : {true, false}) {
            std::vector<Tensor> in = leaves({x, r, w, b}, kGpu);
            Tensor rmd = rm.to(kGpu), rvd = rv.to(kGpu);
            Tensor y = fused ? F::batch_norm_add_relu(in[0], in[1], rmd, rvd, in[2], in[3], training, 0.1, 1e-5)
                             : add_relu(F::batch_norm(in[0], rmd, rvd, in[2], in[3], training, 0.1, 1e-5), in[1]);
            y.backward(sample(s, t, 6).to(kGpu));
            sides.push_back({y.detach(), in[0].grad(), in[1].grad(), in[2].grad(), in[3].grad(), rmd, rvd});
          }
          for (size_t i = 0; i < sides[0].size(); ++i)
            check_close(sides[0][i], sides[1][i], kExact,
                        what + " fused against composed, result " + std::to_string(i));
        }
      }
}

// Whichever block of a channel finishes last adds the channel's partial sums, always in one order:
// many pieces per channel (a wide NCHW channel, an f16 one loaded 8 at a time, channels-last rows
// of 32-channel groups), run twice, must give the same bits every time.
TEST_CASE("cuda: batch_norm's statistics and gradients are the same bits on every run" * MDL_CUDA_ONLY) {
  for (DType t : {kF32, kF16})
    for (MemoryFormat format : {MemoryFormat::Contiguous, MemoryFormat::ChannelsLast})
      for (const Shape& s : {Shape{64, 3, 64, 64}, Shape{32, 96, 16, 16}, Shape{7, 5, 9, 11}}) {
        const int64_t C = s[1];
        const Tensor x = sample(s, t, 1, 0.5).contiguous(format), w = sample({C}, t, 2), b = sample({C}, t, 3);
        const Tensor gy = sample(s, t, 4).to(kGpu);
        std::vector<std::vector<Tensor>> runs;
        for (int run = 0; run < 3; ++run) {
          std::vector<Tensor> in = leaves({x, w, b}, kGpu);
          Tensor rm = zeros({C}, kGpu), rv = ones({C}, kGpu);
          Tensor y = F::batch_norm(in[0], rm, rv, in[1], in[2], true, 0.1, 1e-5);
          y.backward(gy);
          runs.push_back({y.detach(), in[0].grad(), in[1].grad(), in[2].grad(), rm, rv});
        }
        const std::string what = name("batch_norm", t) + (format == MemoryFormat::ChannelsLast ? " NHWC " : " ") +
                                 shape_str(s);
        for (int run = 1; run < 3; ++run)
          for (size_t i = 0; i < runs[0].size(); ++i)
            check_close(runs[size_t(run)][i], runs[0][i], kExact,
                        what + " run " + std::to_string(run) + " result " + std::to_string(i));
      }
}

// The packed statistics passes (batch_norm_packed_stats). NCHW: pieces of more than one round of
// packed loads per thread, each ending in a short round ((101, 64, 40, 40): 1263 vectors a piece in
// f16, 2525 in f32), a vector run below one round, odd sizes that keep the scalar passes.
// Channels-last rows: 64 channels (8 vectors of f16 a row, 32 rows a block step, 158 rows a piece:
// a round and a short one), C of 3 or 5 vectors (threads left idle), C past one block's 256 vectors
// (2056 in f16: a second column of one vector), C not a multiple of a vector (the rows pass).
// Against the CPU; the same bits on a second run; the fused ReLU's the composed one's bits.
TEST_CASE("cuda: batch_norm's packed statistics match the CPU, repeat and keep the fused ReLU's bits" * MDL_CUDA_ONLY) {
  toggles::Scoped packed(toggles::Toggle::batch_norm_packed_stats, true);
  for (DType t : {kF16, kBF16, kF32, kF64})
    for (MemoryFormat format : {MemoryFormat::Contiguous, MemoryFormat::ChannelsLast})
      for (const Shape& s : {Shape{101, 64, 40, 40}, Shape{3, 5, 8, 16}, Shape{4, 6, 5, 7}, Shape{7, 24, 9, 11},
                             Shape{3, 40, 10, 10}, Shape{4, 2056, 2, 2}}) {
        const int64_t C = s[1];
        const std::string what = name("batch_norm packed", t) +
                                 (format == MemoryFormat::ChannelsLast ? " NHWC " : " ") + shape_str(s);
        const Tensor x = sample(s, t, 1, 0.5).contiguous(format), w = sample({C}, t, 2), b = sample({C}, t, 3);
        Tensor rm_c = zeros({C}), rv_c = ones({C}), rm_g = rm_c.to(kGpu), rv_g = rv_c.to(kGpu);
        compare_devices(what, {x, w, b}, [&](const std::vector<Tensor>& in) {
          const bool gpu = in[0].device() == kGpu;
          return std::vector<Tensor>{
              F::batch_norm(in[0], gpu ? rm_g : rm_c, gpu ? rv_g : rv_c, in[1], in[2], true, 0.1, 1e-5)};
        });
        check_close(rm_g, rm_c, dtype_tol(kF32), what + " running_mean");
        check_close(rv_g, rv_c, dtype_tol(kF32), what + " running_var");
        // relu(batch_norm) twice, then batch_norm_relu. Its mask comes from v in f32 where relu's
        // comes from v rounded: an f16 v below 2^-25 rounds to 0, which is rare but may happen in ten
        // million values, so f16 compares the fused op only on small sizes.
        const int fused_runs = t == kF16 && x.numel() > 100000 ? 0 : 1;
        const Tensor gy = sample(s, t, 6).contiguous(format).to(kGpu);
        std::vector<std::vector<Tensor>> runs;
        for (int run = 0; run < 2 + fused_runs; ++run) {
          std::vector<Tensor> in = leaves({x, w, b}, kGpu);
          Tensor rm = zeros({C}, kGpu), rv = ones({C}, kGpu);
          Tensor y = run < 2 ? relu(F::batch_norm(in[0], rm, rv, in[1], in[2], true, 0.1, 1e-5))
                             : F::batch_norm_relu(in[0], rm, rv, in[1], in[2], true, 0.1, 1e-5);
          y.backward(gy);
          runs.push_back({y.detach(), in[0].grad(), in[1].grad(), in[2].grad(), rm, rv});
        }
        for (size_t run = 1; run < runs.size(); ++run)
          for (size_t i = 0; i < runs[0].size(); ++i)
            check_close(runs[run][i], runs[0][i], kExact,
                        what + (run == 1 ? " second run" : " fused ReLU") + ", result " + std::to_string(i));
      }
}

// bf16 has f32's range: an outlier of 2e19 in each channel squares past f32's largest value, so the
// packed passes sum bf16 in double, as the CPU does. Variance about 6e36, every output finite.
TEST_CASE("cuda: batch_norm's packed statistics keep bf16's range, against the CPU" * MDL_CUDA_ONLY) {
  toggles::Scoped packed(toggles::Toggle::batch_norm_packed_stats, true);
  const Shape s{2, 8, 4, 8};
  std::vector<float> v(size_t(shape_numel(s)), 0.0f);
  for (int64_t c = 0; c < 8; ++c) v[size_t((8 + c) * 32 + 5)] = 2e19f;  // x[1, c, 0, 5]
  for (MemoryFormat format : {MemoryFormat::Contiguous, MemoryFormat::ChannelsLast}) {
    const std::string what = std::string("batch_norm packed bf16 outliers") +
                             (format == MemoryFormat::ChannelsLast ? " NHWC" : "");
    const Tensor x = from_vector<float>(v, s).to(kBF16).contiguous(format), w = sample({8}, kBF16, 2),
                 b = sample({8}, kBF16, 3);
    Tensor rm_c = zeros({8}), rv_c = ones({8}), rm_g = rm_c.to(kGpu), rv_g = rv_c.to(kGpu);
    compare_devices(what, {x, w, b}, [&](const std::vector<Tensor>& in) {
      const bool gpu = in[0].device() == kGpu;
      return std::vector<Tensor>{
          F::batch_norm(in[0], gpu ? rm_g : rm_c, gpu ? rv_g : rv_c, in[1], in[2], true, 0.1, 1e-5)};
    });
    check_close(rv_g, rv_c, dtype_tol(kF32), what + " running_var");
    for (float r : rv_g.cpu().to_vector<float>()) CHECK_MESSAGE(std::isfinite(r), what, ": running_var ", r);
  }
}

TEST_CASE("cuda: layer_norm and group_norm, forward and backward, match the CPU" * MDL_CUDA_ONLY) {
  for (DType t : {kF32, kF64, kF16, kBF16}) {
    Tensor x = sample({3, 7, 40}, t, 1, 0.3), w = sample({40}, t, 2), b = sample({40}, t, 3);
    compare_devices(name("layer_norm", t), {x, w, b}, [](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{F::layer_norm(in[0], {40}, in[1], in[2])};
    });
    Tensor w2 = sample({7, 40}, t, 4);
    compare_devices(name("layer_norm over two dims, no bias", t), {x, w2}, [](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{F::layer_norm(in[0], {7, 40}, in[1])};
    });
    Tensor wide = sample({2, 3000}, t, 5);  // rows longer than a block, one warp each
    compare_devices(name("layer_norm wide rows", t), {wide},
                    [](const std::vector<Tensor>& in) { return std::vector<Tensor>{F::layer_norm(in[0], {3000})}; });
    Tensor wider = sample({3, 5000}, t, 9);  // past one warp's rows: a block per row
    compare_devices(name("layer_norm rows past a warp's", t), {wider},
                    [](const std::vector<Tensor>& in) { return std::vector<Tensor>{F::layer_norm(in[0], {5000})}; });
    // A transformer's shape: 2112 rows of 384 (the parameter sums over many row pieces) and 33 odd
    // features (a warp's lanes not all busy, 32 features per block plus one).
    for (int64_t features : {384, 33}) {
      Tensor xt = sample({64, 33, features}, t, 10, 0.1), wt = sample({features}, t, 11),
             bt = sample({features}, t, 12);
      compare_devices(name("layer_norm", t) + " rows of " + std::to_string(features), {xt, wt, bt},
                      [features](const std::vector<Tensor>& in) {
                        return std::vector<Tensor>{F::layer_norm(in[0], {features}, in[1], in[2])};
                      });
    }
    Tensor xg = sample({4, 12, 5, 3}, t, 6, -0.2), wg = sample({12}, t, 7), bg = sample({12}, t, 8);
    for (int64_t groups : {1, 3, 12})
      compare_devices(name("group_norm", t) + " groups " + std::to_string(groups), {xg, wg, bg},
                      [groups](const std::vector<Tensor>& in) {
                        return std::vector<Tensor>{F::group_norm(in[0], groups, in[1], in[2])};
                      });
    if (t == kF32) {  // groups far from 0, whose deviations x * a + (b - mean * a) lost
      const Tensor far = from_vector<float>({1e7f, 1e7f + 2, 5e6f + 0.5f, 5e6f + 1.5f}, {1, 4});
      compare_devices("group_norm f32 far from 0", {far},
                      [](const std::vector<Tensor>& in) { return std::vector<Tensor>{F::group_norm(in[0], 2)}; });
    }
    // No spatial dims (S == 1) with several groups, each row of a group a warp's: (6, 12) in 3 groups,
    // (2112, 40) in 4 (the parameter sums over many row pieces); and 5000 channels a group, past a
    // warp's rows (the block kernels with S == 1).
    struct FlatCase {
      Shape shape;
      int64_t groups;
    };
    for (const FlatCase& c : {FlatCase{{6, 12}, 3}, FlatCase{{2112, 40}, 4}, FlatCase{{2, 10000}, 2}}) {
      const int64_t C = c.shape[1], groups = c.groups;
      Tensor xf = sample(c.shape, t, 13, 0.2), wf = sample({C}, t, 14), bf = sample({C}, t, 15);
      compare_devices(name("group_norm", t) + " (" + std::to_string(c.shape[0]) + ", " + std::to_string(C) +
                          ") groups " + std::to_string(groups),
                      {xf, wf, bf}, [groups](const std::vector<Tensor>& in) {
                        return std::vector<Tensor>{F::group_norm(in[0], groups, in[1], in[2])};
                      });
    }
  }
}

TEST_CASE("cuda: cross_entropy with label smoothing, ignore_index and spatial targets matches the CPU" *
          MDL_CUDA_ONLY) {
  for (DType t : {kF32, kF64, kF16, kBF16})
    for (double ls : {0.0, 0.1}) {
      Tensor logits = sample({9, 1000}, t, 1) * 3.0;
      Tensor target = from_vector<int64_t>({0, 999, 5, -100, 17, 500, 3, -100, 42}, {9});
      for (auto red :
           {nn::functional::Reduction::Mean, nn::functional::Reduction::Sum, nn::functional::Reduction::None}) {
        F::CrossEntropyOptions o;
        o.label_smoothing = ls;
        o.reduction = red;
        compare_devices(name("cross_entropy", t) + " ls " + std::to_string(ls), {logits},
                        [&](const std::vector<Tensor>& in) {
                          return std::vector<Tensor>{F::cross_entropy(in[0], target.to(in[0].device()), o)};
                        });
      }
      Tensor spatial = sample({2, 5, 3, 4}, t, 2);  // (N, C, d1, d2)
      Tensor st = from_vector<int64_t>({0, 1, 2, 3, 4, 0, 1, 2, 3, 4, -1, 0, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0, -1, 1},
                                       {2, 3, 4});
      F::CrossEntropyOptions o;
      o.label_smoothing = ls;
      o.ignore_index = -1;
      compare_devices(name("cross_entropy spatial", t), {spatial}, [&](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{F::cross_entropy(in[0], st.to(in[0].device()), o)};
      });
    }
}

TEST_CASE("cuda: GradScaler's unscale-and-check flags inf and NaN and unscales like the CPU" * MDL_CUDA_ONLY) {
  for (DType t : {kF32, kF64})
    for (double bad : {0.0, double(INFINITY), -double(INFINITY), double(NAN)}) {
      Tensor g = sample({100003}, t, 1) * 1024.0;
      if (bad != 0.0) g.slice(0, 77777, 77778).fill_(bad);
      Tensor gc = g.clone(), gg = g.to(kGpu);
      Tensor fc = zeros({}), fg = zeros({}, kGpu);
      kernels::unscale_check(Device::cpu(), gc, fc, scalar_tensor(1024.0));
      kernels::unscale_check(kGpu, gg, fg, scalar_tensor(1024.0, kGpu));
      check_close(gg, gc, kExact, name("unscaled gradient", t));
      CHECK(fg.item<float>() == fc.item<float>());
      CHECK(fg.item<float>() == (bad == 0.0 ? 0.0f : 1.0f));
    }
  Tensor h = zeros({4}, TensorOptions(kF16, kGpu)), f = zeros({}, kGpu);
  const Tensor two = scalar_tensor(2.0, kGpu);
  CHECK_THROWS_WITH_AS(kernels::unscale_check(kGpu, h, f, two), doctest::Contains("expected an f32 or f64 gradient"),
                       mdl::Error);
  CHECK_THROWS_WITH_AS(kernels::unscale_check(kGpu, zeros({4}, kGpu), zeros({}), two),
                       doctest::Contains("found_inf is on cpu"), mdl::Error);
}
