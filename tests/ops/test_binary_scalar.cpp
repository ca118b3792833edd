// native::binary's host-side choices, on the CPU: a 0-d CPU operand goes to kernels::binary_scalar
// by value, with the dtype and rounding of the path that expanded it into a tensor; the rule of
// which operand is a scalar; scalar_operand against scalar_like; and which dtype pairs a device's
// kernel takes mixed (kernels::binary_takes_mixed). The GPU's kernels are checked against these in
// tests/cuda/test_binary_scalar.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/core.h"
#include "mdl.h"
#include "ops/native/native.h"
#include "tests/support/test_util.h"

using namespace mdl;
using mdl::test::values;

namespace {

// The bytes of t's elements in row-major order: equal bytes are equal results, NaN payloads and
// signed zeros included.
std::vector<unsigned char> bytes_of(const Tensor& t) {
  const Tensor c = t.cpu().contiguous();
  const auto* p = static_cast<const unsigned char*>(c.raw_data());
  return std::vector<unsigned char>(p, p + c.numel() * int64_t(dtype_size(c.dtype())));
}

const std::vector<DType> kAll = {kF32, kF16, kBF16, kF64, kI32, kI64, kU8, kBool};

bool defined_for(BinaryOp op, DType t) {
  return !(t == kBool && (op == BinaryOp::Sub || op == BinaryOp::Div || op == BinaryOp::Pow));
}

}  // namespace

TEST_CASE("binary scalar: scalar_operand holds scalar_like's dtype and bits, on the CPU") {
  const double kValues[] = {2.0,       2.5, -0.1, 1e300, -1e-300, 70000.0, 1e-8, std::nan(""),
                            -HUGE_VAL, 0.0, -0.0, 255.0, 256.0,   3.0,     -7.0};
  for (DType t : kAll)
    for (double v : kValues) {
      const Tensor like = zeros({3}, t);
      INFO(dtype_name(t), " ", v);
      if (!is_floating(t) && v == 1e300) {  // a whole number no integer holds, as PyTorch's overflow
        CHECK_THROWS_WITH_AS(native::scalar_operand(v, like), doctest::Contains("past the range"), Error);
        continue;
      }
      const Tensor s = native::scalar_operand(v, like), d = native::scalar_like(v, like);
      CHECK(s.dim() == 0);
      CHECK(s.device().is_cpu());
      CHECK(s.dtype() == d.dtype());
      CHECK(bytes_of(s) == bytes_of(d));
    }
  CHECK(native::scalar_operand(2.5, zeros({2}, kI32)).dtype() == kF32);
  CHECK(native::scalar_operand(2.0, zeros({2}, kI32)).dtype() == kI32);
  CHECK(native::scalar_operand(2.0, zeros({2}, kBool)).dtype() == kI64);
  CHECK(native::scalar_operand(256.0, zeros({2}, kU8)).item<int64_t>() == 0);  // wrapped, as PyTorch
  CHECK(native::scalar_operand(-1.0, zeros({2}, kU8)).item<int64_t>() == 255);
  CHECK(native::scalar_operand(0.1, zeros({2}, kF16)).dtype() == kF16);
}

TEST_CASE("binary scalar: a 0-d CPU tensor beside one that is not is the scalar operand") {
  const Tensor s = scalar_tensor(2.0), x = ones({3}), one = ones({1});
  CHECK(native::is_scalar_operand(s, x));
  CHECK_FALSE(native::is_scalar_operand(x, s));
  CHECK(native::is_scalar_operand(s, one));      // a one-element tensor is dimensioned
  CHECK_FALSE(native::is_scalar_operand(s, s));  // two 0-d CPU tensors: the plain path
  CHECK_FALSE(native::is_scalar_operand(one, s));
  CHECK((s + s).device().is_cpu());
  CHECK((s + s).dim() == 0);
}

TEST_CASE("binary scalar: every op and dtype, scalar on either side, equals the expanded-operand path bit for bit") {
  // The path before scalar operands: the scalar expanded to the other's shape (stride 0) is
  // dimensioned, so native::binary casts and expands it like any operand; its dtype already
  // follows the 0-d rule (scalar_operand), so the compute dtype is the same.
  const double kValues[] = {3.0, -2.5, 0.0, 0.1, 1e30, std::nan("")};
  Generator g(5);
  for (DType t : kAll) {
    const Tensor base = (randn({6, 9}, kF64, &g) * 4.0).to(t);
    const Tensor layouts[] = {base, base.t(), base.slice(1, 1, 8, 2), base.reshape({54}).slice(0, 1, 54),
                              scalar_tensor(1.5).to(t)};
    for (const Tensor& x : layouts)
      for (double v : kValues) {
        if (!is_floating(t) && (!std::isfinite(v) || std::abs(v) > 1e6)) continue;  // no integer overflow
        const Tensor s = native::scalar_operand(v, x), se = s.expand(x.shape());
        for (BinaryOp op : {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Pow,
                            BinaryOp::Maximum, BinaryOp::Minimum, BinaryOp::ReluBackward, BinaryOp::AddRelu,
                            BinaryOp::Eq, BinaryOp::Ne, BinaryOp::Lt, BinaryOp::Le, BinaryOp::Gt, BinaryOp::Ge}) {
          if (!defined_for(op, s.dtype()) || !defined_for(op, t)) continue;
          if (op == BinaryOp::Pow && !is_floating(s.dtype())) continue;  // negative integer powers throw
          INFO(binary_op_name(op), " ", dtype_name(t), " ", shape_str(x.shape()), " scalar ", v);
          if (x.dim() == 0) {  // two 0-d CPU tensors: no scalar operand, the plain path
            CHECK(bytes_of(native::binary(op, x, s)) == bytes_of(native::binary(op, x, se)));
            continue;
          }
          const Tensor right = native::binary(op, x, s), left = native::binary(op, s, x);
          const Tensor want_right = native::binary(op, x, se), want_left = native::binary(op, se, x);
          CHECK(right.dtype() == want_right.dtype());
          CHECK(left.dtype() == want_left.dtype());
          CHECK(right.shape() == x.shape());
          CHECK(bytes_of(right) == bytes_of(want_right));
          CHECK(bytes_of(left) == bytes_of(want_left));
        }
      }
  }
}

