// The op suite on CUDA against the CPU: copies and casts, elementwise unary and binary with
// broadcasting, where, reductions, softmax, matmul, indexing, and autograd through them, in each
// dtype's tolerance. CUDA cases are skipped (reported skipped) without a GPU; the error cases at
// the end run everywhere.
#include <doctest/doctest.h>

#include <cmath>

#include "mdl.h"
#include "nn/functional.h"
#include "optim/clip.h"
#include "kernels/core.h"
#include "kernels/dropout.h"
#include "kernels/optim.h"
#include "ops/native/native.h"
#include "tests/support/test_util.h"

using namespace mdl;
using mdl::test::check_close;
using mdl::test::dtype_tol;
using mdl::test::kExact;
using mdl::test::same_tol;
using mdl::test::Tol;

namespace {

const Device kGpu = Device::cuda();

// A random tensor of dtype t with values in a range every op accepts (positive when `positive`).
Tensor sample(const Shape& s, DType t, bool positive = false, uint64_t seed = 1) {
  Generator g(seed);
  Tensor x = randn(s, TensorOptions(kF64), &g);
  if (positive) x = abs(x) + 0.25;
  if (!is_floating(t)) x = x * 5.0;
  return x.to(t);
}

std::string name(const char* what, DType t) { return std::string(what) + " " + dtype_name(t); }

}  // namespace

TEST_CASE("cuda: copies between host and device keep every dtype, view and cast" * MDL_CUDA_ONLY) {
  for (DType t : {kF32, kF16, kBF16, kF64, kI32, kI64, kU8, kBool}) {
    Tensor x = sample({3, 5, 4}, t);
    check_close(x.to(kGpu), x, kExact, name("to cuda", t));
    check_close(x.to(kGpu).cpu(), x, kExact, name("round trip", t));
    Tensor v = x.permute({2, 0, 1}).slice(1, 0, 3, 2);  // non-contiguous view
    check_close(v.to(kGpu).cpu(), v, kExact, name("strided view", t));
    check_close(v.to(kGpu).contiguous().cpu(), v.contiguous(), kExact, name("contiguous on device", t));
    for (DType u : {kF32, kF16, kBF16, kF64, kI64, kBool})
      check_close(x.to(kGpu).to(u).cpu(), x.to(u), kExact, name("cast", t) + " to " + dtype_name(u));
  }
  Tensor host = zeros({4, 6});
  host.slice(1, 1, 5).copy_(ones({4, 4}).to(kGpu));  // device -> strided host view
  check_close(host.slice(1, 1, 5), full({4, 4}, 1.0), kExact, "copy_ into a host view");
  Tensor dev = zeros({2, 3}, kGpu);
  dev.fill_(2.5);
  check_close(dev, full({2, 3}, 2.5), kExact, "fill_");
}

TEST_CASE("cuda: unary ops match the CPU in every floating dtype" * MDL_CUDA_ONLY) {
  using enum UnaryOp;
  for (DType t : {kF32, kF64, kF16, kBF16})
    for (UnaryOp op : {Neg, Abs, Exp, Log, Sqrt, Rsqrt, Sin, Cos, Tanh, Sigmoid, Relu, Gelu, GeluTanh, Silu, Square,
                       Reciprocal, Sign, Log1p, Expm1}) {
      const bool positive = op == Log || op == Sqrt || op == Rsqrt || op == Log1p;
      Tensor x = sample({7, 33}, t, positive);
      check_close(native::unary(op, x.to(kGpu)), native::unary(op, x), dtype_tol(t), name(unary_op_name(op), t));
      Tensor xt = x.t();  // strided path
      check_close(native::unary(op, xt.to(kGpu)), native::unary(op, xt), dtype_tol(t),
                  name(unary_op_name(op), t) + " transposed");
    }
  for (UnaryOp op : {Neg, Abs, Square, Sign}) {
    Tensor x = sample({40}, kI64);
    check_close(native::unary(op, x.to(kGpu)), native::unary(op, x), kExact, name(unary_op_name(op), kI64));
  }
}

