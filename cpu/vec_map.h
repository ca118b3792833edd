// vec_map: o[i] = f(x[i]) over contiguous floats for the functions of vec_math.h, 8 floats at a
// time where the CPU has AVX2 and FMA (vec_map_avx2.cpp, chosen at run time), else 4 on SSE2.
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

// The two widths, for tests and benchmarks; vec_map8 needs has_avx2_fma() (cpu_features.h).
void vec_map4(VecFn f, float* o, const float* x, int64_t n);
void vec_map8(VecFn f, float* o, const float* x, int64_t n);

}  // namespace mdl::cpu
