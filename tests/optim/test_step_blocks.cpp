// The CPU's multi-tensor SGD and Adam steps against a plain loop of their formulas, bit for bit, on
// parameters longer than a thread's chunk and not a whole number of the kernels' blocks: the
// parameter, its f32 state and its 16-bit copy (bf16 and f16), every option that changes the
// loop (momentum, nesterov, dampening, decay, the first step over a buffer of NaN, AMSGrad, L2 and
// decoupled decay).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/optim.h"
#include "mdl.h"
#include "tests/support/test_util.h"

using namespace mdl;
using namespace mdl::test;

namespace {

// 2 threads' chunks of the 65536-element grain and more, and a last block of 2048 cut short.
constexpr int64_t kLong = 3 * 65536 + 2 * 2048 + 37;

std::vector<float> floats(const Tensor& t) { return t.to(kF32).to_vector<float>(); }

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return false;
  return true;
}

struct Param {
  kernels::StepTensors t;
  std::vector<float> p, g;
};

Param make_param(int64_t n, DType copy, int states, uint64_t seed) {
  Param r;
  r.t.param = sample({n}, kF32, seed);
  r.t.grad = sample({n}, kF32, seed + 1);
  for (int s = 0; s < states; ++s) r.t.state[size_t(s)] = abs(sample({n}, kF32, seed + 2 + uint64_t(s)));
  r.t.step = full({}, 2.0, kI64);
  r.t.copy = zeros({n}, copy);
  r.p = floats(r.t.param), r.g = floats(r.t.grad);
  return r;
}

// The copy holds the new parameter rounded to its dtype.
void check_copy(const Param& r, const std::vector<float>& want_p) {
  CHECK(same_bits(floats(r.t.copy), floats(from_vector(want_p, {int64_t(want_p.size())}).to(r.t.copy.dtype()))));
}

}  // namespace

TEST_CASE("sgd_step_many on the CPU: a plain loop's bits, with the 16-bit copy, past a chunk and a block") {
  struct Case {
    double mom, damp, wd;
    bool nesterov, first;
  };
  for (Case c : {Case{0, 0, 0, false, false}, Case{0, 0, 0.01, false, false}, Case{0.9, 0.3, 0.01, false, false},
                 Case{0.8, 0, 0, true, false}, Case{0.9, 0, 0.02, true, true}}) {
    CAPTURE(c.mom);
    CAPTURE(c.wd);
    CAPTURE(c.nesterov);
    CAPTURE(c.first);
    for (DType copy : {kBF16, kF16}) {
      Param r = make_param(kLong, copy, c.mom != 0 ? 1 : 0, 7);
      if (c.first) r.t.state[0].fill_(std::numeric_limits<double>::quiet_NaN());  // the first step never reads it
      std::vector<float> buf = c.mom != 0 ? floats(r.t.state[0]) : std::vector<float>{};
      kernels::SGDParams hp;
      hp.lr = 0.05, hp.momentum = c.mom, hp.dampening = c.damp, hp.weight_decay = c.wd, hp.nesterov = c.nesterov;
      hp.grad_scale = 0.5;
      r.t.step.fill_(c.first ? 1.0 : 2.0);
      kernels::sgd_step_many.get(Device::cpu())({r.t}, hp);
      const float lr = 0.05f, mom = float(c.mom), damp = float(1.0 - c.damp), wd = float(c.wd);
      std::vector<float> p = r.p;
      for (size_t i = 0; i < p.size(); ++i) {
        float gi = r.g[i] * 0.5f;
        if (c.wd != 0) gi += wd * p[i];
        if (c.mom != 0) {
          const float bi = c.first ? gi : mom * buf[i] + damp * gi;
          buf[i] = bi;
          gi = c.nesterov ? gi + mom * bi : bi;
        }
        p[i] = p[i] - lr * gi;
      }
      CHECK(same_bits(floats(r.t.param), p));
      if (c.mom != 0) CHECK(same_bits(floats(r.t.state[0]), buf));
      check_copy(r, p);
    }
  }
}

TEST_CASE("adam_step_many on the CPU: a plain loop's bits, with the 16-bit copy, past a chunk and a block") {
  struct Case {
    double wd;
    bool decoupled, amsgrad;
  };
  for (Case c : {Case{0, false, false}, Case{0.01, false, true}, Case{0.02, true, false}}) {
    CAPTURE(c.wd);
    CAPTURE(c.decoupled);
    CAPTURE(c.amsgrad);
    Param r = make_param(kLong, kBF16, c.amsgrad ? 3 : 2, 11);
    std::vector<float> m = floats(r.t.state[0]), v = floats(r.t.state[1]);
    std::vector<float> vmax = c.amsgrad ? floats(r.t.state[2]) : std::vector<float>{};
    kernels::AdamParams hp;
    hp.lr = 0.01, hp.weight_decay = c.wd, hp.decoupled = c.decoupled, hp.amsgrad = c.amsgrad, hp.grad_scale = 0.5;
    kernels::adam_step_many.get(Device::cpu())({r.t}, hp);
    const int64_t step = 2;
    const float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, omb1 = float(1.0 - 0.9), omb2 = float(1.0 - 0.999);
    const float bc2_sqrt = float(std::sqrt(1.0 - std::pow(0.999, double(step))));
    const float step_size = float(0.01) / float(1.0 - std::pow(0.9, double(step)));
    const float l2 = c.decoupled ? 0.0f : float(c.wd), keep = c.decoupled ? float(1.0 - 0.01 * c.wd) : 1.0f;
    std::vector<float> p = r.p;
    for (size_t i = 0; i < p.size(); ++i) {
      float gi = r.g[i] * 0.5f;
      if (l2 != 0) gi += l2 * p[i];
      const float pi = p[i] * keep;
      const float mi = b1 * m[i] + omb1 * gi, vi = b2 * v[i] + omb2 * gi * gi;
      m[i] = mi, v[i] = vi;
      float vd = vi;
      if (c.amsgrad) vd = vmax[i] = std::max(vmax[i], vi);
      p[i] = pi - step_size * mi / (std::sqrt(vd) / bc2_sqrt + eps);
    }
    CHECK(same_bits(floats(r.t.param), p));
    CHECK(same_bits(floats(r.t.state[0]), m));
    CHECK(same_bits(floats(r.t.state[1]), v));
    if (c.amsgrad) CHECK(same_bits(floats(r.t.state[2]), vmax));
    check_copy(r, p);
  }
}
