// DType facts and promotion.
#include "tensor/dtype.h"

namespace mdl {

size_t dtype_size(DType t) {
  switch (t) {
#define MDL_DTYPE_SIZE(e, T, DT, name, size) \
  case DType::e: return size;
    MDL_DTYPES(MDL_DTYPE_SIZE)
#undef MDL_DTYPE_SIZE
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
#define MDL_DTYPE_NAME(e, T, DT, name, size) \
  case DType::e: return name;
    MDL_DTYPES(MDL_DTYPE_NAME)
#undef MDL_DTYPE_NAME
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
