// The GPU's binary ops on a host scalar (kernels::binary_scalar: the value in the kernel's
// arguments, one launch) and on f32 with f16/bf16 operands (each read in its own dtype), against
// the paths they replace: the scalar as a 0-d device tensor, and the cast of the narrower operand.
// Every dtype and op, scalar on either side, contiguous, strided, misaligned and inner-vector
// layouts, sizes past one wave: the same bits as before on the GPU, and the CPU's (transcendental
// pow within its tolerance); integer errors; autograd. CUDA cases are skipped without a GPU.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/core.h"
#include "mdl.h"
#include "ops/native/native.h"
#include "profiler/session.h"
#include "tests/support/test_util.h"

using namespace mdl;
using mdl::test::check_close;
using mdl::test::dtype_tol;
using mdl::test::values;

namespace {

const Device kGpu = Device::cuda();
constexpr int64_t kPastWave = 3'000'005;  // past one wave of blocks on any current GPU, and no multiple of 8

std::vector<unsigned char> bytes_of(const Tensor& t) {
  const Tensor c = t.cpu().contiguous();
  const auto* p = static_cast<const unsigned char*>(c.raw_data());
  return std::vector<unsigned char>(p, p + c.numel() * int64_t(dtype_size(c.dtype())));
}

// got and want hold the same bits, or NaN at the same places (the CPU and the GPU make NaNs of
// different payloads); the first difference is reported.
void check_same(const Tensor& got, const Tensor& want, const std::string& what, bool nan_any_payload) {
  REQUIRE_MESSAGE(got.dtype() == want.dtype(), what, ": dtype ", got.dtype(), " against ", want.dtype());
  REQUIRE_MESSAGE(got.shape() == want.shape(), what, ": shape ", shape_str(got.shape()), " against ",
                  shape_str(want.shape()));
  const std::vector<unsigned char> g = bytes_of(got), w = bytes_of(want);
  if (g == w) return;
  const size_t size = dtype_size(got.dtype());
  const std::vector<double> gv = values(got), wv = values(want);
  for (size_t i = 0; i < gv.size(); ++i) {
    if (std::memcmp(&g[i * size], &w[i * size], size) == 0) continue;
    if (nan_any_payload && std::isnan(gv[i]) && std::isnan(wv[i])) continue;
    FAIL_CHECK(what, ": element ", i, " is ", gv[i], ", want ", wv[i], " (bits differ)");
    return;
  }
}

// The layouts the tensor operand reaches the kernel in (each drawn from seed): the vector kernel,
// its tail, the strided kernel, the inner-vector kernel, a 0-d tensor and one past a wave.
struct Layout {
  const char* name;
  Tensor x;
};
std::vector<Layout> layouts(DType t, uint64_t seed, bool big, bool nonnegative) {
  Generator g(seed);
  auto draw = [&](const Shape& s) {
    Tensor x = randn(s, kF64, &g) * (is_floating(t) ? 3.0 : 6.0);
    if (nonnegative) x = abs(x);
    return x.to(t);
  };
  std::vector<Layout> out = {{"1 element", draw({1})},
                             {"7 elements", draw({7})},
                             {"transposed 33x40", draw({40, 33}).t()},
                             {"misaligned by one", draw({1001}).slice(0, 1, 1001)},
                             {"rows of 64 in 128", draw({24, 128}).slice(1, 0, 64)},
                             {"0-d", draw({})}};
  if (big) out.push_back({"3M+5 elements", draw({kPastWave})});
  return out;
}

// The names of the kernels f runs on the GPU.
template <class F>
std::vector<std::string> gpu_kernels(F f) {
  profiler::Session session;
  f();
  session.stop();
  std::vector<std::string> names;
  for (const profiler::Event& e : session.events())
    if (e.kind == profiler::EventKind::Kernel && e.device.is_cuda()) names.push_back(e.name);
  return names;
}

const std::vector<BinaryOp> kOps = {BinaryOp::Add,     BinaryOp::Sub,     BinaryOp::Mul,     BinaryOp::Div,
                                    BinaryOp::Pow,     BinaryOp::Maximum, BinaryOp::Minimum, BinaryOp::ReluBackward,
                                    BinaryOp::AddRelu, BinaryOp::Eq,      BinaryOp::Ne,      BinaryOp::Lt,
                                    BinaryOp::Le,      BinaryOp::Gt,      BinaryOp::Ge};

}  // namespace

