// One table of gradcheck cases for every differentiable op. A test file adds its cases with a
// static GradcheckCases object; the table is built on first use (inside a test, so no tensor is made
// during static initialisation) and test_gradcheck.cpp runs every case and checks that the table's
// op names are exactly autograd::differentiable_ops().
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "ops/gradcheck.h"
#include "tensor/tensor.h"

namespace mdl::test {

struct GradcheckCase {
  std::string op;              // the registry name the case covers: its node must be in the graph
  std::string what;            // the case, for failure messages
  std::vector<Tensor> inputs;  // f64 leaves requiring grad; index and mask tensors need none
  autograd::GradcheckFn fn;
  double eps = 1e-6, atol = 1e-5, rtol = 1e-3;
};

using GradcheckCaseMaker = std::function<void(std::vector<GradcheckCase>&)>;

inline std::vector<GradcheckCaseMaker>& gradcheck_case_makers() {
  static std::vector<GradcheckCaseMaker> makers;
  return makers;
}

// Registers a maker at static initialisation; it runs when the table is first asked for.
struct GradcheckCases {
  explicit GradcheckCases(GradcheckCaseMaker add) { gradcheck_case_makers().push_back(std::move(add)); }
};

inline const std::vector<GradcheckCase>& gradcheck_cases() {
  static const std::vector<GradcheckCase> table = [] {
    std::vector<GradcheckCase> t;
    for (const GradcheckCaseMaker& add : gradcheck_case_makers()) add(t);
    return t;
  }();
  return table;
}

}  // namespace mdl::test
