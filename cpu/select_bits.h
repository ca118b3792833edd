// c ? a : b on the values' bits, through a mask made from the bool: no branch, so a loop of them
// vectorises. A data-dependent branch mispredicts about half the time on a random mask (ReLU's
// backward, dropout), which made such loops several times slower. where and masked_fill select
// this way while the branchless_select switch is on (the default); off, they run the plain ternary.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace mdl::cpu {

// The unsigned integer as wide as T.
template <class T>
using bits_t = std::conditional_t<
    sizeof(T) == 1, uint8_t,
    std::conditional_t<sizeof(T) == 2, uint16_t, std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>>;

// A bool tensor's element, read as a byte (any nonzero byte is true).
inline bool bool_at(const bool* c) {
  uint8_t b;
  std::memcpy(&b, c, 1);
  return b != 0;
}

template <class T>
inline T select_bits(bool c, T a, T b) {
  using U = bits_t<T>;
  static_assert(sizeof(U) == sizeof(T));
  U ua, ub;
  std::memcpy(&ua, &a, sizeof ua);
  std::memcpy(&ub, &b, sizeof ub);
  const U m = U(U(0) - U(c));
  const U r = U((ua & m) | (ub & U(~m)));
  T out;
  std::memcpy(static_cast<void*>(&out), &r, sizeof r);
  return out;
}

// o[i] = c[i] ? x[i * x_step] : y[i * y_step] (steps 0 or 1).
template <class T>
inline void select_bits(T* o, const bool* c, const T* x, int64_t x_step, const T* y, int64_t y_step, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = select_bits(bool_at(c + i), x[i * x_step], y[i * y_step]);
}

}  // namespace mdl::cpu