TEST_CASE("cuda: binary ops broadcast and match the CPU" * MDL_CUDA_ONLY) {
  using enum BinaryOp;
  for (DType t : {kF32, kF64, kF16, kBF16, kI64, kI32})
    for (BinaryOp op : {Add, Sub, Mul, Div, Pow, Maximum, Minimum, ReluBackward, Eq, Ne, Lt, Le, Gt, Ge}) {
      if (!is_floating(t) && (op == Div || op == Pow)) continue;
      Tensor a = sample({4, 1, 37}, t, op == Pow, 2), b = sample({5, 1}, t, false, 3);
      if (op == Pow && !is_floating(t)) b = abs(b);
      Tensor want = native::binary(op, a, b), got = native::binary(op, a.to(kGpu), b.to(kGpu));
      check_close(got, want, dtype_tol(t), name(binary_op_name(op), t));
      Tensor c = sample({64, 48}, t, op == Pow, 4), d = sample({64, 48}, t, false, 5);  // contiguous, vectorised
      check_close(native::binary(op, c.to(kGpu), d.to(kGpu)), native::binary(op, c, d), dtype_tol(t),
                  name(binary_op_name(op), t) + " contiguous");
    }
  Tensor a = from_vector<int64_t>({7, -7, 9}, {3}), b = from_vector<int64_t>({2, 2, -1}, {3});
  check_close(native::binary(Div, a.to(kGpu), b.to(kGpu)), native::binary(Div, a, b), kExact, "integer division");
  // The public div is true division on both devices: integers divide in f32, so / 0 gives inf.
  const std::vector<float> q =
      native::binary(Div, a.to(kGpu), zeros({3}, TensorOptions(kI64, kGpu))).to_vector<float>();
  CHECK((q[0] == HUGE_VALF && q[1] == -HUGE_VALF && q[2] == HUGE_VALF));
  // The kernel's integer division by zero is an mdl::Error naming div: at once on the CPU, at the
  // next sync point on the GPU (the kernel records it on the device; nothing is read back here).
  Tensor out = empty({3}, TensorOptions(kI64, kGpu));
  CHECK_NOTHROW(kernels::binary(kGpu, Div, out, a.to(kGpu), zeros({3}, TensorOptions(kI64, kGpu))));
  CHECK_THROWS_WITH_AS(cuda::check_errors(), doctest::Contains("div: integer division by zero (dtype i64)"),
                       mdl::Error);
  CHECK_NOTHROW(cuda::check_errors());  // reported once, then cleared
  kernels::binary(kGpu, Div, out, a.to(kGpu), zeros({3}, TensorOptions(kI64, kGpu)));
  CHECK_THROWS_WITH_AS(out.to(Device::cpu()), doctest::Contains("div: integer division by zero"), mdl::Error);
  kernels::binary(kGpu, Pow, out, a.to(kGpu), full({3}, -1.0, TensorOptions(kI64, kGpu)));
  CHECK_THROWS_WITH_AS(cuda::synchronize(), doctest::Contains("pow: integers to negative integer powers"), mdl::Error);
  Tensor cond = gt(sample({6, 5}, kF32), zeros({1}));
  Tensor x = sample({6, 5}, kF32, false, 7), y = sample({5}, kF32, false, 8);
  check_close(where(cond.to(kGpu), x.to(kGpu), y.to(kGpu)), where(cond, x, y), kExact, "where");
}

TEST_CASE("cuda: reductions over any dims match the CPU" * MDL_CUDA_ONLY) {
  for (DType t : {kF32, kF64, kF16, kBF16}) {
    Tensor x = sample({6, 300, 5}, t);
    Tensor g = x.to(kGpu);
    for (std::vector<int64_t> dims : std::vector<std::vector<int64_t>>{{}, {0}, {1}, {2}, {0, 2}, {1, 2}}) {
      const std::string d = " dims " + std::to_string(dims.size());
      check_close(sum(g, dims.empty() ? std::vector<int64_t>{0, 1, 2} : dims),
                  sum(x, dims.empty() ? std::vector<int64_t>{0, 1, 2} : dims), dtype_tol(t), name("sum", t) + d);
      if (!dims.empty()) {
        check_close(mean(g, dims), mean(x, dims), dtype_tol(t), name("mean", t) + d);
        check_close(var(g, dims), var(x, dims), t == kF32 ? same_tol(1e-4) : dtype_tol(t), name("var", t) + d);
      }
    }
    check_close(max(g), max(x), kExact, name("max", t));
    check_close(min(g), min(x), kExact, name("min", t));
    for (int64_t dim : {0, 1, 2}) {
      auto [v, i] = max(x, dim);
      auto [gv, gi] = max(g, dim);
      check_close(gv, v, kExact, name("max values", t));
      check_close(gi, i, kExact, name("max indices", t));
      check_close(argmin(g, dim), argmin(x, dim), kExact, name("argmin", t));
    }
    Tensor xt = x.permute({2, 0, 1});  // strided input
    check_close(sum(xt.to(kGpu), {1}), sum(xt, {1}), dtype_tol(t), name("sum strided", t));
  }
  Tensor i = sample({50, 7}, kI64);
  check_close(sum(i.to(kGpu), {0}), sum(i, {0}), kExact, "integer sum");
  Tensor nan = from_vector<float>({1.f, NAN, 3.f}, {3});
  CHECK(std::isnan(max(nan.to(kGpu)).item<float>()));
}

