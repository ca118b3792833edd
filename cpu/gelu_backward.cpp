// GELU's backward on the CPU: grad_x = grad_out * gelu'(x), one pass. f32/f16/bf16 compute the
// derivative on float vectors (vec_map.h) a block at a time (float_block.h); f64 runs <cmath>.
#include <algorithm>

#include "kernels/convert.h"
#include "cpu/kernels.h"
#include "cpu/float_block.h"
#include "kernels/gelu_math.h"
#include "cpu/loops.h"
#include "cpu/vec_map.h"
#include "kernels/gelu.h"

namespace mdl::cpu {

void gelu_backward(const Tensor& grad_x, const Tensor& grad_out, const Tensor& x, bool tanh_approx) {
  if (grad_x.numel() == 0) return;
  StridedLoop<3> loop({&grad_x, &grad_out, &x});
  const VecFn fn = tanh_approx ? VecFn::GeluTanhGrad : VecFn::GeluGrad;
  dispatch_floating(grad_x.dtype(), "gelu_backward", [&]<class T>() {
    loop.run([&](char* const* p, const int64_t* s, int64_t n) {
      auto at = [&](int k, int64_t i) { return reinterpret_cast<T*>(p[k] + i * s[k]); };
      if constexpr (std::is_same_v<T, double>) {
        for (int64_t i = 0; i < n; ++i) {
          const double x = *at(2, i);
          *at(0, i) = *at(1, i) * (tanh_approx ? gelu_math::gelu_tanh_grad(x) : gelu_math::gelu_grad(x));
        }
      } else {
        float d[kFloatBlock], g[kFloatBlock];
        const bool dense = std::is_same_v<T, float> && s[0] == 4 && s[1] == 4 && s[2] == 4;
        for (int64_t i0 = 0; i0 < n; i0 += kFloatBlock) {
          const int64_t m = std::min(kFloatBlock, n - i0);
          if (dense) {  // straight from x; no gather
            vec_map(fn, d, reinterpret_cast<const float*>(at(2, i0)), m);
            float* o = reinterpret_cast<float*>(at(0, i0));
            const float* g = reinterpret_cast<const float*>(at(1, i0));
            for (int64_t i = 0; i < m; ++i) o[i] = g[i] * d[i];
            continue;
          }
          load_floats<T>(p[2] + i0 * s[2], s[2], d, m);
          load_floats<T>(p[1] + i0 * s[1], s[1], g, m);
          vec_map(fn, d, d, m);
          for (int64_t i = 0; i < m; ++i) d[i] *= g[i];
          store_floats<T>(p[0] + i0 * s[0], s[0], d, m);
        }
      }
    });
  });
}

}  // namespace mdl::cpu
