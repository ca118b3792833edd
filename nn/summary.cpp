// nn::summary: observes module outputs during one forward and prints the table.
#include "nn/summary.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include "tensor/grad_mode.h"

namespace mdl::nn {
namespace {

struct ShapeRecorder : detail::ForwardObserver {
  std::map<const Module*, Shape> shapes;  // the last output seen per module
  void on_output(const Module& m, const Tensor& y) override { shapes[&m] = y.shape(); }
};

std::string with_commas(int64_t n) {
  const std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && digits[i - 1] != '-' && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

std::string shape_text(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// Restores the observer and every module's own training mode even when the forward throws.
struct SummaryScope {
  TrainingModeGuard modes;
  detail::ForwardObserver* previous;
  SummaryScope(Module& m, detail::ForwardObserver* o) : modes(m), previous(detail::set_forward_observer(o)) {
    m.eval();
  }
  ~SummaryScope() { detail::set_forward_observer(previous); }
};

}  // namespace

std::string summary(Module& model, const Tensor& example, SummaryOptions opts) {
  ShapeRecorder recorder;
  {
    SummaryScope scope(model, &recorder);
    NoGradGuard no_grad;
    model(example);
  }

  struct Row {
    std::string layer, shape;
    int64_t params;
    bool container;  // shows "--" for no parameters of its own
  };
  // Each parameter tensor counts once, in the first row that holds it (a tied one is not counted
  // again), and a row folded at max_depth takes what its descendants hold: the column sums to the
  // total.
  std::set<const TensorImpl*> counted;
  auto uncounted_numel = [&](const Module& m) {
    int64_t n = 0;
    for (const Tensor& p : m.parameters(/*recurse=*/false))
      if (counted.insert(p.impl()).second) n += p.numel();
    return n;
  };
  std::vector<Row> rows;
  if (const int64_t own = uncounted_numel(model); own > 0) {  // parameters the model registers itself
    auto it = recorder.shapes.find(&model);
    rows.push_back(
        {"(" + model.type_name() + "'s own)", it == recorder.shapes.end() ? "--" : shape_text(it->second), own, false});
  }
  for (auto& [name, m] : model.named_modules()) {
    if (m.get() == &model) continue;
    const int depth = int(std::count(name.begin(), name.end(), '.')) + 1;
    const int64_t own = uncounted_numel(*m);
    if (opts.max_depth >= 0 && depth > opts.max_depth) {  // pre-order: rows.back() is its ancestor
      if (!rows.empty()) rows.back().params += own;
      continue;
    }
    auto it = recorder.shapes.find(m.get());
    const bool folded = opts.max_depth >= 0 && depth == opts.max_depth;
    rows.push_back({std::string(size_t(2 * (depth - 1)), ' ') + name + " (" + m->type_name() + ")",
                    it == recorder.shapes.end() ? "--" : shape_text(it->second), own,
                    !m->named_children().empty() && !folded});
  }

  size_t w0 = 12, w1 = 12;
  for (auto& r : rows) w0 = std::max(w0, r.layer.size()), w1 = std::max(w1, r.shape.size());
  const size_t width = w0 + w1 + 16;
  std::ostringstream s;
  auto line = [&](const std::string& a, const std::string& b, const std::string& c) {
    s << a << std::string(w0 + 2 - a.size(), ' ') << b << std::string(w1 + 2 - b.size(), ' ') << c << "\n";
  };
  s << "Model: " << model.type_name() << "\n" << std::string(width, '=') << "\n";
  line("Layer (type)", "Output shape", "Param #");
  s << std::string(width, '=') << "\n";
  for (auto& r : rows) line(r.layer, r.shape, r.container && r.params == 0 ? "--" : with_commas(r.params));
  s << std::string(width, '=') << "\n";
  const int64_t total = model.num_parameters(), trainable = model.num_parameters(true);
  s << "Input shape: " << shape_text(example.shape()) << "\n";
  s << "Total params: " << with_commas(total) << "\n";
  s << "Trainable params: " << with_commas(trainable) << "\n";
  s << "Non-trainable params: " << with_commas(total - trainable) << "\n";
  return s.str();
}

}  // namespace mdl::nn
