// Elementwise binary ops and where on the GPU; operands arrive expanded to out's shape (stride 0
// on broadcast dims). Arithmetic runs in acc_t, comparisons write bool. Integer division by zero
// and negative integer powers raise a device flag that the host turns into an mdl::Error.
#include "cuda/elementwise.cuh"
#include "cuda/kernels.cuh"

namespace mdl::cuda {

using namespace detail;

namespace {

template <class T, BinaryOp OP>
struct BinaryMath {
  int* bad;  // set to 1 on integer division by zero / negative integer power
  using A = std::conditional_t<std::is_same_v<T, bool>, int64_t, acc_t<T>>;
  using O = std::conditional_t<is_comparison(OP), bool, T>;
  __device__ O operator()(T xa, T xb) const {
    const A a = A(to_acc(xa)), b = A(to_acc(xb));
    if constexpr (OP == BinaryOp::Add) return convert<O>(A(a + b));
    else if constexpr (OP == BinaryOp::Sub) return convert<O>(A(a - b));
    else if constexpr (OP == BinaryOp::Mul) return convert<O>(A(a * b));
    else if constexpr (OP == BinaryOp::Div) {
      if constexpr (std::is_integral_v<A>) {
        using U = std::make_unsigned_t<A>;
        if (b == 0) { *bad = 1; return convert<O>(A(0)); }
        if (b == A(-1)) return convert<O>(A(U(0) - U(a)));
        return convert<O>(A(a / b));
      } else {
        return convert<O>(A(a / b));
      }
    } else if constexpr (OP == BinaryOp::Pow) {
      if constexpr (std::is_integral_v<A>) {
        if (negative(b)) { *bad = 1; return convert<O>(A(0)); }
        using U = std::make_unsigned_t<A>;
        U r = 1, base = U(a);
        for (A e = b; e > 0; e >>= 1) {
          if (e & 1) r *= base;
          base *= base;
        }
        return convert<O>(A(r));
      } else {
        return convert<O>(A(pow(a, b)));
      }
    } else if constexpr (OP == BinaryOp::Maximum) return convert<O>((a != a) ? a : (b != b) ? b : (a > b ? a : b));
    else if constexpr (OP == BinaryOp::Minimum) return convert<O>((a != a) ? a : (b != b) ? b : (a < b ? a : b));
    else if constexpr (OP == BinaryOp::Eq) return a == b;
    else if constexpr (OP == BinaryOp::Ne) return a != b;
    else if constexpr (OP == BinaryOp::Lt) return a < b;
    else if constexpr (OP == BinaryOp::Le) return a <= b;
    else if constexpr (OP == BinaryOp::Gt) return a > b;
    else return a >= b;
  }
};

template <class T, BinaryOp OP>
void binary_launch(const Tensor& out, const Tensor& a, const Tensor& b) {
  using F = BinaryMath<T, OP>;
  constexpr bool can_fail = std::is_integral_v<typename F::A> && (OP == BinaryOp::Div || OP == BinaryOp::Pow);
  if constexpr (!can_fail) {
    launch_map<typename F::O, T, T>("binary", out, {&a, &b}, F{nullptr});
  } else {
    Tensor flag = make_tensor({}, kI32, out.device());
    CUDA_CHECK("binary", cudaMemsetAsync(flag.raw_data(), 0, sizeof(int), stream()));
    launch_map<typename F::O, T, T>("binary", out, {&a, &b}, F{ptr<int>(flag)});
    int bad = 0;
    CUDA_CHECK("binary", cudaMemcpyAsync(&bad, flag.raw_data(), sizeof(int), cudaMemcpyDeviceToHost, stream()));
    CUDA_CHECK("binary", cudaStreamSynchronize(stream()));
    if (bad && OP == BinaryOp::Pow)
      MDL_FAIL("pow: integers to negative integer powers are not allowed (dtype ", a.dtype(), ")");
    if (bad) MDL_FAIL("div: integer division by zero (dtype ", a.dtype(), ")");
  }
}

template <class T, BinaryOp... OPS>
void binary_switch(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  ((op == OPS ? binary_launch<T, OPS>(out, a, b) : void()), ...);
}

template <class T>
struct Select {
  __device__ T operator()(bool c, T a, T b) const { return c ? a : b; }
};

}  // namespace

void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  dispatch_all(a.dtype(), "binary", [&]<class T>() {
    using enum BinaryOp;
    binary_switch<T, Add, Sub, Mul, Div, Pow, Maximum, Minimum, Eq, Ne, Lt, Le, Gt, Ge>(op, out, a, b);
  });
}

void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  dispatch_all(out.dtype(), "where", [&]<class T>() {
    launch_map<T, bool, T, T>("where", out, {&cond, &a, &b}, Select<T>{});
  });
}

}  // namespace mdl::cuda
