// Autocast, as torch.autocast: a thread-local mixed-precision policy. Inside an AutocastGuard
// (tensor/autocast_mode.h, included here) the ops of the 16-bit list (matmul, linear, conv2d,
// scaled_dot_product_attention) cast their floating inputs to the guard's dtype and compute with
// f32 accumulation; the ops of the f32 list (softmax, log_softmax, the losses, layer/group norm,
// sum, mean, exp, log) cast theirs to f32. Every other op runs in its inputs' dtypes (type
// promotion); batch norm among them, with its statistics in f32. f64 is never touched.
//
// Each listed op calls a hook at its top:
//   Tensor linear(const Tensor& x_in, const Tensor& w_in, const Tensor& b_in) {
//     auto [x, w, b] = amp::autocast_lower(x_in, w_in, b_in);
// When autocast is off the hook costs one thread-local branch and copies no tensor handle.
//
// The cast cache: within the outermost autocast region, the cast of a leaf that requires grad
// (a parameter, f32 master weight) is made once per (tensor, version, grad mode) and reused;
// the cast records a to_dtype node, so the gradient reaches the f32 parameter as f32. The cache
// is cleared when the outermost guard exits. Backward always runs with autocast off.
//
// The weight cache (toggle amp_weight_cache), below the cast cache: the 16-bit copy of a parameter
// outlives the region, valid while the parameter's version is the one it was made from. The fused
// optimizer steps rewrite the copy in the pass that updates the parameter (fresh_weight_copy, then
// weight_copy_rewritten), so a forward after a step launches no cast for it.
#pragma once
#include <array>
#include <cstddef>
#include <tuple>

#include "tensor/autocast_mode.h"
#include "tensor/tensor.h"

namespace mdl::amp {

// The number of casts held by this thread's cast cache (for tests).
size_t cast_cache_size();

// The number of parameters the weight cache holds a copy of, and dropping them all (turning
// amp_weight_cache off drops them too).
size_t weight_cache_size();
void clear_weight_cache();
// For an optimizer step that rewrites the copy: param's cached copy when it was made from param's
// current version and has param's layout, else undefined.
Tensor fresh_weight_copy(const Tensor& param);
// After the step wrote the copy from param's new value and bumped param's version: the copy is
// current again (its own version is bumped, so a graph that saved it knows it changed).
void weight_copy_rewritten(const Tensor& param, const Tensor& copy);

// An op's arguments after the policy: element i is the cast when one was made, else the
// caller's own tensor (no handle copied). Destructure it: auto [a, b] = autocast_lower(a_in, b_in).
template <size_t N>
class CastArgs {
 public:
  explicit CastArgs(std::array<const Tensor*, N> orig) : orig_(orig) {}
  const Tensor& operator[](size_t i) const { return cast_[i].defined() ? cast_[i] : *orig_[i]; }
  template <size_t I>
  const Tensor& get() const {
    return (*this)[I];
  }
  void set(size_t i, Tensor t) { cast_[i] = std::move(t); }

 private:
  std::array<const Tensor*, N> orig_;
  std::array<Tensor, N> cast_;
};

namespace detail {
// cast, a value of x cast earlier (the weight cache's copy), as to_dtype(x, cast.dtype()) would
// return it: an alias of cast recording x's to_dtype node, with no kernel. Beside to_dtype in
// ops/shape.cpp.
Tensor to_dtype_node(const Tensor& x, const Tensor& cast);
// x cast to `target` when autocast should (floating, not f64, not already target), else undefined.
Tensor cast_lower(const Tensor& x, DType target);
Tensor cast_f32(const Tensor& x);

template <class Cast, class... Ts>
CastArgs<sizeof...(Ts)> apply_policy(const Cast& cast, const Ts&... xs) {
  CastArgs<sizeof...(Ts)> r({&xs...});
  if (!is_autocast_enabled()) [[likely]]
    return r;
  size_t i = 0;
  ((r.set(i, cast(xs)), ++i), ...);
  return r;
}
}  // namespace detail

// The 16-bit list's hook: floating inputs other than f64 go to autocast_dtype().
template <class... Ts>
CastArgs<sizeof...(Ts)> autocast_lower(const Ts&... xs) {
  return detail::apply_policy([](const Tensor& x) { return detail::cast_lower(x, autocast_dtype()); }, xs...);
}

// The f32 list's hook: f16 and bf16 inputs go to f32.
template <class... Ts>
CastArgs<sizeof...(Ts)> autocast_f32(const Ts&... xs) {
  return detail::apply_policy([](const Tensor& x) { return detail::cast_f32(x); }, xs...);
}

}  // namespace mdl::amp

// Structured bindings for CastArgs.
template <size_t N>
struct std::tuple_size<mdl::amp::CastArgs<N>> : std::integral_constant<size_t, N> {};
template <size_t I, size_t N>
struct std::tuple_element<I, mdl::amp::CastArgs<N>> {
  using type = const mdl::Tensor&;
};
