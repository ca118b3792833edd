// nn::SeparableConv2d (depthwise then pointwise) against a plain loop in double, its gradients by
// gradcheck, its parameters' names and shapes, its errors; and SeparableCNN, the SimpleCNN variant.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "mdl.h"

using namespace mdl;
namespace M = mdl::nn::models;

namespace {

// out (N, O, Ho, Wo) = pb[o] + sum_m pw[o][m] * sum_taps dw[m][ki][kj] * x[n][m / mult][..], zero padding.
std::vector<double> reference(const std::vector<double>& x, const std::vector<double>& dw,
                              const std::vector<double>& pw, const std::vector<double>& pb, int64_t N, int64_t C,
                              int64_t H, int64_t W, int64_t O, int64_t mult, int64_t k, int64_t s, int64_t p, int64_t d,
                              int64_t Ho, int64_t Wo) {
  const int64_t Cm = C * mult;
  std::vector<double> mid(size_t(N * Cm * Ho * Wo), 0.0), out(size_t(N * O * Ho * Wo), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < Cm; ++m)
      for (int64_t oh = 0; oh < Ho; ++oh)
        for (int64_t ow = 0; ow < Wo; ++ow) {
          double acc = 0;
          for (int64_t ki = 0; ki < k; ++ki)
            for (int64_t kj = 0; kj < k; ++kj) {
              const int64_t ih = oh * s - p + ki * d, iw = ow * s - p + kj * d;
              if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
              acc += dw[size_t((m * k + ki) * k + kj)] * x[size_t(((n * C + m / mult) * H + ih) * W + iw)];
            }
          mid[size_t(((n * Cm + m) * Ho + oh) * Wo + ow)] = acc;
        }
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t q = 0; q < Ho * Wo; ++q) {
        double acc = pb.empty() ? 0.0 : pb[size_t(o)];
        for (int64_t m = 0; m < Cm; ++m) acc += pw[size_t(o * Cm + m)] * mid[size_t((n * Cm + m) * Ho * Wo + q)];
        out[size_t((n * O + o) * Ho * Wo + q)] = acc;
      }
  return out;
}

}  // namespace

TEST_CASE("SeparableConv2d: parameters, forward against a plain loop, in f32 and f64") {
  struct Case {
    int64_t C, O, mult, k, s, p, d, H, W;
    bool bias;
  };
  for (const Case& c : {Case{3, 5, 1, 3, 1, 1, 1, 7, 6, true}, Case{4, 6, 2, 3, 2, 1, 1, 9, 8, true},
                        Case{2, 3, 3, 5, 1, 4, 2, 6, 7, false}}) {
    INFO("C ", c.C, " mult ", c.mult, " stride ", c.s, " dilation ", c.d);
    manual_seed(7);
    nn::SeparableConv2d m(c.C, c.O, c.k,
                          {.stride = {c.s, c.s},
                           .padding = {c.p, c.p},
                           .dilation = {c.d, c.d},
                           .depth_multiplier = c.mult,
                           .bias = c.bias});
    const auto params = m.named_parameters();
    REQUIRE(params.size() == (c.bias ? 3u : 2u));
    CHECK(params[0].first == "depthwise.weight");
    CHECK(params[0].second.shape() == Shape{c.C * c.mult, 1, c.k, c.k});
    CHECK(params[1].first == "pointwise.weight");
    CHECK(params[1].second.shape() == Shape{c.O, c.C * c.mult, 1, 1});
    if (c.bias) CHECK(params[2].first == "pointwise.bias");
    CHECK(m.num_parameters() == c.C * c.mult * c.k * c.k + c.O * c.C * c.mult + (c.bias ? c.O : 0));
    CHECK(!m.depthwise->bias.defined());

    const int64_t N = 2;
    const int64_t Ho = (c.H + 2 * c.p - c.d * (c.k - 1) - 1) / c.s + 1,
                  Wo = (c.W + 2 * c.p - c.d * (c.k - 1) - 1) / c.s + 1;
    Tensor x = randn({N, c.C, c.H, c.W});
    auto as_double = [](const Tensor& t) { return t.to(kF64).contiguous().to_vector<double>(); };
    const std::vector<double> want = reference(as_double(x), as_double(m.depthwise->weight),
                                               as_double(m.pointwise->weight),
                                               c.bias ? as_double(m.pointwise->bias) : std::vector<double>{}, N, c.C,
                                               c.H, c.W, c.O, c.mult, c.k, c.s, c.p, c.d, Ho, Wo);
    Tensor y = m.forward(x);
    REQUIRE(y.shape() == Shape{N, c.O, Ho, Wo});
    const std::vector<double> got = as_double(y);
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i)
      worst = std::max(worst, std::abs(got[i] - want[i]) / (1 + std::abs(want[i])));
    CHECK(worst < 1e-5);

    m.to(kF64);
    const std::vector<double> got64 = m.forward(x.to(kF64)).to_vector<double>();
    worst = 0;
    for (size_t i = 0; i < got64.size(); ++i) worst = std::max(worst, std::abs(got64[i] - want[i]));
    CHECK(worst < 1e-12);
  }
}

