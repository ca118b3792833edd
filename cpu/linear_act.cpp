// The fused linear layer on the CPU: our GEMM writes x @ w^T, then ONE pass adds the bias and
// applies the activation (keeping the pre-activation for GELU), instead of separate matmul, add
// and activation passes over the output; a bf16 layer with no activation has the GEMM add the bias
// and round in its registers (gemm_bf16_to_bf16). The backward's activation gradient and the bias
// gradient are one pass too, over pieces of rows. f16/bf16 run in f32 and round once, as a GPU
// epilogue does; GELU on f32 runs on float vectors.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/float_block.h"
#include "cpu/kernels.h"
#include "kernels/convert.h"
#include "kernels/gelu_math.h"
#include "cpu/gemm.h"
#include "cpu/row_blocks.h"
#include "cpu/scratch.h"
#include "cpu/select_bits.h"
#include "cpu/vec_map.h"
#include "kernels/linear_act.h"
#include "tensor/parallel.h"

namespace mdl::cpu {

namespace {

// The activation (forward: v -> act(v); derivative: s -> act'(s)) over a block of compute-type
// values in place; GELU on floats runs on float vectors (vec_map.h), the rest element by element.
template <class A>
void act_forward_block(Activation act, A* v, int64_t n) {
  if constexpr (std::is_same_v<A, float>)
    if (act == Activation::GeluTanh) return vec_map(VecFn::GeluTanh, v, v, n);
  for (int64_t i = 0; i < n; ++i) v[i] = act_forward(act, v[i]);
}
template <class A>
void act_derivative_block(Activation act, A* s, int64_t n) {
  if constexpr (std::is_same_v<A, float>)
    if (act == Activation::GeluTanh) return vec_map(VecFn::GeluTanhGrad, s, s, n);
  for (int64_t i = 0; i < n; ++i) s[i] = act_derivative(act, s[i]);
}
constexpr int64_t kBlock = 256;

template <class T>
using compute_t = std::conditional_t<std::is_same_v<T, double>, double, float>;
template <class T>
constexpr bool kHalf = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// Widens n elements of a 16-bit (or f32/f64) buffer into the compute type: 16-bit ones by the
// bulk conversions (F16C for f16, where a scalar loop converts each value in software).
template <class T>
std::vector<compute_t<T>> widened(const T* p, int64_t n) {
  std::vector<compute_t<T>> v(size_t(std::max<int64_t>(n, 0)));
  if constexpr (kHalf<T>) to_f32(p, v.data(), n);
  else
    for (int64_t i = 0; i < n; ++i) v[size_t(i)] = compute_t<T>(p[i]);
  return v;
}

void gemm(int64_t M, int64_t N, int64_t K, const float* x, const float* w, float* y) {
  // y (M, N) = x (M, K) @ w^T, w (N, K): B's element (p, j) is w[j * K + p].
  gemm_f32(M, N, K, 1.0f, x, K, 1, w, 1, K, 0.0f, y, N, 1);
}
void gemm(int64_t M, int64_t N, int64_t K, const double* x, const double* w, double* y) {
  gemm_f64(M, N, K, 1.0, x, K, 1, w, 1, K, 0.0, y, N, 1);
}

template <class T>
void forward(const Tensor& out, const Tensor& pre, const Tensor& x, const Tensor& w, const Tensor& bias,
             Activation act) {
  using A = compute_t<T>;
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  if (M == 0 || N == 0) return;
  const std::vector<A> b = bias.defined() ? widened(bias.data_ptr<T>(), N) : std::vector<A>(size_t(N), A(0));
  if constexpr (std::is_same_v<T, BFloat16>)  // the bias added and the sum rounded in the GEMM's registers
    if (act == Activation::None && !pre.defined() && gemm_bf16_rounds_in_registers(K))
      return gemm_bf16_to_bf16(M, N, K, x.data_ptr<T>(), K, 1, w.data_ptr<T>(), 1, K, b.data(), out.data_ptr<T>(), N);
  // acc (M, N): the GEMM's result in the compute type; out itself unless out is 16-bit, then scratch
  // from the block cache (cpu/scratch.h), whose pages do not fault again on every call.
  Scratch<A> scratch;
  A* acc = nullptr;
  if constexpr (std::is_same_v<T, A>) {
    acc = out.data_ptr<T>();
    gemm(M, N, K, x.data_ptr<T>(), w.data_ptr<T>(), acc);
  } else {
    scratch.resize(M * N);
    acc = scratch.data();
    if constexpr (std::is_same_v<T, BFloat16>) {  // packed straight from bf16
      gemm_bf16(M, N, K, 1.0f, x.data_ptr<T>(), K, 1, w.data_ptr<T>(), 1, K, 0.0f, acc, N, 1);
    } else {
      const std::vector<A> xa = widened(x.data_ptr<T>(), M * K), wa = widened(w.data_ptr<T>(), N * K);
      gemm(M, N, K, xa.data(), wa.data(), acc);
    }
  }
  T* o = out.data_ptr<T>();
  T* p = pre.defined() ? pre.data_ptr<T>() : nullptr;
  // The epilogue: one pass over (M, N), rows split over threads.
  parallel_for(0, M, std::max<int64_t>(1, kGrainSize / 8 / N), [&](int64_t r0, int64_t r1) {
    A v[kBlock];
    for (int64_t i = r0; i < r1; ++i)
      for (int64_t j0 = 0; j0 < N; j0 += kBlock) {
        const int64_t m = std::min(kBlock, N - j0);
        const A* a = acc + i * N + j0;
        for (int64_t j = 0; j < m; ++j) v[j] = a[j] + b[size_t(j0 + j)];
        if (p)
          for (int64_t j = 0; j < m; ++j) p[i * N + j0 + j] = convert<T>(v[j]);
        act_forward_block(act, v, m);
        if constexpr (kHalf<T>) store_floats<T>(reinterpret_cast<char*>(o + i * N + j0), sizeof(T), v, m);
        else
          for (int64_t j = 0; j < m; ++j) o[i * N + j0 + j] = convert<T>(v[j]);
      }
  });
}

// m values of T as the compute type A: 16-bit ones by the bulk conversions.
template <class T, class A>
void widen_block(const T* src, A* dst, int64_t m) {
  if constexpr (kHalf<T>) load_floats<T>(reinterpret_cast<const char*>(src), sizeof(T), dst, m);
  else
    for (int64_t j = 0; j < m; ++j) dst[j] = A(src[j]);
}

template <class T>
void backward(const Tensor& grad_pre, const Tensor& grad_bias, const Tensor& grad_out, const Tensor& saved,
              Activation act) {
  using A = compute_t<T>;
  const int64_t M = grad_out.size(0), N = grad_out.size(1);
  const T* g = grad_out.data_ptr<T>();
  const T* s = saved.defined() ? saved.data_ptr<T>() : nullptr;
  T* gp = grad_pre.data_ptr<T>();
  T* gb = grad_bias.defined() && grad_bias.dtype() == grad_out.dtype() ? grad_bias.data_ptr<T>() : nullptr;
  float* gb_f32 = grad_bias.defined() && !gb ? grad_bias.data_ptr<float>() : nullptr;  // 16-bit sums kept in f32
  const bool in_place = static_cast<const void*>(gp) == static_cast<const void*>(g);
  const bool sums = gb || gb_f32;
  if (!s && in_place && !sums) return;  // no activation and no bias: the gradient passes as it is
  // the bias gradient in pieces of rows (cpu/row_blocks.h)
  const int64_t rows = sum_block_rows(M), pieces = (M + rows - 1) / rows;
  Scratch<A> partial(sums ? pieces * N : 0);  // (pieces, N)
  parallel_for_balanced(0, pieces, 1, [&](int64_t p0, int64_t p1) {
    A d[kBlock];
    for (int64_t p = p0; p < p1; ++p) {
      A* sum = sums ? partial.data() + p * N : nullptr;
      if (sum) std::fill(sum, sum + N, A(0));
      int64_t i = p * rows;
      const int64_t end = std::min(M, (p + 1) * rows);
      if (!s && in_place && sum) {  // no activation: only the bias sums, 4 rows widened per pass over sum
        A w[4][kBlock];
        for (; i + 4 <= end; i += 4)
          for (int64_t j0 = 0; j0 < N; j0 += kBlock) {
            const int64_t m = std::min(kBlock, N - j0);
            for (int r = 0; r < 4; ++r) widen_block(g + (i + r) * N + j0, w[r], m);
            for (int64_t j = 0; j < m; ++j) sum[j0 + j] = (((sum[j0 + j] + w[0][j]) + w[1][j]) + w[2][j]) + w[3][j];
          }
      }
      for (; i < end; ++i)
        for (int64_t j0 = 0; j0 < N; j0 += kBlock) {
          const int64_t m = std::min(kBlock, N - j0), k0 = i * N + j0;
          if (act == Activation::Relu) {  // g where pre > 0, else 0: a select on the bits, no branch
            for (int64_t j = 0; j < m; ++j) d[j] = select_bits(A(s[k0 + j]) > A(0), A(g[k0 + j]), A(0));
          } else if (!s && in_place) {  // no activation, and the gradient is its own: only the bias sums
            widen_block(g + k0, d, m);
            for (int64_t j = 0; j < m; ++j) sum[j0 + j] += d[j];
            continue;
          } else {
            if (s) {
              for (int64_t j = 0; j < m; ++j) d[j] = A(s[k0 + j]);
              act_derivative_block(act, d, m);
            } else {
              std::fill(d, d + m, A(1));
            }
            for (int64_t j = 0; j < m; ++j) d[j] = A(g[k0 + j]) * d[j];
          }
          for (int64_t j = 0; j < m; ++j) {
            const T v = convert<T>(d[j]);
            gp[k0 + j] = v;
            if (sum) sum[j0 + j] += A(v);
          }
        }
    }
  });
  if (!sums) return;
  parallel_for(0, N, kGrainSize / std::max<int64_t>(pieces, 1), [&](int64_t c0, int64_t c1) {
    for (int64_t j = c0; j < c1; ++j) {
      A total = partial[size_t(j)];
      for (int64_t p = 1; p < pieces; ++p) total += partial[size_t(p * N + j)];
      if (gb) gb[j] = convert<T>(total);
      else gb_f32[j] = float(total);
    }
  });
}

template <class F>
void dispatch_linear(DType t, const char* op, const F& f) {
  switch (t) {
    case kF32: return f.template operator()<float>();
    case kF64: return f.template operator()<double>();
    case kF16: return f.template operator()<Half>();
    case kBF16: return f.template operator()<BFloat16>();
    default: MDL_FAIL(op, ": expected a floating dtype (f32, f16, bf16, f64), got ", dtype_name(t));
  }
}

}  // namespace

void linear_act_forward(const Tensor& out, const Tensor& pre, const Tensor& x, const Tensor& w, const Tensor& bias,
                        Activation act) {
  dispatch_linear(out.dtype(), "linear_act", [&]<class T>() { forward<T>(out, pre, x, w, bias, act); });
}

void linear_act_backward(const Tensor& grad_pre, const Tensor& grad_bias, const Tensor& grad_out, const Tensor& saved,
                         Activation act) {
  dispatch_linear(grad_out.dtype(), "linear_act_backward", [&]<class T>() {
    backward<T>(grad_pre, grad_bias, grad_out, act == Activation::None ? Tensor() : saved, act);
  });
}

}  // namespace mdl::cpu
