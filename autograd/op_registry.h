// The registry of ops with a backward. Each op registers its name in the .cpp that records it:
//   MDL_DIFFERENTIABLE_OPS("conv2d");
// at namespace scope, so the registration runs while the program starts whenever the linker takes
// that .cpp from the library, as it must for the op to run. record() refuses a node whose name is
// not registered, and tests/ops/test_gradcheck.cpp fails when a registered op has no gradcheck case or
// a source that registers ops was left out of the test program: so no backward goes untested.
#pragma once
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace mdl::autograd {

// Registers `names` (a null name is skipped) on behalf of the source file `file`.
struct DifferentiableOps {
  DifferentiableOps(const char* file, std::initializer_list<const char*> names);
};

bool is_differentiable_op(std::string_view name);
// Every registered name, sorted.
std::vector<std::string> differentiable_ops();
// The source files whose registrations ran, as their compiler saw them (__FILE__).
std::vector<std::string> differentiable_op_sources();

}  // namespace mdl::autograd

#define MDL_DIFFERENTIABLE_OPS_CAT2(a, b) a##b
#define MDL_DIFFERENTIABLE_OPS_CAT(a, b) MDL_DIFFERENTIABLE_OPS_CAT2(a, b)
#define MDL_DIFFERENTIABLE_OPS(...)                                                                   \
  static const ::mdl::autograd::DifferentiableOps MDL_DIFFERENTIABLE_OPS_CAT(mdl_differentiable_ops_, \
                                                                             __LINE__)(__FILE__, {__VA_ARGS__})
