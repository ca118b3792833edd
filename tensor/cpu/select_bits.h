// o[i] = c[i] ? x[i * x_step] : y[i * y_step] (steps 0 or 1) on the values' bits, through a mask
// made from the bool: no branch, so the loop vectorises. A data-dependent branch mispredicts
// about half the time on a random mask (ReLU's backward, dropout), which made such loops several
// times slower.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace mdl::cpu {

// The unsigned integer as wide as T.
template <class T>
using bits_t = std::conditional_t<sizeof(T) == 1, uint8_t,
               std::conditional_t<sizeof(T) == 2, uint16_t, std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>>;

// All ones where the bool is true, zeros where false.
template <class U>
inline U bool_mask(const bool* c) {
  uint8_t ci;
  std::memcpy(&ci, c, 1);
  return U(U(0) - U(ci != 0));
}

template <class T>
inline void select_bits(T* o, const bool* c, const T* x, int64_t x_step, const T* y, int64_t y_step, int64_t n) {
  using U = bits_t<T>;
  static_assert(sizeof(U) == sizeof(T));
  for (int64_t i = 0; i < n; ++i) {
    U a, b;
    std::memcpy(&a, x + i * x_step, sizeof a);
    std::memcpy(&b, y + i * y_step, sizeof b);
    const U m = bool_mask<U>(c + i);
    const U r = (a & m) | (b & U(~m));
    std::memcpy(static_cast<void*>(o + i), &r, sizeof r);
  }
}

}  // namespace mdl::cpu
