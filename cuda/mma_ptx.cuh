// The tensor-core and asynchronous-copy instructions the register-tiled FlashAttention forward
// (cuda/flash_forward_mma.cuh) issues, as inline PTX: ldmatrix (four 8 x 8 matrices of 16-bit
// elements from shared memory into the registers of mma's operands, optionally transposed),
// mma.sync.m16n8k16 with f32 accumulators, mma.sync.m16n8k8 on tf32 with cvt.rna.tf32.f32 (the f32
// kernels' 3xTF32 products), and cp.async's 16-byte global-to-shared copy with its commit and wait.
// Which lane holds which element is kernels/mma_fragments.h (kernels/mma_fragments_tf32.h for
// tf32). sm_80 and later.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace mdl::cuda::ptx {

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// r[m] = this lane's two elements of matrix m; lane l addresses row l % 8 of matrix l / 8.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row)));
}

// c (16 x 8, f32) += a (16 x 16) b (16 x 8), a and b in T (__half or __nv_bfloat16).
template <class T>
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, __half>) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    static_assert(std::is_same_v<T, __nv_bfloat16>, "mma_16816 takes f16 or bf16 operands");
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// x rounded to tf32 (10 mantissa bits, to nearest, ties away from zero), as an operand register whose
// 13 bits below tf32's are cleared here (the ISA does not promise their value), so that it is also the
// f32 value of the rounding.
__device__ __forceinline__ uint32_t to_tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r & 0xffffe000u;
}

// c (16 x 8, f32) += a (16 x 8) b (8 x 8), tf32 operands.
__device__ __forceinline__ void mma_1688_tf32(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats rounded to T and packed as one operand register, x in the low half.
template <class T>
__device__ __forceinline__ uint32_t pack2(float x, float y) {
  uint32_t r;
  if constexpr (std::is_same_v<T, __half>) {
    const __half2 h = __floats2half2_rn(x, y);
    r = *reinterpret_cast<const uint32_t*>(&h);
  } else {
    const __nv_bfloat162 h = __floats2bfloat162_rn(x, y);
    r = *reinterpret_cast<const uint32_t*>(&h);
  }
  return r;
}
// The two values of a packed register, back in f32: what the tensor cores multiply.
template <class T>
__device__ __forceinline__ float2 unpack2(uint32_t r) {
  if constexpr (std::is_same_v<T, __half>) return __half22float2(*reinterpret_cast<const __half2*>(&r));
  else return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&r));
}

// 16 bytes from global src to shared dst without passing through registers (cache in L2 only).
__device__ __forceinline__ void cp_async_16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(shared_address(dst)), "l"(src));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most n of this thread's committed groups are still in flight.
template <int n>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(n));
}

}  // namespace mdl::cuda::ptx
