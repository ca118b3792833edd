// The windows a pooling output reads, written once for both backends (cpu/pool.cpp, cuda/pool.cu):
// a strided window clipped to the input, and an adaptive pool's window. Below them, the host and
// device logic of the GPU's channels-last kernels and of its max pool backward (cuda/pool.cu),
// here so that tests run it on the CPU: positions counted channels-last, the channel vector a
// thread takes, the reductions over one window, and the gather that routes gradients to winners.
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/host_device.h"

namespace mdl {

// [lo, hi) inside the input; padded counts the window's positions including padding.
struct PoolWindow {
  int64_t lo, hi, padded;
};

// The window of output o: [o * stride - pad, + kernel) clipped to [0, size).
MDL_HOST_DEVICE PoolWindow pool_window(int64_t o, int64_t stride, int64_t pad, int64_t kernel, int64_t size) {
  const int64_t s = o * stride - pad, e = s + kernel < size + pad ? s + kernel : size + pad;
  return {s > 0 ? s : 0, e < size ? e : size, e - s};
}

// Adaptive window of output cell i of n over size: [floor(i size / n), ceil((i + 1) size / n)).
MDL_HOST_DEVICE PoolWindow adaptive_window(int64_t i, int64_t n, int64_t size) {
  const int64_t lo = i * size / n, hi = ((i + 1) * size + n - 1) / n;
  return {lo, hi, hi - lo};
}

// Position (n, c, h, w) of an (N, C, H, W) tensor's element i counted channels-last: c fastest,
// then w, h and n. A channels-last kernel gives thread i this element, so that a warp's threads
// read neighbouring channels of one pixel.
struct PoolPos {
  int64_t n, c, h, w;
};
MDL_HOST_DEVICE PoolPos pool_pos_channels_last(int64_t i, int64_t C, int64_t H, int64_t W) {
  return {i / (C * W * H), i % C, i / (C * W) % H, i / C % W};
}

// Channels one thread of a channels-last pooling kernel takes from a tensor of these sizes and
// strides (in elements of elem_bytes bytes) at this address: a 16-byte vector where channels are
// unit-strided, C is a multiple of the vector and every vector starts 16-byte aligned (the address
// and the byte strides of N, H and W multiples of 16; a dim of size 1 has no stride that counts);
// else 1.
MDL_HOST_DEVICE int64_t pool_channel_vector(const int64_t (&size)[4], const int64_t (&stride)[4], int64_t elem_bytes,
                                            uint64_t address) {
  if (elem_bytes <= 0 || elem_bytes >= 16 || 16 % elem_bytes != 0) return 1;
  const int64_t v = 16 / elem_bytes;
  if (size[1] % v != 0 || stride[1] != 1 || address % 16 != 0) return 1;
  if ((size[0] > 1 && stride[0] * elem_bytes % 16 != 0) || (size[2] > 1 && stride[2] * elem_bytes % 16 != 0) ||
      (size[3] > 1 && stride[3] * elem_bytes % 16 != 0))
    return 1;
  return v;
}

// The max of V channels over one window, in the CPU's order (rows, then columns) and by its rule
// (a NaN wins): best[k] and arg[k], the winner's h * W + w (the window's first position when
// nothing beats -inf). load(h, w, v) fills v[0..V) with the V channels at (h, w), as A.
template <class A, int V, class Load>
MDL_HOST_DEVICE void max_pool_window(const PoolWindow& wh, const PoolWindow& ww, int64_t W, const Load& load,
                                     A (&best)[V], int64_t (&arg)[V]) {
  for (int k = 0; k < V; ++k) best[k] = -A(INFINITY), arg[k] = wh.lo * W + ww.lo;
  for (int64_t h = wh.lo; h < wh.hi; ++h)
    for (int64_t w = ww.lo; w < ww.hi; ++w) {
      A v[V];
      load(h, w, v);
      for (int k = 0; k < V; ++k)
        if (v[k] > best[k] || v[k] != v[k]) best[k] = v[k], arg[k] = h * W + w;
    }
}

// The sums of V channels over one window, in the CPU's order.
template <class A, int V, class Load>
MDL_HOST_DEVICE void sum_pool_window(const PoolWindow& wh, const PoolWindow& ww, const Load& load, A (&sum)[V]) {
  for (int k = 0; k < V; ++k) sum[k] = A(0);
  for (int64_t h = wh.lo; h < wh.hi; ++h)
    for (int64_t w = ww.lo; w < ww.hi; ++w) {
      A v[V];
      load(h, w, v);
      for (int k = 0; k < V; ++k) sum[k] += v[k];
    }
}

// An average pool's divisor: the window's positions, padding included when count_include_pad.
MDL_HOST_DEVICE int64_t pool_divisor(const PoolWindow& wh, const PoolWindow& ww, bool count_include_pad) {
  return count_include_pad ? wh.padded * ww.padded : (wh.hi - wh.lo) * (ww.hi - ww.lo);
}

// The GPU's max pool backward gets the winners (h * W + w in each plane) but not the window
// geometry, so it bounds the windows by the winners. One block takes g planes of one sample:
// channels c0.. of sample n, the block's own group of planes. A line is an output row oh (line oh)
// or an output column ow (line Ho + ow); its span is the rows (or columns) [lo, hi) its winners lie
// in over the g planes, [hi, lo) = [0, size) reversed when it has none.

// Planes one block takes: channels-last, up to 32 neighbouring channels (a warp reads a pixel's
// channels side by side); else whole planes, as many as give `block` threads one element each.
MDL_HOST_DEVICE int64_t max_pool_gather_group(int64_t C, int64_t HW, bool channels_last, int64_t block) {
  const int64_t g = channels_last ? 32 : (HW > 0 ? block / HW : block);
  return g < 1 ? 1 : g < C ? g : C;
}

// Element e of a block's g planes: channels-last, channel fastest; else plane by plane.
MDL_HOST_DEVICE PoolPos max_pool_gather_pos(int64_t e, int64_t n, int64_t c0, int64_t g, int64_t H, int64_t W,
                                            bool channels_last) {
  const int64_t c = channels_last ? e % g : e / (H * W), hw = channels_last ? e / g : e % (H * W);
  return {n, c0 + c, hw / W, hw % W};
}

// The span of line r over outputs first, first + step, ... of its g * length (the caller merges
// the pieces of a strided walk by min and max). winner(c, oh, ow) is output (oh, ow)'s winner in
// channel c; a winner outside [0, H * W) (none the forward writes) is skipped.
template <class Winner>
MDL_HOST_DEVICE void max_pool_line_span(int64_t r, int64_t first, int64_t step, int64_t c0, int64_t g, int64_t H,
                                        int64_t W, int64_t Ho, int64_t Wo, bool channels_last, const Winner& winner,
                                        int32_t& lo, int32_t& hi) {
  const bool row = r < Ho;
  const int64_t length = row ? Wo : Ho, size = row ? H : W;
  lo = int32_t(size), hi = 0;
  for (int64_t k = first; k < g * length; k += step) {
    const int64_t c = channels_last ? k % g : k / length, t = channels_last ? k / g : k % length;
    const int64_t j = winner(c0 + c, row ? r : t, row ? t : r - Ho);
    if (j < 0 || j >= H * W) continue;
    const int32_t v = int32_t(row ? j / W : j % W);
    lo = v < lo ? v : lo;
    hi = v + 1 > hi ? v + 1 : hi;
  }
}

// The spans of lines [0, n) made monotone: hi[i] the largest hi of lines <= i, lo[i] the smallest
// lo of lines >= i. Both widen each span and stay inside the windows, which move monotonically.
MDL_HOST_DEVICE void pool_running_max(int32_t* hi, int64_t n) {
  for (int64_t i = 1; i < n; ++i) hi[i] = hi[i] > hi[i - 1] ? hi[i] : hi[i - 1];
}
MDL_HOST_DEVICE void pool_running_min_from_end(int32_t* lo, int64_t n) {
  for (int64_t i = n - 1; i-- > 0;) lo[i] = lo[i] < lo[i + 1] ? lo[i] : lo[i + 1];
}

// The first i in [0, n) with v[i] > x, n when none; v non-decreasing.
MDL_HOST_DEVICE int64_t pool_first_above(const int32_t* v, int64_t n, int64_t x) {
  int64_t a = 0, b = n;
  while (a < b) {
    const int64_t m = a + (b - a) / 2;
    if (v[m] > x) b = m;
    else a = m + 1;
  }
  return a;
}

// The lines [begin, end) whose monotone spans (lo, hi) hold position x: every line with a winner at
// x among them, in order.
struct PoolLines {
  int64_t begin, end;
};
MDL_HOST_DEVICE PoolLines pool_lines_holding(const int32_t* lo, const int32_t* hi, int64_t n, int64_t x) {
  return {pool_first_above(hi, n, x), pool_first_above(lo, n, x)};
}

// Input element j's gradient: the sum of the gradients of the outputs in rows x columns whose
// winner is j, added in (oh, ow) order as the CPU adds them. winner(oh, ow) and grad(oh, ow) read
// the element's plane.
template <class A, class Winner, class Grad>
MDL_HOST_DEVICE A max_pool_gather(int64_t j, const PoolLines& rows, const PoolLines& cols, const Winner& winner,
                                  const Grad& grad) {
  A s = A(0);
  for (int64_t oh = rows.begin; oh < rows.end; ++oh)
    for (int64_t ow = cols.begin; ow < cols.end; ++ow)
      if (winner(oh, ow) == j) s += grad(oh, ow);
  return s;
}

}  // namespace mdl