TEST_CASE("cuda: softmax and log_softmax, forward and backward, match the CPU" * MDL_CUDA_ONLY) {
  for (DType t : {kF32, kF64, kF16, kBF16})
    for (int64_t dim : {0, 1, 2})
      for (bool log : {false, true}) {
        Tensor x = sample({4, 1000, 3}, t) * 3.0;
        Tensor y = native::softmax(x, dim, log), gy = native::softmax(x.to(kGpu), dim, log);
        check_close(gy, y, dtype_tol(t), name(log ? "log_softmax" : "softmax", t));
        Tensor g = sample({4, 1000, 3}, t, false, 9);
        check_close(native::softmax_backward(g.to(kGpu), y.to(kGpu), dim, log),
                    native::softmax_backward(g, y, dim, log), dtype_tol(t),
                    name(log ? "log_softmax backward" : "softmax backward", t));
      }
}

TEST_CASE("cuda: matmul through cuBLAS matches the CPU, transposed and batched" * MDL_CUDA_ONLY) {
  for (DType t : {kF32, kF64, kF16, kBF16, kI64}) {
    Tensor a = sample({3, 17, 33}, t), b = sample({3, 33, 9}, t, false, 2);
    const Tol tol = t == kF32    ? same_tol(1e-4)
                    : t == kF16  ? same_tol(5e-3)
                    : t == kBF16 ? same_tol(3e-2)
                                 : dtype_tol(t);
    check_close(matmul(a.to(kGpu), b.to(kGpu)), matmul(a, b), tol, name("bmm", t));
    Tensor at = sample({3, 33, 17}, t, false, 3).transpose(1, 2), bt = sample({3, 9, 33}, t, false, 4).transpose(1, 2);
    check_close(matmul(at.to(kGpu), bt.to(kGpu)), matmul(at, bt), tol, name("bmm transposed", t));
    Tensor w = sample({33, 9}, t, false, 5);  // batch broadcast (stride 0)
    check_close(matmul(a.to(kGpu), w.to(kGpu)), matmul(a, w), tol, name("broadcast matmul", t));
    Tensor p = sample({5, 40}, t, false, 6).slice(1, 0, 40, 2);  // no unit stride: copied first
    check_close(matmul(p.to(kGpu), p.t().to(kGpu)), matmul(p, p.t()), tol, name("strided matmul", t));
  }
}

