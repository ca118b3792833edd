// Convolution (cuDNN) and pooling on CUDA against the CPU through nn::functional, forward and
// backward: strides, padding, dilation, groups and depthwise, with and without bias; the f16/bf16
// cuDNN path; the algorithm cache reused on a repeated shape; max/avg/adaptive pooling with
// overlapping windows, padding, strided inputs and NaN; channels-last pooling (odd channel counts,
// 16-byte channel vectors, NaN, past one wave) and its output format; the gathered max pool
// backward bit for bit against the CPU, windows sharing winners included. Skipped (reported
// skipped) without a GPU.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mdl.h"
#include "nn/functional.h"
#include "kernels/conv.h"
#include "kernels/pool.h"
#include "cuda/api.h"
#include "tests/support/test_util.h"
#include "switches/list/toggles.h"

using namespace mdl;
using namespace mdl::test;
namespace F = mdl::nn::functional;

namespace {

const Device kGpu = Device::cuda();


// Runs f on the CPU and the GPU on leaf copies of inputs; compares f's output and every input's
// gradient after back-propagating sum(out * fixed random weight).
void compare_devices(const std::string& what, const std::vector<Tensor>& inputs,
                     const std::function<Tensor(const std::vector<Tensor>&)>& f, std::optional<Tol> tol = {}) {
  auto run = [&](Device d) {
    std::vector<Tensor> in;
    for (const Tensor& t : inputs) in.push_back(t.defined() ? t.to(d).detach().requires_grad_() : Tensor());
    Tensor y = f(in);
    sum(y * sample(y.shape(), y.dtype(), 99).to(d)).backward();
    std::vector<Tensor> out{y.detach()};
    for (const Tensor& t : in)
      if (t.defined()) out.push_back(t.grad());
    return out;
  };
  const std::vector<Tensor> c = run(Device::cpu()), g = run(kGpu);
  for (size_t i = 0; i < c.size(); ++i)
    check_close(g[i], c[i], tol.value_or(dtype_tol(c[i].dtype())), what + " result " + std::to_string(i));
}

struct ConvCase {
  Shape x, w;
  F::Pair stride, padding, dilation;
  int64_t groups;
  bool bias;
};

}  // namespace

