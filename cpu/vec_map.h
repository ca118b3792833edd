// vec_map: o[i] = f(x[i]) over contiguous floats for the functions of vec_math.h, 16 floats at a
// time where the CPU has AVX-512F (vec_map_avx512.cpp; the avx512_vec_math switch), 8 where it has
// AVX2 and FMA (vec_map_avx2.cpp), else 4 on SSE2, chosen at run time.
// A short tail runs on a zero-padded vector, so an element's result does not depend on where it
// sits; o may be x. With the vector_math switch off (toggles::set_vector_math(false)) every function runs one
// <cmath> call per element instead, the loop these kernels had before they were vectorised.
#pragma once
#include <cstdint>

namespace mdl::cpu {

enum class VecFn : uint8_t { Exp, Tanh, Sigmoid, Silu, Gelu, GeluGrad, GeluTanh, GeluTanhGrad };

void vec_map(VecFn f, float* o, const float* x, int64_t n);

// One <cmath> call per element (kernels/unary_math.h, kernels/gelu_math.h): the scalar reference.
void scalar_map(VecFn f, float* o, const float* x, int64_t n);

// Each width, for tests and benchmarks; vec_map8 needs has_avx2_fma(), vec_map16 has_avx512f()
// (cpu_features.h).
void vec_map4(VecFn f, float* o, const float* x, int64_t n);
void vec_map8(VecFn f, float* o, const float* x, int64_t n);
void vec_map16(VecFn f, float* o, const float* x, int64_t n);

}  // namespace mdl::cpu
