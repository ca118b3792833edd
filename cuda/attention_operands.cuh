// How the attention kernels (cuda/attention.cu, cuda/flash_attention.cu) address their operands:
// batch dims shared by q, k, v, mask and grad_out (expanded, so a batch stride may be 0), each
// operand's batch, row and column strides, and its base offset for a flat batch index. Outputs
// (out, dq, dk, dv) are addressed the same way, with a unit column stride.
#pragma once
#include "cuda/kernels.cuh"

namespace mdl::cuda::attn {

constexpr int kMaxBatchDims = 6;

// Batch dims shared by every operand; b in [0, count) in row-major order.
struct Batch {
  int nb = 0;
  int64_t size[kMaxBatchDims] = {};
  int64_t count = 1;
};

// One operand (*, R, C): its batch strides and its row and column strides.
struct Operand {
  int64_t bs[kMaxBatchDims] = {};
  int64_t rs = 0, cs = 0;
  __device__ __forceinline__ int64_t base(const Batch& g, int64_t b) const {
    int64_t off = 0;
    for (int d = g.nb - 1; d >= 0; --d) {
      off += (b % g.size[d]) * bs[d];
      b /= g.size[d];
    }
    return off;
  }
};

inline Batch batch_of(const char* op, const Tensor& q) {
  Batch g;
  g.nb = int(q.dim() - 2);
  MDL_CHECK(g.nb <= kMaxBatchDims, op, ": CUDA attention takes at most ", kMaxBatchDims, " batch dims, got shape ",
            shape_str(q.shape()));
  for (int d = 0; d < g.nb; ++d) g.size[d] = q.size(d), g.count *= q.size(d);
  return g;
}

inline Operand operand(const Tensor& t) {
  Operand o;
  if (!t.defined()) return o;
  for (int64_t d = 0; d + 2 < t.dim(); ++d) o.bs[d] = t.stride(d);
  o.rs = t.stride(-2);
  o.cs = t.stride(-1);
  return o;
}

// An output's operand: the kernels write its rows with a unit column stride (kernels/attention.h).
inline Operand output(const char* op, const Tensor& t) {
  MDL_CHECK(!t.defined() || t.dim() < 2 || t.size(-1) <= 1 || t.stride(-1) == 1, op,
            ": an output must have unit stride along its last dim, got strides ", shape_str(t.strides()));
  return operand(t);
}

}  // namespace mdl::cuda::attn