TEST_CASE("cuda: a host scalar on either side gives the device-scalar path's bits and the CPU's, every op and dtype" *
          MDL_CUDA_ONLY) {
  for (DType t : {kF32, kF16, kBF16, kF64, kI64, kI32, kU8, kBool}) {
    const std::vector<double> scalars = is_floating(t) ? std::vector<double>{2.5, -0.1, 0.0, std::nan("")}
                                                       : std::vector<double>{3.0, 0.0, 2.5};
    for (BinaryOp op : kOps) {
      const bool int_pow = op == BinaryOp::Pow && !is_floating(t);
      for (const Layout& l : layouts(t, 11 + uint64_t(op), true, int_pow)) {
        const Tensor xg = l.x.to(kGpu);
        for (size_t k = 0; k < scalars.size(); ++k) {
          if (std::string(l.name) == "3M+5 elements" && k > 0) break;  // one scalar at this size
          const double v = scalars[k];
          const Tensor s = native::scalar_operand(v, l.x);  // never bool: bool tensors compute in i64 or f32
          for (bool left : {false, true}) {
            const std::string what = std::string(binary_op_name(op)) + " " + dtype_name(t) + " " + l.name +
                                     (left ? ", scalar left " : ", scalar right ") + std::to_string(v);
            INFO(what);
            auto run = [&](const Tensor& x, const Tensor& sc) {
              return left ? native::binary(op, sc, x) : native::binary(op, x, sc);
            };
            const Tensor got = run(xg, s);
            REQUIRE(got.device() == kGpu);
            // Today's path on the GPU: the same scalar made a 0-d device tensor (a fill), then stride 0.
            check_same(got, run(xg, native::scalar_like(v, xg)), what + " against the device scalar", false);
            const Tensor want = run(l.x, s);
            if (op == BinaryOp::Pow && is_floating(got.dtype()))
              check_close(got, want, dtype_tol(got.dtype()), what + " against the CPU");
            else check_same(got, want, what + " against the CPU", true);
          }
        }
      }
    }
  }
}

TEST_CASE("cuda: a scalar operator is one binary launch on the GPU, with no fill or copy" * MDL_CUDA_ONLY) {
  const Tensor x = randn({1000}, kGpu), h = randn({1000}, kGpu).to(kF16);
  CHECK(gpu_kernels([&] { (void)(x * 2.0); }) == std::vector<std::string>{"binary"});
  CHECK(gpu_kernels([&] { (void)(2.0 - h); }) == std::vector<std::string>{"binary"});
  CHECK(gpu_kernels([&] { (void)pow(x, 3.0); }) == std::vector<std::string>{"binary"});
  CHECK(gpu_kernels([&] { (void)clamp(x, -0.5, 0.5); }) == std::vector<std::string>{"binary", "binary"});
  // A 0-d CPU tensor is a scalar operand, and decides no device: the result stays on the GPU.
  const Tensor s0 = randn({}, kGpu);
  CHECK((2.0 + s0).device() == kGpu);
  CHECK((scalar_tensor(2.0) * s0).device() == kGpu);
  CHECK((s0 * scalar_tensor(2.0)).device() == kGpu);
  CHECK(values(2.0 + s0) == std::vector<double>{double(2.0f + s0.item<float>())});
  // An i64 beyond 2^53 keeps every bit on the way to the kernel.
  const int64_t big = (int64_t(1) << 62) + 1;
  const Tensor xi = from_vector<int64_t>({0, 1, -1}).to(kGpu), si = from_vector<int64_t>({big}).reshape({});
  CHECK((xi + si).cpu().to_vector<int64_t>() == std::vector<int64_t>{big, big + 1, big - 1});
  CHECK((si - xi).cpu().to_vector<int64_t>() == std::vector<int64_t>{big, big - 1, big + 1});
}

