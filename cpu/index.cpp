// CPU kernels for selection and indexing: where, index_select, gather, scatter_add, index_add
// and tril/triu, and check_index, which the ops run on an index before using it. Inputs may have
// any strides; indices are I64 and already range-checked. The accumulating kernels split work
// only over positions that can never collide.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "cpu/kernels.h"
#include "kernels/views.h"
#include "cpu/loops.h"
#include "cpu/select_bits.h"
#include "tensor/grad_mode.h"
#include "switches/list/toggles.h"

namespace mdl::cpu {

namespace {

int64_t index_at(const char* p, int64_t stride_bytes, int64_t i) {
  return *reinterpret_cast<const int64_t*>(p + i * stride_bytes);
}

template <class T>
void add_into(char* dst, const char* src) {
  T& o = *reinterpret_cast<T*>(dst);
  o = T(acc_t<T>(o) + acc_t<T>(*reinterpret_cast<const T*>(src)));
}

// o[i] = c[i] ? x[i * x_step] : y[i], the loop where had before select_bits: the compiler turns the
// data-dependent choice into a branch, which a random mask mispredicts about half the time.
template <class T>
void select_ternary(T* o, const bool* c, const T* x, int64_t x_step, const T* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = c[i] ? x[i * x_step] : y[i];
}

}  // namespace


// out = cond ? a : b, all of out's shape.
void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  if (out.numel() == 0) return;
  StridedLoop<4> loop({&out, &cond, &a, &b});
  const bool branchless = toggles::branchless_select();
  dispatch(out.dtype(), "where", [&]<class T>() {
    loop.run([branchless](char* const* p, const int64_t* s, int64_t n) {
      auto* o = reinterpret_cast<T*>(p[0]);
      auto* c = reinterpret_cast<const bool*>(p[1]);
      auto* x = reinterpret_cast<const T*>(p[2]);
      auto* y = reinterpret_cast<const T*>(p[3]);
      if (s[0] == sizeof(T) && s[1] == 1 && s[3] == sizeof(T) && (s[2] == sizeof(T) || s[2] == 0)) {
        // s[2] == 0: masked_fill, a scalar
        if (branchless) select_bits(o, c, x, s[2] == 0 ? 0 : 1, y, 1, n);
        else select_ternary(o, c, x, s[2] == 0 ? 0 : 1, y, n);
        return;
      }
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<T*>(p[0] + i * s[0]) = *reinterpret_cast<const bool*>(p[1] + i * s[1])
                                                     ? *reinterpret_cast<const T*>(p[2] + i * s[2])
                                                     : *reinterpret_cast<const T*>(p[3] + i * s[3]);
    });
  });
}

// out (.., N, ..) = in (.., S, ..) at rows index (N) along dim. Threads split the flat range
// of (index entry, slice element), so a few huge slices or many tiny ones both spread.
void index_select(const Tensor& out, const Tensor& in, int64_t dim, const Tensor& index) {
  const int64_t n_index = index.numel();
  if (out.numel() == 0) return;
  const Shape slice = kernels::with_size(out.shape(), dim, 1);
  Tensor out_s = kernels::restride(out, slice), in_s = kernels::restride(in, slice);
  const StridedLoop<2> loop({&out_s, &in_s});
  const int64_t m = loop.numel;
  const int64_t es = int64_t(out.element_size());
  const int64_t out_step = out.stride(dim) * es, in_step = in.stride(dim) * es;
  const char* idx = static_cast<const char*>(index.raw_data());
  const int64_t idx_stride = index.dim() ? index.stride(0) * 8 : 0;
  dispatch(out.dtype(), "index_select", [&]<class T>() {
    auto copy = [](char* const* p, const int64_t* s, int64_t n) {
      if (s[0] == sizeof(T) && s[1] == sizeof(T)) {
        std::memcpy(p[0], p[1], size_t(n) * sizeof(T));
        return;
      }
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<T*>(p[0] + i * s[0]) = *reinterpret_cast<const T*>(p[1] + i * s[1]);
    };
    parallel_for(0, n_index * m, kGrainSize, [&](int64_t b, int64_t e) {
      StridedLoop<2> l = loop;
      for (int64_t j = b / m; j * m < e; ++j) {
        l.base[0] = loop.base[0] + j * out_step;
        l.base[1] = loop.base[1] + index_at(idx, idx_stride, j) * in_step;
        l.run_range(std::max(b, j * m) - j * m, std::min(e, (j + 1) * m) - j * m, copy);
      }
    });
  });
}