TEST_CASE("SeparableConv2d: gradcheck through the input and the module's own parameters") {
  manual_seed(3);
  nn::SeparableConv2d m(3, 4, 3, {.stride = {2, 1}, .padding = {1, 1}, .depth_multiplier = 2});
  m.to(kF64);
  Tensor x = randn({2, 3, 6, 5}, kF64).requires_grad_();
  // gradcheck perturbs its inputs in place, so the parameters themselves are checked.
  auto r = autograd::gradcheck([&](const std::vector<Tensor>& in) { return m.forward(in[0]); },
                               {x, m.depthwise->weight, m.pointwise->weight, m.pointwise->bias});
  CHECK_MESSAGE(r.ok, r.report);
}

TEST_CASE("SeparableConv2d: bad arguments and inputs throw, naming what was wrong") {
  CHECK_THROWS_WITH_AS(nn::SeparableConv2d(0, 4, 3), doctest::Contains("in_channels 0"), Error);
  CHECK_THROWS_WITH_AS(nn::SeparableConv2d(3, 4, 3, {.depth_multiplier = 0}), doctest::Contains("depth_multiplier"),
                       Error);
  nn::SeparableConv2d m(3, 4, 3);
  CHECK_THROWS_AS(m.forward(randn({1, 2, 8, 8})), Error);  // 2 channels where 3 are expected
  CHECK_THROWS_AS(m.forward(randn({2, 8, 8})), Error);     // not 4-D
}

TEST_CASE("models: SeparableCNN is SimpleCNN with a depthwise separable second conv, and it learns") {
  manual_seed(0);
  auto m = M::SeparableCNN(1, 10);
  // conv 1*32*9+32, depthwise 32*9, pointwise 32*64+64, fc 3136*128+128, fc 128*10+10
  CHECK(m->num_parameters() == 320 + 288 + 2112 + 401536 + 1290);
  const auto names = m->named_parameters();
  REQUIRE(names.size() == 9);
  CHECK(names[2].first == "features.3.depthwise.weight");
  CHECK(names[3].first == "features.3.pointwise.weight");
  Tensor x = randn({8, 1, 28, 28}), y = randint(0, 10, {8});
  CHECK(m->forward(x).shape() == Shape{8, 10});
  optim::Adam opt(m->parameters(), {.lr = 1e-3});
  double first = 0, last = 0;
  for (int step = 0; step < 15; ++step) {
    opt.zero_grad();
    Tensor loss = nn::functional::cross_entropy(m->forward(x), y);
    loss.backward();
    opt.step();
    (step == 0 ? first : last) = loss.item<double>();
  }
  CHECK(last < 0.5 * first);  // memorises 8 samples
  CHECK_THROWS_WITH_AS(M::SeparableCNN(1, 10, 30), doctest::Contains("SeparableCNN"), Error);
  // The children run through operator(), so hooks (summary, profiler, keep_f32) see them.
  const std::string table = nn::summary(*m, randn({1, 1, 28, 28}));
  CHECK(table.find("features.3.depthwise (Conv2d)  [1, 32, 14, 14]") != std::string::npos);
  CHECK(table.find("features.3.pointwise (Conv2d)  [1, 64, 14, 14]") != std::string::npos);
}