TEST_CASE("cuda: integer division by zero and negative integer powers of a host scalar are reported" * MDL_CUDA_ONLY) {
  const Tensor xi = from_vector<int64_t>({7, -7, 0}).to(kGpu);
  Tensor out = empty({3}, TensorOptions(kI64, kGpu));
  CHECK_NOTHROW(kernels::binary_scalar(kGpu, BinaryOp::Div, out, xi, scalar_tensor(0, kI64), false));
  CHECK_THROWS_WITH_AS(cuda::check_errors(), doctest::Contains("div: integer division by zero (dtype i64)"),
                       mdl::Error);
  kernels::binary_scalar(kGpu, BinaryOp::Div, out, xi, scalar_tensor(7, kI64), true);  // 7 / 0 in the last element
  CHECK_THROWS_WITH_AS(cuda::synchronize(), doctest::Contains("div: integer division by zero (dtype i64)"), mdl::Error);
  kernels::binary_scalar(kGpu, BinaryOp::Div, out, from_vector<int64_t>({1, 2, -7}).to(kGpu), scalar_tensor(7, kI64),
                         true);
  CHECK(out.cpu().to_vector<int64_t>() == std::vector<int64_t>{7, 3, -1});
  CHECK_THROWS_WITH_AS(pow(xi, -1.0).cpu(),
                       doctest::Contains("pow: integers to negative integer powers are not allowed (dtype i64)"),
                       mdl::Error);
  check_same(xi / 0.0, from_vector<int64_t>({7, -7, 0}) / 0.0, "i64 / 0.0, true division: inf, -inf, NaN", true);
  // The kernel refuses a scalar that is not a 0-d CPU tensor of the other operand's dtype.
  CHECK_THROWS_WITH_AS(kernels::binary_scalar(kGpu, BinaryOp::Add, out, xi, scalar_tensor(1.0), false),
                       doctest::Contains("0-d CPU tensor of dtype i64"), mdl::Error);
}

TEST_CASE("cuda: f32 with f16 or bf16 operands, either order, broadcast and strided, gives the cast path's bits" *
          MDL_CUDA_ONLY) {
  using enum BinaryOp;
  for (DType half : {kF16, kBF16})
    for (BinaryOp op : {Add, Sub, Mul, Div, Maximum, Minimum, AddRelu, Pow, Eq, Lt}) {
      Generator g(uint64_t(op) + 100);
      auto draw = [&](const Shape& s, DType t) { return (randn(s, kF64, &g) * 3.0).to(t); };
      struct Pair {
        const char* name;
        Tensor wide, narrow;
      };
      const Tensor w = draw({kPastWave}, kF32), n = draw({kPastWave}, half);
      const std::vector<Pair> pairs = {
          {"1 element", draw({1}, kF32), draw({1}, half)},
          {"7 elements", draw({7}, kF32), draw({7}, half)},
          {"3M+5 elements", w, n},
          {"broadcast rows", draw({4, 1, 37}, kF32), draw({5, 1}, half)},
          {"broadcast columns", draw({5, 1}, kF32), draw({4, 1, 37}, half)},
          {"transposed", draw({40, 33}, kF32).t(), draw({33, 40}, half)},
          {"misaligned", w.slice(0, 1, 1001), n.slice(0, 3, 1003)},
          {"rows of 64 in 128", draw({24, 128}, kF32).slice(1, 0, 64), draw({24, 64}, half)},
          {"0-d narrow", draw({9, 8}, kF32), draw({}, half)},
      };
      for (const Pair& p : pairs)
        for (bool wide_first : {true, false}) {
          const std::string what = std::string(binary_op_name(op)) + " f32 " + (wide_first ? "op " : "after ") +
                                   dtype_name(half) + " " + p.name;
          INFO(what);
          const Tensor& a = wide_first ? p.wide : p.narrow;
          const Tensor& b = wide_first ? p.narrow : p.wide;
          const Tensor ag = a.to(kGpu), bg = b.to(kGpu);
          const Tensor got = native::binary(op, ag, bg);
          CHECK(got.dtype() == (is_comparison(op) ? kBool : kF32));
          check_same(got, native::binary(op, ag.to(kF32), bg.to(kF32)), what + " against the GPU cast path", false);
          if (op == Pow) check_close(got, native::binary(op, a, b), dtype_tol(kF32), what + " against the CPU");
          else check_same(got, native::binary(op, a, b), what + " against the CPU", true);
        }
    }
  // The mixed ops cast nothing: one binary launch.
  const Tensor x = randn({4096}, kGpu), h = randn({4096}, kGpu).to(kF16), b = randn({4096}, kGpu).to(kBF16);
  CHECK(gpu_kernels([&] { (void)(x + h); }) == std::vector<std::string>{"binary"});
  CHECK(gpu_kernels([&] { (void)(b * x); }) == std::vector<std::string>{"binary"});
  CHECK(gpu_kernels([&] { (void)add_relu(h, x); }) == std::vector<std::string>{"binary"});
  CHECK(gpu_kernels([&] { (void)eq(x, h); }) == std::vector<std::string>{"copy", "binary"});  // comparisons cast
}

