// Sizes that cannot overflow: a shape's element and byte counts, products and sums of
// non-negative sizes, and rounding up, each checked before its result is used; and the ceiling
// above which every allocator refuses a request.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>

#include "tensor/dtype.h"
#include "tensor/shape.h"

namespace mdl {

// 2^48 bytes (256 TiB), more than any machine holds: an allocator refuses larger requests before
// it rounds them, so that its rounding cannot overflow.
inline constexpr int64_t kMaxAllocBytes = int64_t(1) << 48;

// a * b and a + b of non-negative sizes; empty when the result does not fit in int64_t.
std::optional<int64_t> checked_mul(int64_t a, int64_t b);
std::optional<int64_t> checked_add(int64_t a, int64_t b);

// A shape's element count (dims >= 0), or empty when the product of its nonzero dims does not fit
// in int64_t: that product bounds every stride too, even where a zero dim makes the count 0.
std::optional<int64_t> numel_if_fits(const Shape& shape);

// A shape's element count, and its byte count for `dtype`. Negative dimensions and counts that do
// not fit in int64_t raise an mdl::Error that starts with `op` and names the shape (and the dtype)
// and which count overflowed.
int64_t checked_numel(const Shape& shape, const char* op);
int64_t checked_nbytes(const Shape& shape, DType dtype, const char* op);

// n rounded up to a multiple of step (n >= 0, step > 0); an mdl::Error naming `op` when the
// result would not fit in int64_t.
int64_t checked_round_up(int64_t n, int64_t step, const char* op);

// An allocation request: an mdl::Error naming `allocator` and the byte count when it is above
// kMaxAllocBytes.
void check_alloc_bytes(size_t nbytes, const char* allocator);

}  // namespace mdl
