// conv2d's test harness shared by the conv tests: cases (shape, stride, padding, dilation, groups,
// input layout), the seven reference loops in double forward and backward, and a run of
// nn::functional::conv2d on random tensors.
#pragma once
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "mdl.h"
#include "nn/functional.h"
#include "tests/support/test_util.h"

namespace mdl::test::conv {

namespace F = mdl::nn::functional;
using F::Pair;
using V = std::vector<double>;

inline double max_abs(const V& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

// max |a - b| / max(1, max |b|).
inline double rel_err(const V& a, const V& b) {
  REQUIRE(a.size() == b.size());
  double e = 0;
  for (size_t i = 0; i < a.size(); ++i) e = std::max(e, std::abs(a[i] - b[i]));
  return e / std::max(1.0, max_abs(b));
}

// A 4-D (N, C, H, W) view of leaf in one of three layouts: "contiguous" (leaf itself),
// "channels_last" (an (N, H, W, C) leaf permuted) and "strided" (every other column of (N, C, H, 2W)).
inline Shape leaf_shape(const Shape& s, const std::string& layout) {
  if (layout == "channels_last") return {s[0], s[2], s[3], s[1]};
  if (layout == "strided") return {s[0], s[1], s[2], 2 * s[3]};
  return s;
}
inline Tensor view_of(const Tensor& leaf, const std::string& layout) {
  if (layout == "channels_last") return permute(leaf, {0, 3, 1, 2});
  if (layout == "strided") return slice(leaf, 3, 0, leaf.size(3), 2);
  return leaf;
}

struct ConvCase {
  int64_t N, C, H, W, Cout, kh, kw;
  Pair s{1, 1}, p{0, 0}, d{1, 1};
  int64_t g = 1;
  bool bias = true;
  std::string layout = "contiguous";
};

inline std::string describe(const ConvCase& c) {
  return "x [" + std::to_string(c.N) + "," + std::to_string(c.C) + "," + std::to_string(c.H) + "," +
         std::to_string(c.W) + "] w [" + std::to_string(c.Cout) + "," + std::to_string(c.C / c.g) + "," +
         std::to_string(c.kh) + "," + std::to_string(c.kw) + "] stride " + std::to_string(c.s[0]) + "," +
         std::to_string(c.s[1]) + " pad " + std::to_string(c.p[0]) + "," + std::to_string(c.p[1]) + " dil " +
         std::to_string(c.d[0]) + "," + std::to_string(c.d[1]) + " groups " + std::to_string(c.g) +
         (c.bias ? " bias " : " no bias ") + c.layout;
}

inline int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
  return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

// The seven loops, in double. x (N, C, H, W), w (Cout, C/g, kh, kw), b (Cout) or empty.
inline V ref_conv(const ConvCase& c, const V& x, const V& w, const V& b) {
  const int64_t Ho = out_size(c.H, c.kh, c.s[0], c.p[0], c.d[0]), Wo = out_size(c.W, c.kw, c.s[1], c.p[1], c.d[1]);
  const int64_t Cig = c.C / c.g, Cog = c.Cout / c.g;
  V out(size_t(c.N * c.Cout * Ho * Wo));
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t co = 0; co < c.Cout; ++co)
      for (int64_t oh = 0; oh < Ho; ++oh)
        for (int64_t ow = 0; ow < Wo; ++ow) {
          double s = b.empty() ? 0.0 : b[size_t(co)];
          for (int64_t ci = 0; ci < Cig; ++ci)
            for (int64_t ki = 0; ki < c.kh; ++ki)
              for (int64_t kj = 0; kj < c.kw; ++kj) {
                const int64_t ih = oh * c.s[0] - c.p[0] + ki * c.d[0], iw = ow * c.s[1] - c.p[1] + kj * c.d[1];
                if (ih < 0 || ih >= c.H || iw < 0 || iw >= c.W) continue;
                const int64_t cin = co / Cog * Cig + ci;
                s += w[size_t(((co * Cig + ci) * c.kh + ki) * c.kw + kj)] *
                     x[size_t(((n * c.C + cin) * c.H + ih) * c.W + iw)];
              }
          out[size_t(((n * c.Cout + co) * Ho + oh) * Wo + ow)] = s;
        }
  return out;
}

// The same loops run backwards: gradients of sum(conv(x, w, b) * gy).
struct RefGrads {
  V gx, gw, gb;
};
inline RefGrads ref_conv_backward(const ConvCase& c, const V& x, const V& w, const V& gy) {
  const int64_t Ho = out_size(c.H, c.kh, c.s[0], c.p[0], c.d[0]), Wo = out_size(c.W, c.kw, c.s[1], c.p[1], c.d[1]);
  const int64_t Cig = c.C / c.g, Cog = c.Cout / c.g;
  RefGrads r{V(x.size()), V(w.size()), V(size_t(c.Cout))};
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t co = 0; co < c.Cout; ++co)
      for (int64_t oh = 0; oh < Ho; ++oh)
        for (int64_t ow = 0; ow < Wo; ++ow) {
          const double g = gy[size_t(((n * c.Cout + co) * Ho + oh) * Wo + ow)];
          r.gb[size_t(co)] += g;
          for (int64_t ci = 0; ci < Cig; ++ci)
            for (int64_t ki = 0; ki < c.kh; ++ki)
              for (int64_t kj = 0; kj < c.kw; ++kj) {
                const int64_t ih = oh * c.s[0] - c.p[0] + ki * c.d[0], iw = ow * c.s[1] - c.p[1] + kj * c.d[1];
                if (ih < 0 || ih >= c.H || iw < 0 || iw >= c.W) continue;
                const size_t xi = size_t(((n * c.C + co / Cog * Cig + ci) * c.H + ih) * c.W + iw);
                const size_t wi = size_t(((co * Cig + ci) * c.kh + ki) * c.kw + kj);
                r.gx[xi] += w[wi] * g;
                r.gw[wi] += x[xi] * g;
              }
        }
  return r;
}