TEST_CASE("cuda: autograd through scalar operators and f32 + f16 gives the CPU's gradients" * MDL_CUDA_ONLY) {
  const Tensor x0 = from_vector<float>({-1.5f, 0.0f, 0.5f, 2.0f, 3.0f, -0.25f, 7.0f});
  auto grads = [&](Device d, auto f) {
    Tensor x = x0.to(d).detach().requires_grad_();
    Tensor y = f(x);
    sum(y).backward();
    return std::vector<Tensor>{y, x.grad()};
  };
  // pow is a library call on each side (powf), equal within f32's tolerance; the rest bit for bit.
  auto check_fn = [&](const char* what, auto f, bool transcendental = false) {
    const auto c = grads(Device::cpu(), f), g = grads(kGpu, f);
    for (size_t i = 0; i < c.size(); ++i) {
      CHECK(g[i].device() == kGpu);
      if (transcendental) check_close(g[i], c[i], dtype_tol(kF32), what);
      else check_same(g[i], c[i], what, true);
    }
  };
  check_fn("x * 2", [](const Tensor& x) { return x * 2.0; });
  check_fn("2 * x", [](const Tensor& x) { return 2.0 * x; });
  check_fn("3 - x", [](const Tensor& x) { return 3.0 - x; });
  check_fn("x / 3", [](const Tensor& x) { return x / 3.0; });
  check_fn("1 / (x + 4)", [](const Tensor& x) { return 1.0 / (x + 4.0); });
  check_fn(
      "pow(x, 2)", [](const Tensor& x) { return pow(x, 2.0); }, true);
  check_fn(
      "pow(x, 0)", [](const Tensor& x) { return pow(x, 0.0); }, true);  // the exponent's zero test, on the host
  check_fn("clamp", [](const Tensor& x) { return clamp(x, -1.0, 2.5); });
  check_fn("relu", [](const Tensor& x) { return relu(x) * 0.5; });
  // The in-place forms with a scalar: add_(y, alpha) and mul_(s).
  Tensor yc = x0.clone(), yg = x0.to(kGpu);
  yc.add_(x0 * 2.0, 0.3).mul_(-1.5);
  yg.add_(x0.to(kGpu) * 2.0, 0.3).mul_(-1.5);
  check_same(yg, yc, "add_ and mul_", false);
  // f32 + f16 and f16 * f32: each gradient in its input's dtype.
  for (DType half : {kF16, kBF16}) {
    auto run = [&](Device d) {
      Tensor a = x0.to(d).detach().requires_grad_();
      Tensor h = (x0 * 0.5).to(half).to(d).detach().requires_grad_();
      Tensor y = (a + h) * (h * a) - a / (h + 8.0);
      sum(y).backward();
      return std::vector<Tensor>{y, a.grad(), h.grad()};
    };
    const auto c = run(Device::cpu()), g = run(kGpu);
    CHECK(g[2].dtype() == half);
    for (size_t i = 0; i < c.size(); ++i)
      check_same(g[i], c[i], std::string("f32 with ") + dtype_name(half) + " tensor " + std::to_string(i), true);
  }
}