TEST_CASE("cuda: conv2d through cuDNN matches the CPU, forward and backward" * MDL_CUDA_ONLY) {
  const std::vector<ConvCase> cases{
      {{2, 3, 9, 11}, {4, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true},
      {{2, 4, 10, 9}, {6, 2, 3, 2}, {2, 1}, {0, 1}, {1, 2}, 2, true},    // groups, stride, dilation
      {{3, 8, 7, 7}, {8, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 8, false},    // depthwise
      {{1, 8, 12, 12}, {16, 1, 5, 5}, {2, 2}, {2, 2}, {1, 1}, 8, true},  // depthwise, multiplier 2
      {{4, 16, 6, 6}, {32, 16, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, false},
      {{2, 5, 8, 8}, {3, 5, 3, 3}, {3, 3}, {2, 0}, {2, 2}, 1, true},
  };
  // Both ways of choosing cuDNN's algorithm: measured (cudnn_benchmark on) and its heuristics.
  for (bool measured : {true, false}) {
    toggles::set_cudnn_benchmark(measured);
    for (DType t : {kF64, kF32})
      for (size_t i = 0; i < cases.size(); ++i) {
        const ConvCase& k = cases[i];
        Tensor x = sample(k.x, t, 1), w = sample(k.w, t, 2), b = k.bias ? sample({k.w[0]}, t, 3) : Tensor();
        compare_devices(
            std::string("conv2d ") + (measured ? "measured " : "heuristic ") + dtype_name(t) + " case " +
                std::to_string(i),
            {x, w, b},
            [&](const std::vector<Tensor>& in) {
              return F::conv2d(in[0], in[1], in[2], k.stride, k.padding, k.dilation, k.groups);
            },
            same_tol(t == kF32 ? 3e-4 : 1e-9));  // cuDNN may pick Winograd or FFT in f32
      }
  }
  toggles::set_cudnn_benchmark(true);
  // A strided (non-contiguous) input, and the same shape again (the cached algorithm).
  Tensor x = sample({2, 9, 3, 8}, kF32, 4).permute({0, 2, 1, 3}), w = sample({5, 3, 3, 3}, kF32, 5);
  for (int rep = 0; rep < 2; ++rep)
    compare_devices(
        "conv2d strided input, repeat " + std::to_string(rep), {x, w},
        [](const std::vector<Tensor>& in) {
          return F::conv2d(in[0], in[1], Tensor(), {1, 1}, {1, 1});
        },
        same_tol(3e-4));
}

// Deterministic algorithms only (cudnn_nondeterministic off, the default), measured or from the
// heuristics: a conv's gradients over a batch large enough for atomic sums to reorder are the same
// bits on every run.
TEST_CASE("cuda: conv2d's gradients are the same bits on every run, measured or heuristic" * MDL_CUDA_ONLY) {
  for (bool measured : {true, false})
    for (DType t : {kF16, kF32}) {
      toggles::Scoped choice(toggles::Toggle::cudnn_benchmark, measured);
      const Tensor x = sample({64, 64, 16, 16}, t, 6).to(kGpu), w = sample({64, 64, 3, 3}, t, 7).to(kGpu);
      const Tensor gy = sample({64, 64, 16, 16}, t, 8).to(kGpu);
      std::vector<std::vector<Tensor>> runs;
      for (int run = 0; run < 3; ++run) {
        Tensor xi = x.detach().requires_grad_(), wi = w.detach().requires_grad_();
        F::conv2d(xi, wi, Tensor(), {1, 1}, {1, 1}).backward(gy);
        runs.push_back({xi.grad(), wi.grad()});
      }
      for (int run = 1; run < 3; ++run)
        for (size_t i = 0; i < 2; ++i)
          check_close(runs[size_t(run)][i], runs[0][i], kExact,
                      std::string(measured ? "measured " : "heuristic ") + dtype_name(t) + (i ? " grad_w" : " grad_x") +
                          " run " + std::to_string(run));
    }
}

TEST_CASE("cuda: f16 and bf16 convs run on cuDNN and stay close to the f32 result" * MDL_CUDA_ONLY) {
  kernels::Conv2dParams p;
  p.pad_h = p.pad_w = 1;
  for (DType t : {kF16, kBF16}) {
    Tensor x = sample({2, 8, 10, 10}, t, 1), w = (sample({16, 8, 3, 3}, t, 2) * 0.2).to(t), b = sample({16}, t, 3);
    Tensor want = empty({2, 16, 10, 10});
    kernels::conv2d_forward(Device::cpu(), want, x.to(kF32), w.to(kF32), b.to(kF32), p);
    Tensor got = empty({2, 16, 10, 10}, TensorOptions(t, kGpu));
    kernels::conv2d_forward(kGpu, got, x.to(kGpu), w.to(kGpu), b.to(kGpu), p);
    check_close(got.to(kF32), want, same_tol(t == kF16 ? 5e-3 : 3e-2), std::string("conv2d forward ") + dtype_name(t));
    Tensor gy = sample({2, 16, 10, 10}, t, 4);
    Tensor gx = empty(x.shape()), gw = empty(w.shape()), gb = empty({16});
    kernels::conv2d_backward(Device::cpu(), gx, gw, gb, gy.to(kF32), x.to(kF32), w.to(kF32), p);
    const TensorOptions o(t, kGpu);
    Tensor ggx = empty(x.shape(), o), ggw = empty(w.shape(), o), ggb = empty({16}, o);
    kernels::conv2d_backward(kGpu, ggx, ggw, ggb, gy.to(kGpu), x.to(kGpu), w.to(kGpu), p);
    const Tol tol = same_tol(t == kF16 ? 1e-2 : 5e-2);
    check_close(ggx.to(kF32), gx, tol, std::string("conv2d grad_x ") + dtype_name(t));
    check_close(ggw.to(kF32), gw, tol, std::string("conv2d grad_w ") + dtype_name(t));
    check_close(ggb.to(kF32), gb, tol, std::string("conv2d grad_b ") + dtype_name(t));
    // Through nn::functional the f16 conv stays f16 on the GPU.
    Tensor y = F::conv2d(x.to(kGpu), w.to(kGpu), b.to(kGpu), {1, 1}, {1, 1});
    CHECK(y.dtype() == t);
    check_close(y.to(kF32), want, same_tol(t == kF16 ? 5e-3 : 3e-2), std::string("functional conv2d ") + dtype_name(t));
  }
}

TEST_CASE("cuda: max, average and adaptive pooling match the CPU, forward and backward" * MDL_CUDA_ONLY) {
  for (DType t : {kF32, kF64, kF16, kBF16}) {
    const std::string d = std::string(" ") + dtype_name(t);
    Tensor x = sample({2, 3, 11, 9}, t, 1);
    Tensor xs = sample({2, 11, 3, 9}, t, 2).transpose(1, 2);  // strided input
    compare_devices("max_pool2d 2x2" + d, {x}, [](const std::vector<Tensor>& in) {
      return F::max_pool2d(in[0], {2, 2});
    });
    compare_devices("max_pool2d 3x3 s2 p1 (overlapping)" + d, {xs}, [](const std::vector<Tensor>& in) {
      return F::max_pool2d(in[0], {3, 3}, {2, 2}, {1, 1});
    });
    compare_devices("max_pool2d 3x2 s1" + d, {x}, [](const std::vector<Tensor>& in) {
      return F::max_pool2d(in[0], {3, 2}, {1, 1});
    });
    for (bool cip : {true, false})
      compare_devices("avg_pool2d 3x3 s2 p1" + d + (cip ? " count pad" : ""), {xs},
                      [cip](const std::vector<Tensor>& in) {
                        return F::avg_pool2d(in[0], {3, 3}, {2, 2}, {1, 1}, cip);
                      });
    compare_devices("avg_pool2d 2x3 s1" + d, {x}, [](const std::vector<Tensor>& in) {
      return F::avg_pool2d(in[0], {2, 3}, {1, 1});
    });
    for (F::Pair o : {F::Pair{1, 1}, F::Pair{4, 3}, F::Pair{11, 9}, F::Pair{5, 7}})
      compare_devices("adaptive_avg_pool2d " + std::to_string(o[0]) + "x" + std::to_string(o[1]) + d, {xs},
                      [o](const std::vector<Tensor>& in) { return F::adaptive_avg_pool2d(in[0], o); });
  }
  Tensor nan = sample({1, 1, 4, 4}, kF32, 3);
  nan.slice(2, 1, 2).slice(3, 2, 3).fill_(NAN);
  Tensor c = F::max_pool2d(nan, {2, 2}), g = F::max_pool2d(nan.to(kGpu), {2, 2});
  check_close(g, c, kExact, "max_pool2d with NaN");
  CHECK(std::isnan(g.cpu().to_vector<float>()[1]));
}

TEST_CASE("cuda: channels-last pooling matches the CPU and stays channels-last, forward and backward" * MDL_CUDA_ONLY) {
  // Odd channel counts (one channel per thread), multiples of 8 (16-byte vectors of f16/bf16 and f32),
  // padding, overlapping windows, and NaN for max pool.
  for (DType t : {kF32, kF16, kBF16})
    for (int64_t C : {3, 5, 13, 8, 16, 24}) {
      const std::string d = std::string(" ") + dtype_name(t) + " C " + std::to_string(C);
      Tensor x = sample({2, C, 11, 9}, t, 1).contiguous(MemoryFormat::ChannelsLast);
      Tensor xn = sample({2, C, 8, 8}, kF64, 2);
      xn.slice(2, 1, 2).slice(3, 2, 3).fill_(NAN);
      xn.slice(1, C - 1, C).slice(2, 5, 6).fill_(NAN);
      xn = xn.to(t).contiguous(MemoryFormat::ChannelsLast);
      const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> ops{
          {"max_pool2d 2x2",
           [](const Tensor& v) {
             return F::max_pool2d(v, {2, 2});
           }},
          {"max_pool2d 3x3 s2 p1",
           [](const Tensor& v) {
             return F::max_pool2d(v, {3, 3}, {2, 2}, {1, 1});
           }},
          {"max_pool2d 3x2 s1",
           [](const Tensor& v) {
             return F::max_pool2d(v, {3, 2}, {1, 1});
           }},
          {"avg_pool2d 3x3 s2 p1 count pad",
           [](const Tensor& v) {
             return F::avg_pool2d(v, {3, 3}, {2, 2}, {1, 1}, true);
           }},
          {"avg_pool2d 3x3 s2 p1",
           [](const Tensor& v) {
             return F::avg_pool2d(v, {3, 3}, {2, 2}, {1, 1}, false);
           }},
          {"avg_pool2d 2x3 s1",
           [](const Tensor& v) {
             return F::avg_pool2d(v, {2, 3}, {1, 1});
           }},
          {"adaptive_avg_pool2d 4x3",
           [](const Tensor& v) {
             return F::adaptive_avg_pool2d(v, {4, 3});
           }},
          {"adaptive_avg_pool2d 1x1",
           [](const Tensor& v) {
             return F::adaptive_avg_pool2d(v, {1, 1});
           }},
      };
      for (const auto& entry : ops) {
        const std::string& name = entry.first;
        const std::function<Tensor(const Tensor&)>& op = entry.second;
        compare_devices(name + d, {x}, [&op](const std::vector<Tensor>& in) { return op(in[0]); });
        const Tensor y = op(x.to(kGpu));
        CHECK_MESSAGE(y.memory_format() == MemoryFormat::ChannelsLast, (name + d), ": ",
                      memory_format_name(y.memory_format()));
      }
      for (F::Pair k : {F::Pair{2, 2}, F::Pair{3, 3}}) {
        const std::string what = "max_pool2d with NaN " + std::to_string(k[0]) + d;
        compare_devices(what, {xn}, [k](const std::vector<Tensor>& in) {
          return F::max_pool2d(in[0], k, {2, 2}, {k[0] / 2, k[1] / 2});
        });
        check_close(F::max_pool2d(xn.to(kGpu), k, {2, 2}, {k[0] / 2, k[1] / 2}),
                    F::max_pool2d(xn, k, {2, 2}, {k[0] / 2, k[1] / 2}), kExact, what + " exact");
      }
    }
  // Past one wave of the GPU: 64 x 64 channels of 32 x 32.
  for (DType t : {kF32, kF16}) {
    const std::string d = std::string(" ") + dtype_name(t);
    Tensor x = sample({64, 64, 32, 32}, t, 5).contiguous(MemoryFormat::ChannelsLast);
    compare_devices("max_pool2d 3x3 s2 p1 large" + d, {x}, [](const std::vector<Tensor>& in) {
      return F::max_pool2d(in[0], {3, 3}, {2, 2}, {1, 1});
    });
    compare_devices("avg_pool2d 2x2 large" + d, {x}, [](const std::vector<Tensor>& in) {
      return F::avg_pool2d(in[0], {2, 2});
    });
    compare_devices("adaptive_avg_pool2d 1x1 large" + d, {x}, [](const std::vector<Tensor>& in) {
      return F::adaptive_avg_pool2d(in[0], {1, 1});
    });
  }
}

TEST_CASE("cuda: the pooling kernels write channels-last outputs and indices as the CPU's, bit for bit" *
          MDL_CUDA_ONLY) {
  // Called directly with channels-last outputs (the 16-byte stores where C allows) and with
  // (N, C, H, W) ones, against the CPU's (N, C, H, W) results.
  const kernels::Pool2dParams p{3, 3, 2, 2, 1, 1};
  for (DType t : {kF32, kF16, kBF16})
    for (int64_t C : {5, 8, 16}) {
      const std::string d = std::string(" ") + dtype_name(t) + " C " + std::to_string(C);
      Tensor x = sample({3, C, 9, 10}, kF64, 7);
      x.slice(2, 4, 5).slice(3, 3, 4).fill_(NAN);
      x = x.to(t).contiguous(MemoryFormat::ChannelsLast);
      const Shape os{3, C, 5, 5};
      Tensor want = empty(os, TensorOptions(t)), want_idx = empty(os, TensorOptions(kI64)),
             want_avg = empty(os, TensorOptions(t)), want_ad = empty({3, C, 4, 3}, TensorOptions(t));
      kernels::max_pool2d_forward(Device::cpu(), want, want_idx, x, p);
      kernels::avg_pool2d_forward(Device::cpu(), want_avg, x, p, false);
      kernels::adaptive_avg_pool2d_forward(Device::cpu(), want_ad, x);
      const Tensor xg = x.to(kGpu);
      for (MemoryFormat f : {MemoryFormat::ChannelsLast, MemoryFormat::Contiguous}) {
        const std::string what = d + " " + memory_format_name(f);
        Tensor out = make_tensor(os, t, kGpu, f), idx = make_tensor(os, kI64, kGpu, f),
               avg = make_tensor(os, t, kGpu, f), ad = make_tensor({3, C, 4, 3}, t, kGpu, f);
        kernels::max_pool2d_forward(kGpu, out, idx, xg, p);
        kernels::avg_pool2d_forward(kGpu, avg, xg, p, false);
        kernels::adaptive_avg_pool2d_forward(kGpu, ad, xg);
        check_close(out, want, kExact, "max_pool2d" + what);
        check_close(idx, want_idx, kExact, "max_pool2d indices" + what);
        check_close(avg, want_avg, dtype_tol(t), "avg_pool2d" + what);
        check_close(ad, want_ad, dtype_tol(t), "adaptive_avg_pool2d" + what);
      }
    }
}

TEST_CASE("cuda: the gathered max pool backward adds the CPU's sums in its order, bit for bit" * MDL_CUDA_ONLY) {
  struct Case {
    Shape x;
    kernels::Pool2dParams p;
    double ties;  // > 0: inputs rounded to multiples of this, so that windows tie and share winners
  };
  const std::vector<Case> cases{
      {{2, 3, 11, 9}, {3, 3, 2, 2, 1, 1}, 0},
      {{2, 13, 9, 9}, {3, 3, 1, 1, 1, 1}, 0.5},  // each input in up to 9 windows, many picked by several
      {{4, 16, 12, 12}, {3, 3, 2, 2, 1, 1}, 1.0},
      {{64, 64, 32, 32}, {3, 3, 2, 2, 1, 1}, 0},
      {{1, 2, 2, 7000}, {1, 2, 1, 1, 0, 0}, 0},  // lines past the gather's shared memory: per-plane walk
  };
  for (DType t : {kF32, kF16, kBF16})
    for (size_t ci = 0; ci < cases.size(); ++ci) {
      const Case& k = cases[ci];
      Tensor x = sample(k.x, kF64, 11 + ci);
      if (k.ties > 0) {
        std::vector<double> v = values(x);
        for (double& e : v) e = std::round(e / k.ties) * k.ties;
        x = from_vector(v, k.x);
      }
      x = x.to(t);
      const Shape os{k.x[0], k.x[1], (k.x[2] + 2 * k.p.pad_h - k.p.kernel_h) / k.p.stride_h + 1,
                     (k.x[3] + 2 * k.p.pad_w - k.p.kernel_w) / k.p.stride_w + 1};
      Tensor out = empty(os, TensorOptions(t)), idx = empty(os, TensorOptions(kI64));
      kernels::max_pool2d_forward(Device::cpu(), out, idx, x, k.p);
      const Tensor go = (sample(os, kF64, 40 + ci) * 100.0).to(t);
      Tensor want = empty(k.x, TensorOptions(t));
      kernels::max_pool2d_backward(Device::cpu(), want, go, idx);
      for (MemoryFormat f : {MemoryFormat::Contiguous, MemoryFormat::ChannelsLast}) {
        const std::string what = std::string("max_pool2d_backward ") + dtype_name(t) + " case " + std::to_string(ci) +
                                 " " + memory_format_name(f);
        Tensor got = make_tensor(k.x, t, kGpu, f);
        got.fill_(7.0);  // every element must be written
        kernels::max_pool2d_backward(kGpu, got, go.to(kGpu).contiguous(f), idx.to(kGpu).contiguous(f));
        check_close(got, want, kExact, what);
      }
    }
  // Nine windows pick one input; their gradients' float sum depends on the order of the additions.
  Tensor x = zeros({1, 1, 7, 7});
  x.slice(2, 3, 4).slice(3, 3, 4).fill_(5.0);
  const kernels::Pool2dParams p{3, 3, 1, 1, 1, 1};
  Tensor out = empty({1, 1, 7, 7}), idx = empty({1, 1, 7, 7}, TensorOptions(kI64));
  kernels::max_pool2d_forward(Device::cpu(), out, idx, x, p);
  std::vector<float> g(49, 0.0f);
  for (int oh = 2; oh <= 4; ++oh)
    for (int ow = 2; ow <= 4; ++ow) g[size_t(oh * 7 + ow)] = 1.0f;
  g[2 * 7 + 2] = 1e8f;
  g[4 * 7 + 4] = -1e8f;
  const Tensor go = from_vector(g, {1, 1, 7, 7});
  Tensor want = empty({1, 1, 7, 7}), got = empty({1, 1, 7, 7}, TensorOptions(kF32, kGpu));
  kernels::max_pool2d_backward(Device::cpu(), want, go, idx);
  kernels::max_pool2d_backward(kGpu, got, go.to(kGpu), idx.to(kGpu));
  check_close(got, want, kExact, "max_pool2d_backward nine winners");
  CHECK(got.cpu().to_vector<float>()[3 * 7 + 3] == 0.0f);
}