// out[i..] = in[i.. with coordinate dim replaced by index[i..]]; out and index share a shape.
void gather(const Tensor& out, const Tensor& in, int64_t dim, const Tensor& index) {
  if (out.numel() == 0) return;
  Tensor in_v = kernels::restride(in, index.shape(), dim);
  const StridedLoop<3> loop({&out, &index, &in_v});
  const int64_t in_step = in.stride(dim) * int64_t(in.element_size());
  dispatch(out.dtype(), "gather", [&]<class T>() {
    loop.run([&](char* const* p, const int64_t* s, int64_t n) {
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<T*>(p[0] + i * s[0]) = *reinterpret_cast<const T*>(p[2] + i * s[2] +
                                                                             index_at(p[1], s[1], i) * in_step);
    });
  });
}

// Walks the `len` steps along dim for each element of `loop` (whose operand `op` moves by
// `step` bytes per step), in the order memory prefers: steps innermost when they are the
// shorter stride, else steps outermost over each thread's chunk. Either way each element sees
// its steps in order and threads own disjoint elements, so sums match the serial ones.
// at(ptrs, strides, i, j) handles step j of element i of a run.
template <int NT, class At>
void for_each_step(const StridedLoop<NT>& loop, int op, int64_t step, int64_t len, const At& at) {
  const int64_t grain = std::max<int64_t>(1, kGrainSize / len);
  if (loop.numel == 1 || std::abs(step) <= std::abs(loop.strides[op][loop.ndim - 1])) {
    loop.run(
        [&](char* const* p, const int64_t* s, int64_t n) {
          for (int64_t i = 0; i < n; ++i)
            for (int64_t j = 0; j < len; ++j) at(p, s, i, j);
        },
        grain);
    return;
  }
  parallel_for(0, loop.numel, grain, [&](int64_t b, int64_t e) {
    for (int64_t j = 0; j < len; ++j)
      loop.run_range(b, e, [&](char* const* p, const int64_t* s, int64_t n) {
        for (int64_t i = 0; i < n; ++i) at(p, s, i, j);
      });
  });
}

// out[i.. with coordinate dim replaced by index[i..]] += src[i..], for i over index's shape.
// Two positions collide only if they differ along dim, so threads split the other coordinates.
void scatter_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) {
  if (index.numel() == 0) return;
  const Shape rest = kernels::with_size(index.shape(), dim, 1);
  Tensor out_v = kernels::restride(out, rest), idx_v = kernels::restride(index, rest),
         src_v = kernels::restride(src, rest);
  const StridedLoop<3> loop({&out_v, &idx_v, &src_v});
  const int64_t es = int64_t(out.element_size());
  const int64_t out_step = out.stride(dim) * es, idx_step = index.stride(dim) * 8, src_step = src.stride(dim) * es;
  dispatch(out.dtype(), "scatter_add", [&]<class T>() {
    for_each_step(loop, 1, idx_step, index.size(dim), [&](char* const* p, const int64_t* s, int64_t i, int64_t j) {
      add_into<T>(p[0] + i * s[0] + index_at(p[1] + j * idx_step, s[1], i) * out_step, p[2] + i * s[2] + j * src_step);
    });
  });
}

