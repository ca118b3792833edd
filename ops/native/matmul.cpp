// Native matmul with torch.matmul's rules: 1-D operands gain and lose a dim, batch dims
// broadcast, and everything reaches the kernel as one (B, M, K) @ (B, K, N) product.
#include "ops/native/native.h"

namespace mdl::native {

Tensor matmul(const Tensor& a, const Tensor& b) {
  MDL_CHECK(a.defined() && b.defined(), "matmul: undefined tensor");
  return matmul(a, b, a.dtype());
}

Tensor matmul(const Tensor& a, const Tensor& b, DType out_dtype) {
  MDL_CHECK(a.defined() && b.defined(), "matmul: undefined tensor");
  MDL_CHECK(out_dtype == a.dtype() || (out_dtype == kF32 && (a.dtype() == kF16 || a.dtype() == kBF16)),
            "matmul: a result in ", out_dtype, " from ", a.dtype(), " operands (only f16/bf16 -> f32 widens)");
  MDL_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: both arguments need at least 1 dim, got shapes ",
            shape_str(a.shape()), " and ", shape_str(b.shape()));
  MDL_CHECK(a.device() == b.device(), "matmul: tensors on different devices, ", a.device(), " and ", b.device());
  MDL_CHECK(a.dtype() == b.dtype(), "matmul: dtypes ", a.dtype(), " and ", b.dtype(), " differ (shapes ",
            shape_str(a.shape()), " and ", shape_str(b.shape()), ")");
  Tensor x = a.dim() == 1 ? unsqueeze(a, 0) : a;  // (.., M, K)
  Tensor y = b.dim() == 1 ? unsqueeze(b, 1) : b;  // (.., K, N)
  const int64_t M = x.size(-2), K = x.size(-1), K2 = y.size(-2), N = y.size(-1);
  MDL_CHECK(K == K2, "matmul: shapes ", shape_str(a.shape()), " and ", shape_str(b.shape()), " cannot be multiplied");
  Shape xb(x.shape().begin(), x.shape().end() - 2), yb(y.shape().begin(), y.shape().end() - 2);
  Shape batch = broadcast_shapes(xb, yb, "matmul");
  int64_t B = shape_numel(batch);
  Shape xs = batch, ys = batch;
  xs.insert(xs.end(), {M, K});
  ys.insert(ys.end(), {K, N});
  // Expanded batch dims collapse to one dim of stride 0 or a real stride when possible.
  Tensor x3 = reshape(expand(x, xs), {B, M, K});
  Tensor y3 = reshape(expand(y, ys), {B, K, N});
  Tensor out = make_tensor({B, M, N}, out_dtype, a.device());
  if (K == 0) fill_(out, 0.0);
  else if (out.numel()) kernels::bmm(a.device(), out, x3, y3);
  Shape os = batch;
  if (a.dim() > 1) os.push_back(M);
  if (b.dim() > 1) os.push_back(N);
  return view(out, os);
}

}  // namespace mdl::native
