// The context's cuBLASLt handle and its workspace (for the fused linear layer's epilogue GEMMs),
// both created on first use and bound to nothing: each cublasLtMatmul names mdl's stream, and the
// workspace is only ever used by work queued on that one stream, so calls never overlap on it.
#pragma once
#include <cublasLt.h>

#include <cstddef>

#include "cuda/runtime/context.cuh"

namespace mdl::cuda::detail {

cublasLtHandle_t cublaslt();
// 32 MiB of device memory (cuBLAS's recommendation for Hopper), from cudaMalloc, never freed.
void* cublaslt_workspace();
constexpr size_t kCublasLtWorkspaceBytes = size_t(32) << 20;

}  // namespace mdl::cuda::detail