TEST_CASE("cuda: indexing ops and tril/triu match the CPU" * MDL_CUDA_ONLY) {
  for (DType t : {kF32, kF64, kF16, kI64}) {
    Tensor x = sample({6, 7, 5}, t);
    Tensor idx = from_vector<int64_t>({4, 0, 4, 2}, {4});
    for (int64_t dim : {0, 1, 2}) {
      check_close(index_select(x.to(kGpu), dim, idx.to(kGpu)), index_select(x, dim, idx), kExact,
                  name("index_select", t));
      Tensor src = sample(native::index_select(x, dim, idx).shape(), t, false, 3);
      check_close(native::index_add(x.to(kGpu), dim, idx.to(kGpu), src.to(kGpu)), native::index_add(x, dim, idx, src),
                  dtype_tol(t), name("index_add", t));
    }
    if (t == kF16)  // repeated indices along dim 1 (not the sorted rows' path): summed in f32, rounded once
      for (const std::vector<float>& v : {std::vector<float>{60000, 60000, -60000}, std::vector<float>{2048, 1, 1}}) {
        const Tensor out = zeros({1, 1}, TensorOptions(kF16)), rep = from_vector<int64_t>({0, 0, 0}, {3});
        const Tensor vals = from_vector<float>(v, {1, 3}).to(kF16);
        const Tensor got = native::index_add(out.to(kGpu), 1, rep.to(kGpu), vals.to(kGpu));
        check_close(got, native::index_add(out, 1, rep, vals), kExact, "index_add f16 repeated indices");
        CHECK(got.to(Device::cpu()).to(kF32).item<float>() == v[0] + v[1] + v[2]);
      }
    Tensor gi = from_vector<int64_t>({0, 1, 2, 3, 4, 0, 0, 1, 1, 2}, {2, 5, 1}).expand({2, 5, 5}).contiguous();
    Tensor xs = x.slice(0, 0, 2);
    check_close(gather(xs.to(kGpu), 1, gi.to(kGpu)), gather(xs, 1, gi), kExact, name("gather", t));
    Tensor src = sample({2, 5, 5}, t, false, 4);
    check_close(scatter_add(xs.to(kGpu), 1, gi.to(kGpu), src.to(kGpu)), scatter_add(xs, 1, gi, src), dtype_tol(t),
                name("scatter_add", t));
    for (int64_t k : {-2, 0, 3}) {
      check_close(tril(x.to(kGpu), k), tril(x, k), kExact, name("tril", t));
      check_close(triu(x.transpose(1, 2).to(kGpu), k), triu(x.transpose(1, 2), k), kExact, name("triu", t));
    }
  }
}

TEST_CASE("cuda: autograd through a small network gives the CPU's gradients" * MDL_CUDA_ONLY) {
  for (DType t : {kF64, kF32}) {
    Tensor x = sample({8, 12}, t), w1 = sample({12, 16}, t, false, 2), w2 = sample({16, 5}, t, false, 3);
    auto run = [&](Device d) {
      Tensor a = w1.to(d).detach().requires_grad_(), b = w2.to(d).detach().requires_grad_();
      Tensor h = tanh(matmul(x.to(d), a));
      Tensor loss = sum(log_softmax(matmul(h, b), 1) * softmax(matmul(h, b), 0));
      loss.backward();
      return std::vector<Tensor>{loss, a.grad(), b.grad()};
    };
    auto c = run(Device::cpu()), g = run(kGpu);
    for (size_t i = 0; i < c.size(); ++i)
      check_close(g[i], c[i], same_tol(t == kF32 ? 1e-4 : 1e-9), name("autograd", t));
  }
}

TEST_CASE("cuda: the caching allocator reuses blocks and reports its statistics" * MDL_CUDA_ONLY) {
  cuda::synchronize();
  cuda::empty_cache();
  const auto before = cuda::cache_stats();
  { Tensor a = empty({1000}, kGpu); }  // 4000 B -> one 4096 B block, back to the cache
  const auto mid = cuda::cache_stats();
  CHECK(mid.device_mallocs == before.device_mallocs + 1);
  CHECK(mid.reserved_bytes == before.reserved_bytes + 4096);
  { Tensor b = empty({1010}, kGpu); }  // same size class: a cache hit, no cudaMalloc
  const auto after = cuda::cache_stats();
  CHECK(after.device_mallocs == mid.device_mallocs);
  CHECK(after.cache_hits == mid.cache_hits + 1);
  CHECK(after.allocated_bytes == before.allocated_bytes);
  cuda::empty_cache();
  CHECK(cuda::cache_stats().reserved_bytes == before.reserved_bytes);
  Tensor big = empty({3 << 20}, kGpu);  // 12 MiB: a large block, rounded to 2 MiB
  CHECK(cuda::cache_stats().allocated_bytes - after.allocated_bytes == 12 << 20);
  Tensor p = cuda::pin_memory(arange(10.0));
  CHECK(cuda::is_pinned(p));
  CHECK_FALSE(cuda::is_pinned(arange(10.0)));
  check_close(p.to(kGpu), arange(10.0), kExact, "pinned copy");
}

