// Strided iteration for CPU kernels: walks the elements of a shape for NT operands with
// arbitrary (byte) strides, coalescing dims that are contiguous in every operand, and hands
// the innermost runs to a callback. Threads split the flat element range, so any shape
// (one long row or many short ones) uses every core, in pieces a thread done early takes over
// from a slower one (parallel_for_balanced): every element's result is its own.
#pragma once
#include <array>
#include <cstdint>

#include "kernels/core.h"
#include "tensor/error.h"
#include "tensor/parallel.h"
#include "tensor/tensor.h"

namespace mdl::cpu {

template <int NT>
struct StridedLoop {
  int ndim = 0;
  int64_t shape[kMaxDimsCpu];
  int64_t strides[NT][kMaxDimsCpu];  // bytes
  char* base[NT];
  int64_t numel = 1;

  // Operand 0 defines the shape; the others must have that shape (expanded beforehand).
  explicit StridedLoop(const std::array<const Tensor*, NT>& ts) {
    const Shape& sh = ts[0]->shape();
    MDL_CHECK(sh.size() <= size_t(kMaxDimsCpu), "cpu kernel: tensors of more than ", kMaxDimsCpu,
              " dims are not supported");
    for (int t = 0; t < NT; ++t) base[t] = static_cast<char*>(ts[t]->raw_data());
    // Keep the dims of size != 1, in order (a channels-last output's in memory order), then merge
    // neighbours that are contiguous in all operands.
    const bool nhwc = walks_channels_last(sh, ts[0]->strides());
    for (size_t k = 0; k < sh.size(); ++k) {
      const size_t d = nhwc ? size_t(channels_last_walk()[k]) : k;
      numel *= sh[d];
      if (sh[d] == 1) continue;
      bool merge = ndim > 0;
      for (int t = 0; t < NT && merge; ++t)
        merge = strides[t][ndim - 1] == ts[t]->stride(d) * int64_t(ts[t]->element_size()) * sh[d];
      if (merge) {
        shape[ndim - 1] *= sh[d];
        for (int t = 0; t < NT; ++t) strides[t][ndim - 1] = ts[t]->stride(d) * int64_t(ts[t]->element_size());
      } else {
        shape[ndim] = sh[d];
        for (int t = 0; t < NT; ++t) strides[t][ndim] = ts[t]->stride(d) * int64_t(ts[t]->element_size());
        ++ndim;
      }
    }
    if (ndim == 0) {  // a scalar, or all dims 1
      shape[0] = 1;
      for (int t = 0; t < NT; ++t) strides[t][0] = 0;
      ndim = 1;
    }
  }

  // Calls inner(char* const ptrs[NT], const int64_t inner_strides[NT], int64_t n) for each run
  // of consecutive elements of the innermost dim within flat range [begin, end).
  template <class Inner>
  void run_range(int64_t begin, int64_t end, const Inner& inner) const {
    if (begin >= end) return;
    int64_t idx[kMaxDimsCpu];
    int64_t rem = begin;
    for (int d = ndim - 1; d >= 0; --d) {
      idx[d] = rem % shape[d];
      rem /= shape[d];
    }
    int64_t inner_strides[NT];
    for (int t = 0; t < NT; ++t) inner_strides[t] = strides[t][ndim - 1];
    const int last = ndim - 1;
    while (begin < end) {
      char* ptrs[NT];
      for (int t = 0; t < NT; ++t) {
        char* p = base[t];
        for (int d = 0; d < ndim; ++d) p += idx[d] * strides[t][d];
        ptrs[t] = p;
      }
      int64_t n = std::min(shape[last] - idx[last], end - begin);
      inner(ptrs, inner_strides, n);
      begin += n;
      idx[last] += n;
      for (int d = last; d > 0 && idx[d] == shape[d]; --d) {
        idx[d] = 0;
        ++idx[d - 1];
      }
    }
  }

  // Runs over all elements, in parallel when there are enough of them.
  template <class Inner>
  void run(const Inner& inner, int64_t grain = kGrainSize) const {
    parallel_for_balanced(0, numel, grain, [&](int64_t b, int64_t e) { run_range(b, e, inner); });
  }
};

}  // namespace mdl::cpu
