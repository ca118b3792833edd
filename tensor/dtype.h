// Element types: DType, its size and name, type promotion, and the C++ type behind each.
#pragma once
#include <cstdint>
#include <string>

#include "tensor/error.h"
#include "tensor/half.h"

namespace mdl {

enum class DType : uint8_t { F32, F16, BF16, F64, I32, I64, U8, Bool };

inline constexpr DType kF32 = DType::F32;
inline constexpr DType kF16 = DType::F16;
inline constexpr DType kBF16 = DType::BF16;
inline constexpr DType kF64 = DType::F64;
inline constexpr DType kI32 = DType::I32;
inline constexpr DType kI64 = DType::I64;
inline constexpr DType kU8 = DType::U8;
inline constexpr DType kBool = DType::Bool;

size_t dtype_size(DType t);
const char* dtype_name(DType t);  // "f32", "f16", ...
bool is_floating(DType t);
bool is_integral(DType t);  // includes bool
// The dtype two operands compute in (floating beats integral, wider wins, f16 with bf16 gives f32).
DType promote_types(DType a, DType b);
inline std::ostream& operator<<(std::ostream& s, DType t) { return s << dtype_name(t); }

template <class T>
struct dtype_of;
template <>
struct dtype_of<float> {
  static constexpr DType value = kF32;
};
template <>
struct dtype_of<double> {
  static constexpr DType value = kF64;
};
template <>
struct dtype_of<Half> {
  static constexpr DType value = kF16;
};
template <>
struct dtype_of<BFloat16> {
  static constexpr DType value = kBF16;
};
template <>
struct dtype_of<int32_t> {
  static constexpr DType value = kI32;
};
template <>
struct dtype_of<int64_t> {
  static constexpr DType value = kI64;
};
template <>
struct dtype_of<uint8_t> {
  static constexpr DType value = kU8;
};
template <>
struct dtype_of<bool> {
  static constexpr DType value = kBool;
};

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
    case DType::F32: return f.template operator()<float>();
    case DType::F16: return f.template operator()<typename Types::f16>();
    case DType::BF16: return f.template operator()<typename Types::bf16>();
    case DType::F64: return f.template operator()<double>();
    case DType::I32: return f.template operator()<int32_t>();
    case DType::I64: return f.template operator()<int64_t>();
    case DType::U8: return f.template operator()<uint8_t>();
    case DType::Bool: return f.template operator()<bool>();
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