TEST_CASE("cuda: a captured graph replays its kernels on the same memory" * MDL_CUDA_ONLY) {
  Tensor x = arange(8.0).to(kF32).to(kGpu), y;
  {
    NoGradGuard no_grad;
    y = x * 2.0 + 1.0;  // warm-up outside the capture
    cuda::Graph graph;
    graph.capture_begin();
    Tensor z = x * 2.0 + 1.0;
    y.copy_(z);
    graph.capture_end();
    x.fill_(3.0);
    graph.replay();
    cuda::synchronize();
    check_close(y, full({8}, 7.0), kExact, "replayed graph");
  }
}

// A block graph A allocated and graph B's capture freed is addressed by both: destroying B must not
// hand it out while A still replays into it (a new tensor of the same size would be overwritten).
// And a caught failed call leaves no error for the next launch to report.
TEST_CASE("cuda: a graph's memory outlives another graph that freed it; a caught failure stays caught" *
          MDL_CUDA_ONLY) {
  NoGradGuard no_grad;
  const Tensor x = ones({1024}, kGpu);
  (void)(x * 2.0 + 1.0);  // warm-up outside the captures
  cuda::Graph a;
  Tensor out;
  a.capture_begin();
  out = x * 2.0;  // allocated during A's capture
  a.capture_end();
  {
    cuda::Graph b;
    b.capture_begin();
    Tensor y = out + 1.0;
    out = Tensor();  // freed during B's capture
    y = Tensor();
    b.capture_end();
  }  // B destroyed: A may still replay into the freed block
  Tensor z = full({1024}, 7.0, TensorOptions(kF32, kGpu));
  a.replay();
  cuda::synchronize();
  check_close(z, full({1024}, 7.0), kExact, "a tensor made after the other graph was destroyed");

  // 4 TiB of pinned memory for an expanded view of one byte: cudaHostAlloc fails.
  CHECK_THROWS_AS(cuda::pin_memory(ones({1}, kU8).expand({int64_t(1) << 42})), mdl::Error);
  check_close(x + 1.0, full({1024}, 2.0), kExact, "the next op after a caught failure");
}

TEST_CASE("cuda: ops on a CUDA device that is not there throw a clear error") {
  if (!cuda::is_available()) {
    CHECK_THROWS_WITH_AS(zeros({2}, Device::cuda()), doctest::Contains("allocate: device cuda:0 is not available"),
                         mdl::Error);
    CHECK_THROWS_WITH_AS(ones({2}).to(Device::cuda()), doctest::Contains("is not available"), mdl::Error);
    CHECK_THROWS_AS(cuda::pin_memory(ones({2})), mdl::Error);
    cuda::Graph g;
    CHECK_THROWS_AS(g.capture_begin(), mdl::Error);
  } else {
    CHECK_THROWS_WITH_AS(zeros({2}, Device::cuda(cuda::device_count())), doctest::Contains("does not exist"),
                         mdl::Error);
  }
  CHECK(cuda::cache_stats().allocated_bytes >= 0);
  cuda::empty_cache();  // harmless everywhere
}

