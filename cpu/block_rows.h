// Row-by-row copies and sums of small 2-D blocks for the unfolding and folding of convs
// (cpu/conv.cpp), whose rows are a feature map's width: 7 to 28 values in most CNNs, too short for
// a vectorized loop to leave its scalar tail. On AVX-512 each row of up to 32 16-bit values or 16
// floats is one masked load and one masked store (cpu/block_rows_avx512.cpp).
#pragma once
#include <cstdint>

namespace mdl::cpu {

// dst[r * dst_stride + j] = src[r * src_stride + j] for r < rows, j < n: 16-bit values (bf16 and
// f16, as their bits). The blocks do not overlap.
void copy_block_u16(uint16_t* dst, int64_t dst_stride, const uint16_t* src, int64_t src_stride, int64_t rows,
                    int64_t n);
// dst[r * dst_stride + j] += src[r * src_stride + j] for r < rows, j < n. The blocks do not overlap.
void add_block_f32(float* dst, int64_t dst_stride, const float* src, int64_t src_stride, int64_t rows, int64_t n);

namespace detail {
// On a CPU with AVX-512BW only.
void copy_block_u16_avx512(uint16_t* dst, int64_t dst_stride, const uint16_t* src, int64_t src_stride, int64_t rows,
                           int64_t n);
// On a CPU with AVX-512F only.
void add_block_f32_avx512(float* dst, int64_t dst_stride, const float* src, int64_t src_stride, int64_t rows,
                          int64_t n);
}  // namespace detail

}  // namespace mdl::cpu
