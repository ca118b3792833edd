// CPU mixed-precision kernels: the fused non-finite check and unscale behind GradScaler, and its
// scale update. One pass over the gradient, threaded in static chunks; the check ORs the exponent
// bits' all-ones test (inf and NaN), integer work that vectorises without reordering float sums.
#include <atomic>
#include <bit>
#include <cstdint>
#include <limits>

#include "cpu/kernels.h"
#include "kernels/amp.h"
#include "tensor/parallel.h"

namespace mdl::cpu {
namespace {

template <class T>
struct FloatBits;
template <>
struct FloatBits<float> {
  using U = uint32_t;
  static constexpr U kExp = 0x7f800000u;
};
template <>
struct FloatBits<double> {
  using U = uint64_t;
  static constexpr U kExp = 0x7ff0000000000000ull;
};

// g [b, e) of T: g *= inv; returns whether any element was inf or NaN.
template <class T>
bool unscale_chunk(T* g, int64_t b, int64_t e, T inv) {
  using U = typename FloatBits<T>::U;
  constexpr U kExp = FloatBits<T>::kExp;
  U bad = 0;
  for (int64_t i = b; i < e; ++i) {
    const T x = g[i];
    bad |= U((std::bit_cast<U>(x) & kExp) == kExp);
    g[i] = x * inv;
  }
  return bad != 0;
}

}  // namespace

void unscale_check(const Tensor& grad, const Tensor& found_inf, const Tensor& scale) {
  const double inv_scale = 1.0 / double(*scale.data_ptr<float>());
  const int64_t n = grad.numel();
  std::atomic<bool> any{false};
  auto run = [&]<class T>(T* g) {
    parallel_for(0, n, 1 << 16, [&](int64_t b, int64_t e) {
      if (unscale_chunk<T>(g, b, e, T(inv_scale))) any.store(true, std::memory_order_relaxed);
    });
  };
  if (grad.dtype() == kF32) run(grad.data_ptr<float>());
  else if (grad.dtype() == kF64) run(grad.data_ptr<double>());
  else MDL_FAIL("amp_unscale_check: expected an f32 or f64 gradient, got ", dtype_name(grad.dtype()));
  if (any.load()) *found_inf.data_ptr<float>() = 1.0f;
}

void unscale_check_many(const std::vector<Tensor>& grads, const Tensor& found_inf, const Tensor& scale) {
  for (const Tensor& g : grads) unscale_check(g, found_inf, scale);
}

void update_scale(const Tensor& scale, const Tensor& growth_tracker, const Tensor& skipped, const Tensor& found_inf,
                  const kernels::ScaleUpdate& u) {
  float& s = *scale.data_ptr<float>();
  int64_t& tracker = *growth_tracker.data_ptr<int64_t>();
  int64_t& skips = *skipped.data_ptr<int64_t>();
  if (*found_inf.data_ptr<float>() != 0.0f) {
    const float backed_off = float(double(s) * u.backoff_factor);
    if (backed_off < std::numeric_limits<float>::min()) kernels::fail_scale_underflow(s, backed_off, skips + 1);
    s = backed_off;
    tracker = 0;
    ++skips;
  } else if (++tracker == u.growth_interval) {
    const double grown = double(s) * u.growth_factor;
    if (grown <= double(std::numeric_limits<float>::max())) s = float(grown);
    tracker = 0;
  }
}

}  // namespace mdl::cpu
