// The 2x2 / stride 2 max pool's output row at AVX-512's width (cpu/pool_rows_avx512.cpp), for
// cpu/pool.cpp: rows r0 and r1 of the input (unit stride, 2 * Wo values each at least), base the
// index of r0's first value in its plane of width W; out (Wo) the winners and idx (Wo) their
// indices in the plane, as the scalar loop gives them. Runs only on a CPU with AVX-512F.
#pragma once
#include <cstdint>

namespace mdl::cpu::detail {

void max_pool_2x2_row_avx512(const float* r0, const float* r1, int64_t base, int64_t W, int64_t Wo, float* out,
                             int64_t* idx);
// bf16 values as their bits.
void max_pool_2x2_row_avx512(const uint16_t* r0, const uint16_t* r1, int64_t base, int64_t W, int64_t Wo, uint16_t* out,
                             int64_t* idx);

}  // namespace mdl::cpu::detail