TEST_CASE("binary scalar: the kernel takes its value in the compute dtype, whole") {
  // i64 beyond 2^53 and an f64 that f32 would round: the value reaches the kernel as the tensor holds it.
  const int64_t big = (int64_t(1) << 62) + 1;
  const Tensor si = from_vector<int64_t>({big}).reshape({}), xi = from_vector<int64_t>({0, 1, -1});
  CHECK((xi + si).to_vector<int64_t>() == std::vector<int64_t>{big, big + 1, big - 1});
  CHECK((si - xi).to_vector<int64_t>() == std::vector<int64_t>{big, big - 1, big + 1});
  const Tensor sd = scalar_tensor(0.1, kF64), xd = zeros({2}, kF64);
  CHECK(values(xd + sd) == std::vector<double>{0.1, 0.1});
  // An integral tensor divided by a scalar computes in f32: the scalar is cast as before.
  const Tensor q = from_vector<int64_t>({7, -7}) / 2;
  CHECK(q.dtype() == kF32);
  CHECK(values(q) == std::vector<double>{3.5, -3.5});
  // The kernel entry on the CPU reports integer division by zero like binary.
  Tensor out = empty({3}, kI64);
  CHECK_THROWS_WITH_AS(kernels::binary_scalar(Device::cpu(), BinaryOp::Div, out, xi, scalar_tensor(0, kI64), false),
                       doctest::Contains("div: integer division by zero (dtype i64)"), mdl::Error);
  kernels::binary_scalar(Device::cpu(), BinaryOp::Div, out, from_vector<int64_t>({1, 2, -7}), scalar_tensor(7, kI64),
                         true);
  CHECK(out.to_vector<int64_t>() == std::vector<int64_t>{7, 3, -1});  // 7 / x, truncated
}

TEST_CASE("binary scalar: which dtype pairs a device's binary kernel takes without a cast") {
  using enum BinaryOp;
  const Device cpu = Device::cpu(), gpu = Device::cuda();
  for (BinaryOp op : {Add, Sub, Mul, Div, Maximum, Minimum, AddRelu}) {
    CHECK(kernels::binary_takes_mixed(gpu, op, kF32, kF32, kF16));
    CHECK(kernels::binary_takes_mixed(gpu, op, kF32, kF16, kF32));
    CHECK(kernels::binary_takes_mixed(gpu, op, kF32, kF32, kBF16));
    CHECK(kernels::binary_takes_mixed(gpu, op, kF32, kBF16, kF32));
    CHECK_FALSE(kernels::binary_takes_mixed(cpu, op, kF32, kF32, kF16));  // the CPU kernel takes one dtype
    CHECK_FALSE(kernels::binary_takes_mixed(gpu, op, kF16, kF32, kF16));  // a 0-d f32 beside f16: rounded to f16
    CHECK_FALSE(kernels::binary_takes_mixed(gpu, op, kF32, kF16, kBF16));
    CHECK_FALSE(kernels::binary_takes_mixed(gpu, op, kF32, kF32, kF32));
    CHECK_FALSE(kernels::binary_takes_mixed(gpu, op, kF64, kF64, kF32));
    CHECK_FALSE(kernels::binary_takes_mixed(gpu, op, kF32, kF32, kI32));
  }
  for (BinaryOp op : {Pow, ReluBackward, Eq, Ne, Lt, Le, Gt, Ge})
    CHECK_FALSE(kernels::binary_takes_mixed(gpu, op, kF32, kF32, kF16));
  // On the CPU mixed operands are cast: f16 widens exactly, so f32 + f16 is the f32 sum of the values.
  const Tensor a = from_vector<float>({0.1f, 1e-8f, 3.0f}), h = from_vector<float>({0.3f, 2.0f, -1.0f}).to(kF16);
  CHECK(bytes_of(a + h) == bytes_of(a + h.to(kF32)));
  CHECK(bytes_of(h - a) == bytes_of(h.to(kF32) - a));
}

TEST_CASE("binary scalar: autograd through scalar operators and pow, on the CPU") {
  const Tensor x0 = from_vector<float>({-1.5f, 0.0f, 2.0f, 3.0f});
  auto grad_of = [&](auto f) {
    Tensor x = x0.clone();
    x.requires_grad_();
    sum(f(x)).backward();
    return values(x.grad());
  };
  CHECK(grad_of([](const Tensor& x) { return x * 2.0; }) == std::vector<double>{2, 2, 2, 2});
  CHECK(grad_of([](const Tensor& x) { return 2.0 - x; }) == std::vector<double>{-1, -1, -1, -1});
  CHECK(grad_of([](const Tensor& x) { return x / 4.0; }) == std::vector<double>{0.25, 0.25, 0.25, 0.25});
  CHECK(grad_of([](const Tensor& x) { return pow(x, 2.0); }) == std::vector<double>{-3, 0, 4, 6});
  CHECK(grad_of([](const Tensor& x) { return pow(x, 0.0); }) == std::vector<double>{0, 0, 0, 0});
  CHECK(grad_of([](const Tensor& x) { return clamp(x, -1.0, 2.5); }) == std::vector<double>{0, 1, 1, 0});
  CHECK(grad_of([](const Tensor& x) { return relu(x); }) == std::vector<double>{0, 0, 1, 1});
}
