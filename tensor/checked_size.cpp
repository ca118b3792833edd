// Overflow-checked size arithmetic on int64_t, with errors that name what overflowed.
#include "tensor/checked_size.h"

#include "tensor/error.h"

namespace mdl {

std::optional<int64_t> checked_mul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

std::optional<int64_t> checked_add(int64_t a, int64_t b) {
  int64_t r = 0;
  if (a < 0 || b < 0 || __builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

std::optional<int64_t> numel_if_fits(const Shape& shape) {
  int64_t nonzero = 1;
  bool empty = false;
  for (int64_t d : shape) {
    if (d == 0) {
      empty = true;
      continue;
    }
    std::optional<int64_t> next = checked_mul(nonzero, d);
    if (!next) return std::nullopt;
    nonzero = *next;
  }
  return empty ? 0 : nonzero;
}

namespace {
// `dtype_note` (" of f32" or empty) completes the shape in messages.
int64_t numel_of(const Shape& shape, const char* op, const std::string& dtype_note) {
  for (int64_t d : shape) MDL_CHECK(d >= 0, op, ": negative dimension in shape ", shape_str(shape), dtype_note);
  std::optional<int64_t> numel = numel_if_fits(shape);
  MDL_CHECK(numel, op, ": shape ", shape_str(shape), dtype_note,
            " has too many elements: the product of its dims overflows int64");
  return *numel;
}
}  // namespace

int64_t checked_numel(const Shape& shape, const char* op) { return numel_of(shape, op, ""); }

int64_t checked_nbytes(const Shape& shape, DType dtype, const char* op) {
  const std::string dtype_note = detail::concat(" of ", dtype);
  const int64_t numel = numel_of(shape, op, dtype_note);
  const int64_t item = int64_t(dtype_size(dtype));
  std::optional<int64_t> bytes = checked_mul(numel, item);
  MDL_CHECK(bytes, op, ": shape ", shape_str(shape), dtype_note, " has too many bytes: ", numel, " elements x ", item,
            " bytes overflows int64");
  return *bytes;
}

int64_t checked_round_up(int64_t n, int64_t step, const char* op) {
  MDL_CHECK(n >= 0 && step > 0, op, ": cannot round ", n, " up to a multiple of ", step);
  std::optional<int64_t> padded = checked_add(n, step - 1);
  MDL_CHECK(padded, op, ": ", n, " bytes rounded up to a multiple of ", step, " overflows int64");
  return *padded / step * step;
}

void check_alloc_bytes(size_t nbytes, const char* allocator) {
  MDL_CHECK(nbytes <= size_t(kMaxAllocBytes), allocator, ": refusing to allocate ", nbytes,
            " bytes, above the ceiling of 2^48 (", kMaxAllocBytes, ") bytes; is a size corrupt or overflowed?");
}

}  // namespace mdl
