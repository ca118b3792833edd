// gradcheck: analytic vector-Jacobian products against central differences, worst element reported.
#include "ops/gradcheck.h"

#include <cmath>
#include <sstream>

#include "tensor/grad_mode.h"
#include "ops/native/factory.h"
#include "ops/ops.h"

namespace mdl::autograd {

namespace {
double weighted_sum(const Tensor& out, const Tensor& r) {
  std::vector<double> o = out.to_vector<double>(), w = r.to_vector<double>();
  double s = 0;
  for (size_t i = 0; i < o.size(); ++i) s += o[i] * w[i];
  return s;
}
}  // namespace

GradcheckResult gradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs, double eps, double atol,
                          double rtol) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    MDL_CHECK(x.defined(), "gradcheck: input ", i, " is undefined");
    if (!x.requires_grad()) continue;
    MDL_CHECK(x.dtype() == kF64, "gradcheck: input ", i, " has dtype ", x.dtype(), "; gradcheck needs f64 inputs");
    MDL_CHECK(x.is_leaf() && x.is_contiguous(), "gradcheck: input ", i, " must be a contiguous leaf tensor");
  }
  // Analytic: one backward of sum(fn(x) * r).
  Tensor out = fn(inputs);
  MDL_CHECK(out.defined() && out.dtype() == kF64, "gradcheck: fn must return an f64 tensor");
  Generator gen(1234);
  Tensor r = randn(out.shape(), kF64, &gen);
  std::vector<Tensor> analytic(inputs.size());
  for (const Tensor& x : inputs) const_cast<Tensor&>(x).zero_grad();
  MDL_CHECK(out.requires_grad(), "gradcheck: fn's output does not require grad (no input reaches it)");
  sum(out * r).backward();
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].requires_grad())
      analytic[i] = inputs[i].grad().defined() ? inputs[i].grad() : zeros(inputs[i].shape(), kF64);

  // Numerical: perturb each element in place.
  GradcheckResult res;
  double worst = 0;
  NoGradGuard no_grad;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].requires_grad()) continue;
    double* p = inputs[i].data_ptr<double>();
    std::vector<double> a = analytic[i].to_vector<double>();
    for (int64_t j = 0; j < inputs[i].numel(); ++j) {
      double orig = p[j];
      p[j] = orig + eps;
      double fp = weighted_sum(fn(inputs), r);
      p[j] = orig - eps;
      double fm = weighted_sum(fn(inputs), r);
      p[j] = orig;
      double num = (fp - fm) / (2 * eps);
      double err = std::abs(a[size_t(j)] - num);
      double excess = err / (atol + rtol * std::abs(num));
      if (!(excess <= 1.0) && (excess > worst || std::isnan(excess))) {
        worst = std::isnan(excess) ? INFINITY : excess;
        std::ostringstream s;
        s << "gradcheck: input " << i << " (shape " << shape_str(inputs[i].shape()) << "), element " << j
          << ": analytic " << a[size_t(j)] << " vs numeric " << num << " (|diff| " << err << ")";
        res.ok = false;
        res.report = s.str();
      }
    }
  }
  return res;
}

}  // namespace mdl::autograd