// out (.., S, ..) row index[j] += src (.., N, ..) row j. Threads split the slice elements, so
// repeated indices accumulate in index order, deterministically. 16-bit floats are summed in f32
// and rounded once (as the GPU's embedding backward does): rounded at every add, 2048 + 1 stays
// 2048 in f16, and a frequent token's gradient would stop growing.
void index_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) {
  const int64_t n_index = index.numel();
  if (src.numel() == 0 || n_index == 0) return;
  if (out.dtype() == kF16 || out.dtype() == kBF16) {
    NoGradGuard no_grad;
    const Tensor sum = out.to(kF32);
    index_add(sum, dim, index, src.to(kF32));
    const_cast<Tensor&>(out).copy_(sum);
    return;
  }
  const Shape slice = kernels::with_size(src.shape(), dim, 1);
  Tensor out_s = kernels::restride(out, slice), src_s = kernels::restride(src, slice);
  const StridedLoop<2> loop({&out_s, &src_s});
  const int64_t es = int64_t(out.element_size());
  const int64_t out_step = out.stride(dim) * es, src_step = src.stride(dim) * es;
  const char* idx = static_cast<const char*>(index.raw_data());
  const int64_t idx_stride = index.dim() ? index.stride(0) * 8 : 0;
  dispatch(out.dtype(), "index_add", [&]<class T>() {
    for_each_step(loop, 1, src_step, n_index, [&](char* const* p, const int64_t* s, int64_t i, int64_t j) {
      add_into<T>(p[0] + i * s[0] + index_at(idx, idx_stride, j) * out_step, p[1] + i * s[1] + j * src_step);
    });
  });
}

// out (..., R, C) = in with the elements below (upper) or above (lower) diagonal k zeroed.
// Threads split the rows; each chunk walks in's leading coordinates like an odometer.
void tri(const Tensor& out, const Tensor& in, int64_t k, bool upper) {
  if (out.numel() == 0) return;
  const int nd = int(in.dim()) - 1;  // leading dims, the row dim last
  MDL_CHECK(nd < kMaxDimsCpu, "tril/triu: tensors of more than ", kMaxDimsCpu, " dims are not supported");
  const int64_t R = in.size(-2), C = in.size(-1), rows = out.numel() / C, col_stride = in.stride(-1);
  k = std::clamp(k, -R - 1, C + 1);  // beyond these every row is all kept or all zero; no overflow
  const Shape& shape = in.shape();
  const Shape& strides = in.strides();
  dispatch(out.dtype(), upper ? "triu" : "tril", [&]<class T>() {
    const T* src = static_cast<const T*>(in.raw_data());
    T* dst = static_cast<T*>(out.raw_data());
    parallel_for(0, rows, std::max<int64_t>(1, kGrainSize / C), [&](int64_t b, int64_t e) {
      int64_t coord[kMaxDimsCpu], off = 0, rem = b;
      for (int d = nd - 1; d >= 0; --d) {
        coord[d] = rem % shape[d];
        rem /= shape[d];
        off += coord[d] * strides[d];
      }
      for (int64_t row = b; row < e; ++row) {
        const int64_t r = row % R;
        // Kept columns: [lo, hi).
        const int64_t lo = upper ? std::clamp(r + k, int64_t(0), C) : 0;
        const int64_t hi = upper ? C : std::clamp(r + k + 1, int64_t(0), C);
        T* o = dst + row * C;
        const T* x = src + off;
        for (int64_t c = 0; c < lo; ++c) o[c] = T{};
        for (int64_t c = lo; c < hi; ++c) o[c] = x[c * col_stride];
        for (int64_t c = hi; c < C; ++c) o[c] = T{};
        for (int d = nd - 1; d >= 0; --d) {
          off += strides[d];
          if (++coord[d] < shape[d]) break;
          off -= coord[d] * strides[d];
          coord[d] = 0;
        }
      }
    });
  });
}

// Every value of index in range (or the ignored one), else the mdl::Error at once.
void check_index(const Tensor& index, const kernels::IndexCheck& c) {
  MDL_CHECK(index.dtype() == kI64 && index.is_contiguous(), c.op, ": check_index needs a contiguous I64 index, got ",
            index.dtype());
  const int64_t* v = index.data_ptr<int64_t>();
  for (int64_t i = 0, n = index.numel(); i < n; ++i) {
    if (c.has_ignore && v[i] == c.ignore) continue;
    if (v[i] < 0 || v[i] >= c.size) kernels::fail_index_check(c, v[i]);
  }
}

}  // namespace mdl::cpu
