// copy_block_u16 and add_block_f32: the AVX-512 rows where the CPU has them, else plain loops.
#include "cpu/block_rows.h"

#include "cpu/cpu_features.h"

namespace mdl::cpu {

void copy_block_u16(uint16_t* dst, int64_t dst_stride, const uint16_t* src, int64_t src_stride, int64_t rows,
                    int64_t n) {
  if (has_avx512bw()) return detail::copy_block_u16_avx512(dst, dst_stride, src, src_stride, rows, n);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) dst[r * dst_stride + j] = src[r * src_stride + j];
}

void add_block_f32(float* dst, int64_t dst_stride, const float* src, int64_t src_stride, int64_t rows, int64_t n) {
  if (has_avx512f()) return detail::add_block_f32_avx512(dst, dst_stride, src, src_stride, rows, n);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) dst[r * dst_stride + j] += src[r * src_stride + j];
}

}  // namespace mdl::cpu