TEST_CASE("cuda: dropout masks equal the CPU's bit for bit; fused optimizer steps match" * MDL_CUDA_ONLY) {
  Tensor m = empty({1003}, kBool), gm = empty({1003}, TensorOptions(kBool, kGpu));
  kernels::dropout_mask(Device::cpu(), m, 0.3, 1234, 77);
  kernels::dropout_mask(kGpu, gm, 0.3, 1234, 77);
  check_close(gm, m, kExact, "dropout mask");
  Tensor x = sample({1003}, kF32);
  Tensor y = empty({1003}), gy = empty({1003}, kGpu);
  kernels::masked_scale(Device::cpu(), y, x, m, 1.0 / 0.7);
  kernels::masked_scale(kGpu, gy, x.to(kGpu), gm, 1.0 / 0.7);
  check_close(gy, y, dtype_tol(kF32), "masked_scale");
  for (bool amsgrad : {false, true}) {
    kernels::AdamParams hp;
    hp.lr = 1e-2, hp.weight_decay = 0.1, hp.decoupled = true, hp.amsgrad = amsgrad, hp.step = 3;
    Tensor p = sample({777}, kF32), g = sample({777}, kF32, false, 2);
    Tensor m1 = abs(sample({777}, kF32, false, 3)), v1 = abs(sample({777}, kF32, false, 4)), vm = v1 * 1.5;
    Tensor gp = p.to(kGpu), gm1 = m1.to(kGpu), gv1 = v1.to(kGpu), gvm = vm.to(kGpu);
    kernels::adam_step(Device::cpu(), p, g, m1, v1, amsgrad ? vm : Tensor(), hp);
    kernels::adam_step(kGpu, gp, g.to(kGpu), gm1, gv1, amsgrad ? gvm : Tensor(), hp);
    check_close(gp, p, {1e-5, 1e-5}, "adam param");
    check_close(gv1, v1, {1e-5, 1e-5}, "adam exp_avg_sq");
  }
  kernels::SGDParams sp;
  sp.lr = 0.1, sp.momentum = 0.9, sp.nesterov = true, sp.first = false;
  Tensor p = sample({500}, kF64), g = sample({500}, kF64, false, 2), buf = sample({500}, kF32, false, 3);
  Tensor gp = p.to(kGpu), gbuf = buf.to(kGpu);
  kernels::sgd_step(Device::cpu(), p, g, buf, sp);
  kernels::sgd_step(kGpu, gp, g.to(kGpu), gbuf, sp);
  check_close(gp, p, {1e-6, 1e-6}, "sgd param");
  // Sizes around one block and past 1024 blocks (the partials then wrap).
  for (int64_t n : {int64_t(1), int64_t(255), int64_t(257), int64_t(500), int64_t(300001)}) {
    CAPTURE(n);
    const Tensor x = sample({n}, kF32, false, 4);
    Tensor sc = zeros({}, kF64), sg = zeros({}, TensorOptions(kF64, kGpu));
    kernels::sum_squares(Device::cpu(), x, sc);
    kernels::sum_squares(kGpu, x.to(kGpu), sg);
    CHECK(sg.item<double>() == doctest::Approx(sc.item<double>()).epsilon(1e-12));
  }
  // clip_grad_norm_on_device_ on the GPU against the CPU's clip_grad_norm_.
  for (double max_norm : {1e-3, 1e9}) {
    Tensor a = sample({1000}, kF32), b = a.to(kGpu);
    a.set_grad(sample({1000}, kF32, false, 5));
    b.set_grad(a.grad().to(kGpu));
    const double host = optim::clip_grad_norm_({a}, max_norm);
    CHECK(optim::clip_grad_norm_on_device_({b}, max_norm).item<double>() == doctest::Approx(host).epsilon(1e-12));
    check_close(b.grad(), a.grad(), {1e-6, 1e-6}, "clipped grad");
  }
}

// Sizes past a launch's or a library's limits take another path or are refused by name: index_add
// along dim 0 with rows of 2^24 + 256 values (65537 chunks of 256, past grid.y's 65535) takes the
// general kernel; a conv whose input holds 2^31 elements (past cuDNN's 4-d descriptors) throws
// naming its shape.
TEST_CASE("cuda: index_add with very long rows, and a conv past cuDNN's element count" * MDL_CUDA_ONLY) {
  const int64_t D = (int64_t(1) << 24) + 256;
  const Tensor src = ones({2, D}, TensorOptions(kF32, kGpu)), idx = from_vector<int64_t>({1, 1}, {2}).to(kGpu);
  const Tensor got = native::index_add(zeros({3, D}, TensorOptions(kF32, kGpu)), 0, idx, src).to(Device::cpu());
  const float* g = got.data_ptr<float>();
  for (int64_t i : {int64_t(0), D - 1}) {
    CHECK(g[i] == 0.0f);          // row 0: no index names it
    CHECK(g[D + i] == 2.0f);      // row 1: named twice
    CHECK(g[2 * D + i] == 0.0f);  // row 2
  }
  const Tensor x = empty({32, 64, 1024, 1024}, TensorOptions(kF16, kGpu)),
               w = zeros({1, 64, 1, 1}, TensorOptions(kF16, kGpu));
  CHECK_THROWS_WITH_AS(nn::functional::conv2d(x, w), doctest::Contains("[32,64,1024,1024]"), Error);
}
