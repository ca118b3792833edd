// MDL_HOST_DEVICE marks a function both backends compile: __host__ __device__ under nvcc, nothing
// for the C++ compiler. The math in kernels/*_math.h is written once this way, so the CPU and CUDA
// kernels compute each formula with the same expression.
#pragma once

#if defined(__CUDACC__)
#define MDL_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define MDL_HOST_DEVICE inline
#endif
