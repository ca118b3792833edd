// The fused ReLU(2x2 / stride 2 max pool) over whole planes at AVX-512's width
// (cpu/pool_relu_avx512.cpp), for cpu/pool_relu.cpp. Forward: x's rows at stride ldx (unit stride
// within a row, 2 * Wo values read from each), out (Ho, Wo) and codes (Ho, Wo) contiguous, as
// kernels/pool.h's max_pool2x2_relu_forward defines them. Backward: grad_x (H, W) contiguous from
// grad_out and codes (Ho, Wo) contiguous. Run only on a CPU with AVX-512F.
#pragma once
#include <cstdint>

namespace mdl::cpu::detail {

void max_pool_2x2_relu_plane_avx512(const float* x, int64_t ldx, int64_t Ho, int64_t Wo, float* out, uint8_t* codes);
// bf16 values as their bits.
void max_pool_2x2_relu_plane_avx512(const uint16_t* x, int64_t ldx, int64_t Ho, int64_t Wo, uint16_t* out,
                                    uint8_t* codes);

void max_pool_2x2_relu_backward_plane_avx512(const float* grad_out, const uint8_t* codes, int64_t H, int64_t W,
                                             int64_t Ho, int64_t Wo, float* grad_x);
void max_pool_2x2_relu_backward_plane_avx512(const uint16_t* grad_out, const uint8_t* codes, int64_t H, int64_t W,
                                             int64_t Ho, int64_t Wo, uint16_t* grad_x);

}  // namespace mdl::cpu::detail
