// DType facts and promotion.
#include "tensor/dtype.h"

namespace mdl {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32:
    case DType::I32: return 4;
    case DType::F16:
    case DType::BF16: return 2;
    case DType::F64:
    case DType::I64: return 8;
    case DType::U8:
    case DType::Bool: return 1;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::F64: return "f64";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    case DType::U8: return "u8";
    case DType::Bool: return "bool";
  }
  return "?";
}

bool is_floating(DType t) { return t == kF32 || t == kF16 || t == kBF16 || t == kF64; }
bool is_integral(DType t) { return !is_floating(t); }

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (is_floating(a) != is_floating(b)) return is_floating(a) ? a : b;
  if (is_floating(a)) {
    if (a == kF64 || b == kF64) return kF64;
    return kF32;  // f32 with a 16-bit float, or f16 with bf16
  }
  auto rank = [](DType t) { return t == kBool ? 0 : t == kU8 ? 1 : t == kI32 ? 2 : 3; };
  return rank(a) > rank(b) ? a : b;
}

}  // namespace mdl