inline std::vector<ConvCase> forward_cases() {
  std::vector<ConvCase> cs;
  auto add = [&](ConvCase c) { cs.push_back(c); };
  add({1, 3, 8, 8, 4, 3, 3});
  add({3, 4, 7, 9, 6, 3, 3, {2, 2}, {1, 1}, {1, 1}, 2, false, "channels_last"});
  add({2, 3, 10, 8, 5, 5, 5, {1, 1}, {2, 2}, {1, 1}, 1, true, "strided"});
  add({2, 4, 9, 11, 4, 3, 3, {1, 1}, {2, 2}, {2, 2}});
  add({1, 6, 8, 8, 6, 3, 3, {1, 1}, {1, 1}, {1, 1}, 6});                          // depthwise
  add({3, 4, 9, 7, 8, 3, 3, {2, 2}, {1, 1}, {1, 1}, 4, false, "channels_last"});  // depthwise, multiplier 2
  add({2, 5, 6, 6, 7, 1, 1});                                                     // 1x1
  add({2, 4, 6, 7, 6, 1, 1, {2, 2}, {0, 0}, {1, 1}, 2, true, "strided"});
  add({1, 3, 7, 10, 2, 2, 4, {1, 2}, {1, 0}, {2, 1}});                             // non-square everything
  add({3, 2, 5, 5, 4, 5, 5});                                                      // kernel = input
  add({4, 8, 12, 12, 16, 3, 3, {1, 1}, {1, 1}});                                   // batch split across threads
  add({5, 3, 32, 32, 4, 3, 3, {1, 1}, {1, 1}});                                    // chunks of 2, 2, 1 samples
  add({4, 3, 30, 30, 4, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true, "channels_last"});  // chunks within thread slices
  add({4, 8, 16, 16, 8, 3, 3, {2, 2}, {1, 1}, {1, 1}, 8, true, "strided"});        // depthwise, stride 2
  add({2, 1, 28, 28, 8, 3, 3, {1, 1}, {1, 1}});                                    // one input channel
  add({2, 6, 8, 8, 9, 3, 1, {1, 1}, {1, 0}, {1, 1}, 3});
  add({3, 4, 5, 6, 4, 5, 5, {1, 1}, {2, 2}, {1, 1}, 4, false});  // depthwise 5x5
  add({2, 4, 11, 11, 8, 3, 3, {2, 2}, {2, 2}, {2, 2}, 2, true, "channels_last"});
  add({2, 3, 6, 5, 4, 3, 2, {3, 2}, {0, 1}, {1, 2}, 1, false, "strided"});
  add({1, 8, 90, 90, 4, 3, 3, {1, 1}, {1, 1}});                             // one sample in pixel tiles
  add({2, 5, 9, 11, 6, 3, 3, {2, 2}, {1, 1}});                              // stride 2 on contiguous rows
  add({2, 3, 9, 33, 5, 3, 3, {2, 2}, {1, 1}});                              // stride 2, rows of 17: padded planes
  add({2, 4, 6, 34, 3, 1, 1, {2, 2}, {0, 0}, {1, 1}, 1, false});            // 1x1 stride 2, read in place
  add({1, 2, 5, 36, 3, 3, 3, {1, 2}, {1, 1}, {1, 1}, 1, true, "strided"});  // strides (1, 2), strided input
  add({2, 160, 4, 4, 224, 3, 3, {1, 1}, {1, 1}});  // over 1 MiB of weights on 4x4 maps: each plane in one vector
  add({2, 16, 70, 69, 3, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true, "strided"});  // tiles split mid-row
  return cs;
}

struct ConvRun {
  Tensor xleaf, x, w, b, y;
};

inline ConvRun run_conv(const ConvCase& c, DType t, Generator& gen, bool requires_grad = false) {
  ConvRun r;
  r.xleaf = randn(leaf_shape({c.N, c.C, c.H, c.W}, c.layout), t, &gen);
  r.w = randn({c.Cout, c.C / c.g, c.kh, c.kw}, t, &gen);
  if (c.bias) r.b = randn({c.Cout}, t, &gen);
  if (requires_grad) {
    r.xleaf.requires_grad_();
    r.w.requires_grad_();
    if (c.bias) r.b.requires_grad_();
  }
  r.x = view_of(r.xleaf, c.layout);
  r.y = F::conv2d(r.x, r.w, r.b, c.s, c.p, c.d, c.g);
  return r;
}

}  // namespace mdl::test::conv
