// Loads and stores of GCC float vectors (float __attribute__((vector_size(...)))) for the row-loop
// bodies written once on a vector type V (cpu/softmax_rows_impl.h, cpu/layer_norm_rows_impl.h).
// Included inside each instantiating file's target region, so the helpers compile for that target.
#pragma once
#include <cstring>

namespace mdl::cpu::float_vectors {

template <class V>
constexpr int kWidth = int(sizeof(V) / sizeof(float));

// The V (or the float, V = float) at p, which needs no alignment.
template <class V>
[[gnu::always_inline]] inline V load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <class V>
[[gnu::always_inline]] inline void store(float* p, V v) {
  std::memcpy(p, &v, sizeof v);
}

}  // namespace mdl::cpu::float_vectors
