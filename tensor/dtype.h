// Element types: DType, its size and name, type promotion, and the C++ type behind each.
#pragma once
#include <cstdint>
#include <string>

#include "tensor/error.h"
#include "tensor/half.h"

namespace mdl {

// Every element type once: X(enumerator, host C++ type, the type a dispatcher passes (its Types
// parameter picks the 16-bit floats' types), name, bytes). The enum, the kF32... constants,
// dtype_of, dtype_name, dtype_size, the dispatchers' cases and the instantiations over every type
// (MDL_DTYPES(X) with an X of one's own) are all generated from it.
// clang-format off
#define MDL_DTYPES(X)                                          \
  X(F32,  float,    float,                   "f32",  4)        \
  X(F16,  Half,     typename Types::f16,     "f16",  2)        \
  X(BF16, BFloat16, typename Types::bf16,    "bf16", 2)        \
  X(F64,  double,   double,                  "f64",  8)        \
  X(I32,  int32_t,  int32_t,                 "i32",  4)        \
  X(I64,  int64_t,  int64_t,                 "i64",  8)        \
  X(U8,   uint8_t,  uint8_t,                 "u8",   1)        \
  X(Bool, bool,     bool,                    "bool", 1)
// clang-format on

#define MDL_DTYPE_ENUM(e, T, DT, name, size) e,
enum class DType : uint8_t { MDL_DTYPES(MDL_DTYPE_ENUM) };
#undef MDL_DTYPE_ENUM

#define MDL_DTYPE_CONSTANT(e, T, DT, name, size) inline constexpr DType k##e = DType::e;
MDL_DTYPES(MDL_DTYPE_CONSTANT)
#undef MDL_DTYPE_CONSTANT

size_t dtype_size(DType t);
const char* dtype_name(DType t);  // "f32", "f16", ...
bool is_floating(DType t);
bool is_integral(DType t);  // includes bool
// The dtype two operands compute in (floating beats integral, wider wins, f16 with bf16 gives f32).
DType promote_types(DType a, DType b);
inline std::ostream& operator<<(std::ostream& s, DType t) { return s << dtype_name(t); }

template <class T>
struct dtype_of;
#define MDL_DTYPE_OF(e, T, DT, name, size) \
  template <>                              \
  struct dtype_of<T> {                     \
    static constexpr DType value = k##e;   \
  };
MDL_DTYPES(MDL_DTYPE_OF)
#undef MDL_DTYPE_OF

// The type arithmetic on T is done in: float for the 16-bit floats, T otherwise.
template <class T>
struct acc_type {
  using type = T;
};
template <>
struct acc_type<Half> {
  using type = float;
};
template <>
struct acc_type<BFloat16> {
  using type = float;
};
template <class T>
using acc_t = typename acc_type<T>::type;

// The types behind f16 and bf16 on the host; CUDA kernels dispatch with their device types
// (cuda/common.cuh's DeviceTypes) through the same dispatchers.
struct HostTypes {
  using f16 = Half;
  using bf16 = BFloat16;
};

// Calls f.template operator()<T>() with T the C++ type of `t`:
//   dispatch(t, "relu", [&]<class T>() { ... });
template <class Types = HostTypes, class F>
decltype(auto) dispatch(DType t, const char* op, F&& f) {
  switch (t) {
#define MDL_DTYPE_CASE(e, T, DT, name, size) \
  case DType::e: return f.template operator()<DT>();
    MDL_DTYPES(MDL_DTYPE_CASE)
#undef MDL_DTYPE_CASE
  }
  MDL_FAIL(op, ": unknown dtype");
}

// Same, over the floating types only; anything else throws naming the op and dtype.
template <class Types = HostTypes, class F>
decltype(auto) dispatch_floating(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::F32: return f.template operator()<float>();
    case DType::F16: return f.template operator()<typename Types::f16>();
    case DType::BF16: return f.template operator()<typename Types::bf16>();
    case DType::F64: return f.template operator()<double>();
    default: MDL_FAIL(op, ": expected a floating dtype (f32, f16, bf16, f64), got ", dtype_name(t));
  }
}

}  // namespace mdl
