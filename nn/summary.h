// A Keras-style model summary: one row per module (indented by depth) with its output shape,
// found by running one forward on an example input, and its parameter count, then the totals. A
// first row, "(Type's own)", counts parameters the model registers itself, where it has any.
#pragma once
#include <string>

#include "nn/module.h"

namespace mdl::nn {

struct SummaryOptions {
  int max_depth = -1;  // -1: every module; 1: the root's children only
};

// Runs model(example) once in eval mode without gradients (putting back each module's own mode
// after), so BatchNorm statistics and dropout are untouched.
std::string summary(Module& model, const Tensor& example, SummaryOptions opts = {});

}  // namespace mdl::nn
