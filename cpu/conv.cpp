// CPU convolution by im2col + GEMM: per group, the forward, the weight gradient and the input
// gradient are each one GEMM against a column matrix unfolded from a chunk of the batch; threads
// split the batch when it is large enough, else share each GEMM. Depthwise convs go direct
// (cpu/depthwise.cpp), and so do stride-1 f32 and bf16 convs (cpu/conv_direct.cpp; those with more
// than 1 MiB of weights a group only for the weight gradient, direct_conv_weights_fit). bf16 convs the
// direct kernel does not take are unfolded here into bf16 columns, which the bf16 GEMM (gemm_bf16)
// multiplies as they are, each result summed in f32 and rounded once; depthwise ones run on f32
// copies.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <type_traits>
#include <vector>

#include "cpu/kernels.h"
#include "cpu/block_rows.h"
#include "cpu/gemm.h"
#include "kernels/conv.h"
#include "kernels/views.h"
#include "cpu/conv.h"
#include "cpu/conv_direct.h"
#include "cpu/conv_operand.h"
#include "cpu/scratch.h"
#include "cpu/small_planes.h"
#include "tensor/half.h"
#include "tensor/parallel.h"
#include "switches/list/toggles.h"

namespace mdl::cpu {

namespace {

// bf16_values: the operands hold bf16 values (Conv2dParams::bf16_values), which AMX multiplies exactly.
void gemm(bool bf16_values, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t rsa, int64_t csa,
          const float* B, int64_t rsb, int64_t csb, float beta, float* C, int64_t rsc, int64_t csc) {
  if (bf16_values) gemm_f32_bf16_values(M, N, K, alpha, A, rsa, csa, B, rsb, csb, beta, C, rsc, csc);
  else gemm_f32(M, N, K, alpha, A, rsa, csa, B, rsb, csb, beta, C, rsc, csc);
}
void gemm(bool, int64_t M, int64_t N, int64_t K, float alpha, const BFloat16* A, int64_t rsa, int64_t csa,
          const BFloat16* B, int64_t rsb, int64_t csb, float beta, float* C, int64_t rsc, int64_t csc) {
  gemm_bf16(M, N, K, alpha, A, rsa, csa, B, rsb, csb, beta, C, rsc, csc);
}
void gemm(bool, int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t rsa, int64_t csa,
          const double* B, int64_t rsb, int64_t csb, double beta, double* C, int64_t rsc, int64_t csc) {
  gemm_f64(M, N, K, alpha, A, rsa, csa, B, rsb, csb, beta, C, rsc, csc);
}

struct Geom {
  int64_t N, C, H, W, Cout, kh, kw, Ho, Wo, G, Cig, Cog, Kg, P;
  kernels::Conv2dParams p;
  int64_t xs[4];  // x's strides (elements)

  Geom(const Tensor& x, const Tensor& w, const Tensor& out_like, const kernels::Conv2dParams& prm)
      : N(x.size(0)), C(x.size(1)), H(x.size(2)), W(x.size(3)), Cout(w.size(0)), kh(w.size(2)), kw(w.size(3)),
        Ho(out_like.size(2)), Wo(out_like.size(3)), G(prm.groups), Cig(C / prm.groups), Cog(w.size(0) / prm.groups),
        Kg(Cig * kh * kw), P(Ho * Wo), p(prm) {
    for (int d = 0; d < 4; ++d) xs[d] = x.stride(d);
  }
};

// The outputs o in [0, n) whose input position o * stride + off falls inside [0, size).
struct Range {
  int64_t lo, hi;
};
Range valid_range(int64_t off, int64_t stride, int64_t size, int64_t n) {
  auto ceil_div_pos = [](int64_t a, int64_t b) { return a <= 0 ? int64_t(0) : (a + b - 1) / b; };
  int64_t hi = std::min(n, ceil_div_pos(size - off, stride));
  int64_t lo = std::min(hi, ceil_div_pos(-off, stride));
  return {lo, hi};
}

// A chunk of the batch: samples [n0, n0 + B) whole (p0 = 0, len = P), or, for a map too large to
// unfold at once, pixels [p0, p0 + len) of one sample (B = 1). Its columns are (b, pixel).
struct Chunk {
  int64_t n0, B, p0, len;
};

// Calls f(b, oh, ow0, ow1, q) for each run of the chunk's pixels along one output row: row oh of
// sample b, columns [ow0, ow1), the first at column q of the chunk.
template <class F>
void for_each_run(const Geom& g, const Chunk& ch, const F& f) {
  if (ch.p0 == 0 && ch.len == g.P) {  // whole samples: every run is a whole row (no division per run)
    for (int64_t b = 0; b < ch.B; ++b)
      for (int64_t oh = 0; oh < g.Ho; ++oh) f(b, oh, int64_t(0), g.Wo, b * g.P + oh * g.Wo);
    return;
  }
  for (int64_t b = 0; b < ch.B; ++b)
    for (int64_t p = ch.p0, q = b * ch.len; p < ch.p0 + ch.len;) {
      const int64_t oh = p / g.Wo, ow0 = p % g.Wo, ow1 = std::min(g.Wo, ow0 + ch.p0 + ch.len - p);
      f(b, oh, ow0, ow1, q);
      p += ow1 - ow0;
      q += ow1 - ow0;
    }
}

// col (Kg, B*len) for the chunk, group grp: row (c, ki, kj), column (b, pixel); x of any
// floating storage S (bf16 widened as it is read).
template <class S, class T>
void im2col(const Geom& g, const S* x, const Chunk& ch, int64_t grp, T* col) {
  const int64_t BP = ch.B * ch.len, kk = g.kh * g.kw;
  parallel_for(0, g.Kg, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(BP, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t c = r / kk, ki = (r / g.kw) % g.kh, kj = r % g.kw;
      const int64_t offw = kj * g.p.dil_w - g.p.pad_w, sw = g.p.stride_w, s3 = g.xs[3];
      const Range rw = valid_range(offw, sw, g.W, g.Wo);
      for_each_run(g, ch, [&](int64_t b, int64_t oh, int64_t ow0, int64_t ow1, int64_t q) {
        T* dst = col + r * BP + q - ow0;  // dst[ow] for ow in [ow0, ow1)
        const int64_t ih = oh * g.p.stride_h - g.p.pad_h + ki * g.p.dil_h;
        if (ih < 0 || ih >= g.H) {
          std::fill(dst + ow0, dst + ow1, T(0.0f));
          return;
        }
        const S* src = x + (ch.n0 + b) * g.xs[0] + (grp * g.Cig + c) * g.xs[1] + ih * g.xs[2];
        const int64_t lo = std::clamp(rw.lo, ow0, ow1), hi = std::clamp(rw.hi, lo, ow1);
        std::fill(dst + ow0, dst + lo, T(0.0f));
        bool copied = false;
        if constexpr (std::is_same_v<S, T>) {
          copied = sw == 1 && s3 == 1;
          if (copied) std::memcpy(dst + lo, src + lo + offw, size_t(hi - lo) * sizeof(T));
        }
        if (!copied && sw == 2 && s3 == 1) {  // a constant stride, which the vectoriser takes
          const S* s2 = src + offw;
          for (int64_t ow = lo; ow < hi; ++ow) dst[ow] = T(s2[2 * ow]);
        } else if (!copied) {
          for (int64_t ow = lo; ow < hi; ++ow) dst[ow] = T(src[(ow * sw + offw) * s3]);
        }
        std::fill(dst + hi, dst + ow1, T(0.0f));
      });
    }
  });
}

// dst's rows (dst_stride apart) = or += src's rows (src_stride apart), n values each: 16-bit values
// and floats through cpu/block_rows.h, the rest by loops. Copies of a few elements stay inline loops
// (GCC would otherwise call memcpy and memset for each 4-pixel run, which on 4x4 maps cost as much
// as the unfolding itself).
#if defined(__GNUC__) && !defined(__clang__)
#define MDL_NO_LOOP_CALLS __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define MDL_NO_LOOP_CALLS
#endif
template <class S>
MDL_NO_LOOP_CALLS void copy_rows(S* dst, int64_t dst_stride, const S* src, int64_t src_stride, int64_t rows,
                                 int64_t n) {
  if constexpr (std::is_same_v<S, uint16_t>) return copy_block_u16(dst, dst_stride, src, src_stride, rows, n);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) dst[r * dst_stride + j] = src[r * src_stride + j];
}
template <class T>
MDL_NO_LOOP_CALLS void add_rows(T* dst, int64_t dst_stride, const T* src, int64_t src_stride, int64_t rows, int64_t n) {
  if constexpr (std::is_same_v<T, float>) return add_block_f32(dst, dst_stride, src, src_stride, rows, n);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) dst[r * dst_stride + j] += src[r * src_stride + j];
}

SmallPlaneGeom small_plane_geom(const Geom& g) {
  return {g.H, g.W, g.kh, g.kw, g.Ho, g.Wo, g.p.pad_h, g.p.pad_w, g.p.stride_h, g.p.stride_w};
}

// dst's rows (dst_stride apart) = every `step`-th value (1 or 2) of src's rows (src_stride apart), n each.
template <class S>
MDL_NO_LOOP_CALLS void copy_rows_stepped(S* dst, int64_t dst_stride, const S* src, int64_t src_stride, int64_t step,
                                         int64_t rows, int64_t n) {
  if (step == 1) return copy_rows(dst, dst_stride, src, src_stride, rows, n);
  if constexpr (std::is_same_v<S, uint16_t>) return copy_block_u16_even(dst, dst_stride, src, src_stride, rows, n);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) dst[r * dst_stride + j] = src[r * src_stride + 2 * j];
}

// im2col for whole samples at stride 1 or 2 and dilation 1 (the convs of 1 MiB of weights and more
// on small maps, the bf16 convs AMX multiplies, and the strided convs that halve a map): each
// (sample, channel) plane is zero-padded once into a small buffer, and each of its kh*kw rows of col
// copies Ho runs of Wo from it (every other value at stride 2), with no bounds to test. bf16 and
// f16 planes are copied as their bits.
template <class S>
MDL_NO_LOOP_CALLS void im2col_padded(const Geom& g, const S* x, const Chunk& ch, int64_t grp, S* col) {
  if constexpr (std::is_class_v<S>) {
    static_assert(sizeof(S) == sizeof(uint16_t));
    return im2col_padded(g, reinterpret_cast<const uint16_t*>(x), ch, grp, reinterpret_cast<uint16_t*>(col));
  }
  const int64_t sh = g.p.stride_h, sw = g.p.stride_w;
  const int64_t BP = ch.B * ch.len, kk = g.kh * g.kw, Hp = (g.Ho - 1) * sh + g.kh, Wp = (g.Wo - 1) * sw + g.kw;
  const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(BP * kk, 1));
  if constexpr (std::is_same_v<S, uint16_t>) {
    const SmallPlaneGeom sp = small_plane_geom(g);
    if (fits_small_planes(sp) && g.xs[3] == 1 && g.xs[2] == g.W)  // each plane in one vector
      return parallel_for(0, g.Cig, grain, [&](int64_t c0, int64_t c1) {
        for (int64_t c = c0; c < c1; ++c)
          unfold_small_planes_u16(sp, x + ch.n0 * g.xs[0] + (grp * g.Cig + c) * g.xs[1], g.xs[0], ch.B,
                                  col + c * kk * BP, BP, g.P);
      });
  }
  parallel_for(0, g.Cig, grain, [&](int64_t c0, int64_t c1) {
    // no padding around rows of unit stride: the taps read the input's planes where they lie
    const bool in_place = g.p.pad_h == 0 && g.p.pad_w == 0 && g.xs[3] == 1;
    Scratch<S> padded(in_place ? 0 : Hp * Wp);
    S* pp = padded.data();
    for (int64_t c = c0; c < c1; ++c)
      for (int64_t b = 0; b < ch.B; ++b) {
        const S* src = x + (ch.n0 + b) * g.xs[0] + (grp * g.Cig + c) * g.xs[1];
        if (in_place) {
          for (int64_t ki = 0; ki < g.kh; ++ki)
            for (int64_t kj = 0; kj < g.kw; ++kj)
              copy_rows_stepped(col + (c * kk + ki * g.kw + kj) * BP + b * g.P, g.Wo, src + ki * g.xs[2] + kj,
                                sh * g.xs[2], sw, g.Ho, g.Wo);
          continue;
        }
        for (int64_t i = 0; i < Hp * Wp; ++i) pp[i] = S(0.0f);
        const int64_t rows = std::min(g.H, Hp - g.p.pad_h), cols = std::min(g.W, Wp - g.p.pad_w);
        S* interior = pp + g.p.pad_h * Wp + g.p.pad_w;
        if (g.xs[3] == 1) copy_rows(interior, Wp, src, g.xs[2], rows, cols);
        else
          for (int64_t ih = 0; ih < rows; ++ih)
            for (int64_t iw = 0; iw < cols; ++iw) interior[ih * Wp + iw] = src[ih * g.xs[2] + iw * g.xs[3]];
        for (int64_t ki = 0; ki < g.kh; ++ki)
          for (int64_t kj = 0; kj < g.kw; ++kj)
            copy_rows_stepped(col + (c * kk + ki * g.kw + kj) * BP + b * g.P, g.Wo, pp + ki * Wp + kj, sh * Wp, sw,
                              g.Ho, g.Wo);
      }
  });
}

// col2im for the same chunks, the other way: each (sample, channel) plane gathers its kh*kw rows of
// col, f32 ones in registers (fold_plane_f32, stride 1 or 2), the rest (stride 1) into a zeroed
// padded buffer whose interior is then added to dx.
template <class T>
MDL_NO_LOOP_CALLS void col2im_padded(const Geom& g, const T* col, const Chunk& ch, int64_t grp, T* dx) {
  const int64_t BP = ch.B * ch.len, kk = g.kh * g.kw, Hp = g.Ho + g.kh - 1, Wp = g.Wo + g.kw - 1;
  parallel_for(0, g.Cig, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(BP * kk, 1)), [&](int64_t c0, int64_t c1) {
    if constexpr (std::is_same_v<T, float>) {
      const SmallPlaneGeom sp = small_plane_geom(g);
      if (fits_small_planes(sp)) {  // each plane in one vector
        for (int64_t c = c0; c < c1; ++c)
          fold_small_planes_f32(sp, col + c * kk * BP, BP, g.P, ch.B, dx + (ch.n0 * g.C + grp * g.Cig + c) * g.H * g.W,
                                g.C * g.H * g.W);
        return;
      }
      for (int64_t c = c0; c < c1; ++c)
        for (int64_t b = 0; b < ch.B; ++b)
          fold_plane_f32(dx + ((ch.n0 + b) * g.C + grp * g.Cig + c) * g.H * g.W, g.H, g.W, col + c * kk * BP + b * g.P,
                         BP, g.kh, g.kw, g.Ho, g.Wo, g.p.pad_h, g.p.pad_w, g.p.stride_h, g.p.stride_w);
      return;
    }
    Scratch<T> padded(Hp * Wp);  // f64
    T* pp = padded.data();
    for (int64_t c = c0; c < c1; ++c)
      for (int64_t b = 0; b < ch.B; ++b) {
        for (int64_t i = 0; i < Hp * Wp; ++i) pp[i] = T(0);
        for (int64_t ki = 0; ki < g.kh; ++ki)
          for (int64_t kj = 0; kj < g.kw; ++kj)
            add_rows(pp + ki * Wp + kj, Wp, col + (c * kk + ki * g.kw + kj) * BP + b * g.P, g.Wo, g.Ho, g.Wo);
        T* d = dx + ((ch.n0 + b) * g.C + grp * g.Cig + c) * g.H * g.W;
        const int64_t rows = std::min(g.H, Hp - g.p.pad_h), cols = std::min(g.W, Wp - g.p.pad_w);
        add_rows(d, g.W, pp + g.p.pad_h * Wp + g.p.pad_w, Wp, rows, cols);
      }
  });
}

// Whether a chunk's columns go through the padded planes: whole samples of small maps, dilation 1,
// stride 1, or 2 for output rows of 16 and more (folded back through them at stride 2 only in f32, by
// fold_plane_f32). Shorter rows (ResNet-18's downsampling convs to 8x8 and 4x4 maps) measured as fast
// or faster value by value, forward and backward.
bool padded_unfold(const Geom& g, const Chunk& ch) {
  const bool stride_1 = g.p.stride_h == 1 && g.p.stride_w == 1;
  const bool stride_2 = (g.p.stride_h == 1 || g.p.stride_h == 2) && (g.p.stride_w == 1 || g.p.stride_w == 2) &&
                        g.Wo >= 16;
  return ch.p0 == 0 && ch.len == g.P && (stride_1 || stride_2) && g.p.dil_h == 1 && g.p.dil_w == 1 && g.P <= 256;
}
template <class T>
bool padded_fold(const Geom& g, const Chunk& ch) {
  return padded_unfold(g, ch) && (std::is_same_v<T, float> || (g.p.stride_h == 1 && g.p.stride_w == 1));
}

// The columns of the chunk, by im2col_padded where it applies.
template <class S>
void unfold(const Geom& g, const S* x, const Chunk& ch, int64_t grp, S* col) {
  if (padded_unfold(g, ch)) return im2col_padded(g, x, ch, grp, col);
  im2col(g, x, ch, grp, col);
}

// dx (N, C, H, W contiguous) += col2im(col (Kg, B*len)) for the chunk, group grp.
// Threads split the channels, so no two write the same element.
template <class T>
void col2im(const Geom& g, const T* col, const Chunk& ch, int64_t grp, T* dx) {
  const int64_t BP = ch.B * ch.len, kk = g.kh * g.kw;
  parallel_for(0, g.Cig, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(BP * kk, 1)), [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c)
      for (int64_t k = 0; k < kk; ++k) {
        const int64_t ki = k / g.kw, kj = k % g.kw;
        const int64_t offw = kj * g.p.dil_w - g.p.pad_w, sw = g.p.stride_w;
        const Range rw = valid_range(offw, sw, g.W, g.Wo);
        const T* row = col + (c * kk + k) * BP;
        for_each_run(g, ch, [&](int64_t b, int64_t oh, int64_t ow0, int64_t ow1, int64_t q) {
          const int64_t ih = oh * g.p.stride_h - g.p.pad_h + ki * g.p.dil_h;
          if (ih < 0 || ih >= g.H) return;
          const T* src = row + q - ow0;
          T* d = dx + ((ch.n0 + b) * g.C + grp * g.Cig + c) * g.H * g.W + ih * g.W + offw;
          const int64_t lo = std::clamp(rw.lo, ow0, ow1), hi = std::clamp(rw.hi, lo, ow1);
          if (sw == 2) {  // a constant stride, which the vectoriser takes
            for (int64_t ow = lo; ow < hi; ++ow) d[2 * ow] += src[ow];
          } else {
            for (int64_t ow = lo; ow < hi; ++ow) d[ow * sw] += src[ow];
          }
        });
      }
  });
}

// How the batch is cut: per-thread slices when there are enough samples, and chunks whose
// columns stay near kChunkCols wide and under kMaxColElems elements (2 MiB of f32), or under the
// group's weights where those are larger (each chunk's GEMM packs all of them: ResNet's 512-channel
// convs over 4x4 and 8x8 maps ran 1.2-1.6x faster in chunks of 16 samples than of 7). Maps of 512
// pixels or more go one sample at a time, which measured as fast as wider chunks; smaller maps
// are batched so that each GEMM stays wide and reads the weights once; a sample whose columns
// exceed kMaxColElems is cut into pixel tiles of at least kMinTile.
constexpr int64_t kChunkCols = 512;
constexpr int64_t kMaxColElems = int64_t(1) << 19;
constexpr int64_t kMinTile = 256;

struct Plan {
  bool batch_parallel;
  int threads;
  int64_t chunk;  // samples per chunk
  int64_t tile;   // pixels per chunk when chunk == 1 (P when the sample fits)
  int64_t cols() const { return chunk > 1 ? chunk * tile : tile; }
};

Plan plan(const Geom& g) {
  const int nt = get_num_threads();
  const bool bp = nt > 1 && !in_parallel_region() && g.N >= nt && (g.N % nt == 0 || g.N >= 4 * nt);
  const int64_t per_thread = bp ? (g.N + nt - 1) / nt : g.N;
  const int64_t P = std::max<int64_t>(g.P, 1);
  int64_t chunk = std::max<int64_t>(1, kChunkCols / P);
  chunk = std::min(chunk, std::max<int64_t>(1, std::max(kMaxColElems, g.Cog * g.Kg) / (g.Kg * P)));
  chunk = std::max<int64_t>(1, std::min(chunk, per_thread));
  const int64_t tile = g.Kg * P <= kMaxColElems ? P : std::min(P, std::max(kMinTile, kMaxColElems / g.Kg));
  return {bp, bp ? nt : 1, chunk, tile};
}

// Calls body(chunk, tid) for each chunk of the batch, per the plan.
template <class F>
void for_each_chunk(const Geom& g, const Plan& pl, const F& body) {
  auto run = [&](int64_t b0, int64_t b1) {
    const int tid = pl.batch_parallel ? thread_index() : 0;
    for (int64_t n0 = b0; n0 < b1; n0 += pl.chunk) {
      const int64_t B = std::min(pl.chunk, b1 - n0);
      if (B > 1 || pl.tile == g.P) body(Chunk{n0, B, 0, g.P}, tid);
      else
        for (int64_t p0 = 0; p0 < g.P; p0 += pl.tile) body(Chunk{n0, 1, p0, std::min(pl.tile, g.P - p0)}, tid);
    }
  };
  if (pl.batch_parallel) parallel_for(0, g.N, 1, run);
  else run(0, g.N);
}

// With col (Kg, B*len) unfolded from a chunk, Kg = Cin/G * kH * kW, and dout the chunk's gradient:
//   forward       out_g  (Cog, B*len) = w_g (Cog, Kg) @ col_g
//   grad weight   dw_g   (Cog, Kg)   += dout_g @ col_g^T   (rows of C contiguous: the micro-kernel
//                 stores a tile's rows as vectors, where dw^T (Kg, Cog) had it store each float Kg apart)
//   grad input    dcol_g (Kg, B*len)  = w_g^T (Kg, Cog) @ dout_g, folded back into dx by col2im
// When threads split the batch, each has its own buffers and single-threaded GEMMs, and the
// partial weight gradients are summed in thread order. T computes; S stores x, w, the output and
// the gradients, and the columns and gathered output gradients are S too: T, or bf16 (with T = f32:
// bf16 columns multiplied by gemm_bf16, every result summed in f32 and rounded once).
template <class T, class S>
void forward_impl(const Tensor& out, const Tensor& x, const Tensor& w_, const Tensor& b_, const Geom& g) {
  constexpr bool kSame = std::is_same_v<S, T>;
  static_assert(kSame || std::is_same_v<T, float>);
  const Tensor w = kernels::contiguous(w_), b = b_.defined() ? kernels::contiguous(b_) : b_;
  const S* xp = static_cast<const S*>(x.raw_data());
  const S* wp = w.data_ptr<S>();
  Scratch<float> b_store;
  const T* bp = nullptr;
  if constexpr (kSame) bp = b.defined() ? b.data_ptr<T>() : nullptr;
  else bp = b.defined() ? float_values(b, b_store) : nullptr;
  S* op = out.data_ptr<S>();
  const Plan pl = plan(g);
  const int64_t cols = pl.cols();
  Scratch<S> colbuf(pl.threads * g.Kg * cols);
  Scratch<T> tmp(pl.chunk > 1 || !kSame ? pl.threads * g.Cog * cols : 0);
  for_each_chunk(g, pl, [&](const Chunk& ch, int tid) {
    const int64_t BP = ch.B * ch.len;
    S* col = colbuf.data() + tid * g.Kg * cols;
    for (int64_t grp = 0; grp < g.G; ++grp) {
      unfold(g, xp, ch, grp, col);
      const S* wg = wp + grp * g.Cog * g.Kg;
      if constexpr (kSame) {
        if (ch.B == 1) {  // one sample (or tile): the product lands in out directly
          T* o = op + (ch.n0 * g.Cout + grp * g.Cog) * g.P + ch.p0;
          gemm(g.p.bf16_values, g.Cog, BP, g.Kg, T(1), wg, g.Kg, 1, col, BP, 1, T(0), o, g.P, 1);
          if (bp)
            for (int64_t co = 0; co < g.Cog; ++co)
              for (int64_t q = 0; q < BP; ++q) o[co * g.P + q] += bp[grp * g.Cog + co];
          continue;
        }
      }
      // (Cog, B*len), scattered to (B, Cog, len) with the bias, rounded once into S.
      T* t = tmp.data() + tid * g.Cog * cols;
      gemm(g.p.bf16_values, g.Cog, BP, g.Kg, T(1), wg, g.Kg, 1, col, BP, 1, T(0), t, BP, 1);
      for (int64_t bb = 0; bb < ch.B; ++bb)
        for (int64_t co = 0; co < g.Cog; ++co) {
          S* o = op + ((ch.n0 + bb) * g.Cout + grp * g.Cog + co) * g.P + ch.p0;
          T* src = t + co * BP + bb * ch.len;
          const T bias = bp ? bp[grp * g.Cog + co] : T(0);
          if constexpr (kSame) {
            for (int64_t q = 0; q < ch.len; ++q) o[q] = src[q] + bias;
          } else {  // bf16: the bias added in f32, each row rounded by the bulk conversion
            for (int64_t q = 0; q < ch.len; ++q) src[q] += bias;
            from_f32(src, o, ch.len);
          }
        }
    }
  });
}

template <class T, class S>
void backward_impl(const Tensor& gx, const Tensor& gw, const Tensor& gb, const Tensor& go_, const Tensor& x,
                   const Tensor& w_, const Geom& g) {
  constexpr bool kSame = std::is_same_v<S, T>;
  static_assert(kSame || std::is_same_v<T, float>);
  const Tensor go = kernels::contiguous(go_), w = kernels::contiguous(w_);
  const S* gop = go.data_ptr<S>();
  const S* xp = static_cast<const S*>(x.raw_data());
  const S* wp = w.data_ptr<S>();
  const int64_t wn = g.Cout * g.Kg;
  // The gradients in T: in place, or (bf16 storage) in float buffers rounded into them at the end.
  Scratch<float> gx_store, gw_store;
  T *gxp = nullptr, *gwp = nullptr;
  if constexpr (kSame) {
    gxp = gx.defined() ? gx.data_ptr<T>() : nullptr;
    gwp = gw.defined() ? gw.data_ptr<T>() : nullptr;
  } else {
    if (gx.defined()) gx_store.resize(gx.numel()), gxp = gx_store.data();
    if (gw.defined()) gw_store.resize(wn), gwp = gw_store.data();
  }
  const Plan pl = plan(g);
  const int64_t cols = pl.cols();
  // The columns (S) unfolded for the weight gradient; the input gradient's columns (T) in the same
  // buffer when S is T, else in their own.
  Scratch<S> colbuf(gwp || (kSame && gxp) ? pl.threads * g.Kg * cols : 0);
  Scratch<T> dcolbuf(!kSame && gxp ? pl.threads * g.Kg * cols : 0);
  Scratch<S> douts(pl.chunk > 1 ? pl.threads * g.Cout * cols : 0);
  // Weight gradients: straight into gw when one thread walks the batch, else per-thread partials,
  // each thread's first chunk storing its products (no zeroed buffer to add them to).
  Scratch<T> dw_parts(gwp && pl.batch_parallel ? pl.threads * wn : 0);
  std::vector<uint8_t> dw_started(size_t(pl.threads), 0);
  std::vector<double> db_parts(size_t(gb.defined() ? pl.threads * g.Cout : 0), 0.0);

  for_each_chunk(g, pl, [&](const Chunk& ch, int tid) {
    const int64_t BP = ch.B * ch.len, n0 = ch.n0;
    if (gxp && ch.p0 == 0) std::fill(gxp + n0 * g.C * g.H * g.W, gxp + (n0 + ch.B) * g.C * g.H * g.W, T(0));
    // dout (Cout, B*len) with row stride ld: in place when B == 1, else gathered.
    const S* d = gop + n0 * g.Cout * g.P + ch.p0;
    int64_t ld = g.P;
    if (ch.B > 1) {
      S* buf = douts.data() + tid * g.Cout * cols;
      for (int64_t bb = 0; bb < ch.B; ++bb)
        for (int64_t co = 0; co < g.Cout; ++co)
          std::memcpy(buf + co * BP + bb * ch.len, gop + ((n0 + bb) * g.Cout + co) * g.P + ch.p0,
                      size_t(ch.len) * sizeof(S));
      d = buf;
      ld = BP;
    }
    if (!db_parts.empty()) {
      double* db = db_parts.data() + tid * g.Cout;
      for (int64_t co = 0; co < g.Cout; ++co) {  // in vector lanes: one running sum waits on every add
        T s = T(0);
#pragma omp simd reduction(+ : s)
        for (int64_t q = 0; q < BP; ++q) s += T(d[co * ld + q]);
        db[co] += double(s);
      }
    }
    S* col = colbuf.empty() ? nullptr : colbuf.data() + tid * g.Kg * cols;
    T* dcol = nullptr;
    if constexpr (kSame) dcol = col;
    else dcol = dcolbuf.empty() ? nullptr : dcolbuf.data() + tid * g.Kg * cols;
    T* dw = gwp ? (pl.batch_parallel ? dw_parts.data() + tid * wn : gwp) : nullptr;
    const T dw_beta = dw_started[size_t(tid)] ? T(1) : T(0);
    dw_started[size_t(tid)] = 1;
    for (int64_t grp = 0; grp < g.G; ++grp) {
      const S* dg = d + grp * g.Cog * ld;
      if (dw) {
        unfold(g, xp, ch, grp, col);
        gemm(g.p.bf16_values, g.Cog, g.Kg, BP, T(1), dg, ld, 1, col, 1, BP, dw_beta, dw + grp * g.Cog * g.Kg, g.Kg, 1);
      }
      if (gxp) {
        gemm(g.p.bf16_values, g.Kg, BP, g.Cog, T(1), wp + grp * g.Cog * g.Kg, 1, g.Kg, dg, ld, 1, T(0), dcol, BP, 1);
        if (padded_fold<T>(g, ch)) col2im_padded(g, dcol, ch, grp, gxp);
        else col2im(g, dcol, ch, grp, gxp);
      }
    }
  });

  // The partials summed in thread order, on the threads, and (bf16 storage) rounded into gw there
  // from a block in L1.
  if (gwp && pl.batch_parallel) {
    std::vector<const T*> parts;
    for (int t = 0; t < pl.threads; ++t)
      if (dw_started[size_t(t)]) parts.push_back(dw_parts.data() + t * wn);
    constexpr int64_t kBlock = 1024;
    parallel_for(0, wn, kGrainSize, [&](int64_t i0, int64_t i1) {
      T block[kBlock];
      for (int64_t b0 = i0; b0 < i1; b0 += kBlock) {
        const int64_t n = std::min(kBlock, i1 - b0);
        T* sums = kSame ? gwp + b0 : block;
        for (int64_t i = 0; i < n; ++i) {
          T s = parts.empty() ? T(0) : parts[0][b0 + i];
          for (size_t t = 1; t < parts.size(); ++t) s += parts[t][b0 + i];
          sums[i] = s;
        }
        if constexpr (!kSame) {
          if (gw.dtype() == kBF16) f32_to_bf16(block, gw.data_ptr<BFloat16>() + b0, n);
          else std::memcpy(gw.data_ptr<float>() + b0, block, size_t(n) * sizeof(float));
        }
      }
    });
  } else if (gwp && !dw_started[0]) {
    std::fill(gwp, gwp + wn, T(0));
  }
  if (gb.defined()) {
    std::vector<T> sums(static_cast<size_t>(g.Cout));
    for (int64_t co = 0; co < g.Cout; ++co) {
      double s = 0;
      for (int t = 0; t < pl.threads; ++t) s += db_parts[size_t(t * g.Cout + co)];
      sums[size_t(co)] = T(s);
    }
    if constexpr (kSame) std::copy(sums.begin(), sums.end(), gb.data_ptr<T>());
    else write_floats(sums.data(), gb);
  }
  if constexpr (!kSame) {
    if (gx.defined()) write_floats(gx_store.data(), gx);
    if (gw.defined() && !pl.batch_parallel) write_floats(gw_store.data(), gw);
  }
}

// One input channel per group (depthwise, and also Cin == 1): the direct kernel, which
// bench_conv measured faster than im2col there, unless switched off.
bool use_depthwise(const Tensor& x, const kernels::Conv2dParams& p) {
  return toggles::depthwise_direct() && p.groups == x.size(1);
}

// An f32 copy of a bf16 tensor (t itself otherwise), and an f32 tensor of t's shape to compute a
// bf16 result in (t itself otherwise); undefined for undefined.
Tensor widened(const Tensor& t) {
  if (!t.defined() || t.dtype() != kBF16) return t;
  Tensor f = make_tensor(t.shape(), kF32, t.device());
  if (f.numel()) kernels::copy(t.device(), f, t);
  return f;
}
Tensor f32_target(const Tensor& t) {
  return !t.defined() || t.dtype() != kBF16 ? t : make_tensor(t.shape(), kF32, t.device());
}

// bf16 operands hold bf16 values: a bf16 kernel may multiply them exactly.
kernels::Conv2dParams with_bf16_values(kernels::Conv2dParams p, const Tensor& x, const Tensor& w) {
  p.bf16_values = p.bf16_values || (x.dtype() == kBF16 && w.dtype() == kBF16);
  return p;
}

}  // namespace


// out (N, Cout, Ho, Wo), written through a contiguous copy when channels-last; x (N, Cin, H, W)
// any strides; w (Cout, Cin/G, kH, kW).
void conv2d_forward(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& b,
                    const kernels::Conv2dParams& p_) {
  if (out.numel() == 0) return;
  if (!out.is_contiguous()) {
    const Tensor target = kernels::contiguous_target(out);
    conv2d_forward(target, x, w, b, p_);
    return kernels::copy_from_target(out, target);
  }
  const kernels::Conv2dParams p = with_bf16_values(p_, x, w);
  if (direct_conv_applies(x, w, p) && direct_conv_weights_fit(w, p)) return direct_conv2d_forward(out, x, w, b, p);
  if (x.dtype() == kBF16 && w.dtype() == kBF16 && out.dtype() == kBF16 && !use_depthwise(x, p))
    return forward_impl<float, BFloat16>(out, x, w, b, Geom(x, w, out, p));
  if (x.dtype() == kBF16) {
    const Tensor target = f32_target(out);
    conv2d_forward(target, widened(x), widened(w), widened(b), p);
    return kernels::copy_from_target(out, target);
  }
  if (use_depthwise(x, p)) return depthwise_conv2d_forward(out, x, w, b, p);
  const Geom g(x, w, out, p);
  dispatch_floating(out.dtype(), "conv2d", [&]<class T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) forward_impl<T, T>(out, x, w, b, g);
    else MDL_FAIL("conv2d: the CPU kernel takes f32 or f64, got ", out.dtype());
  });
}

void conv2d_backward(const Tensor& gx, const Tensor& gw, const Tensor& gb, const Tensor& go, const Tensor& x,
                     const Tensor& w, const kernels::Conv2dParams& p_) {
  const kernels::Conv2dParams p = with_bf16_values(p_, x, w);
  if ((gx.defined() && !gx.is_contiguous()) || (gw.defined() && !gw.is_contiguous())) {
    const Tensor tx = kernels::contiguous_target(gx), tw = kernels::contiguous_target(gw);
    conv2d_backward(tx, tw, gb, go, x, w, p);
    kernels::copy_from_target(gx, tx);
    return kernels::copy_from_target(gw, tw);
  }
  if (go.numel() == 0) {  // nothing flows back: every gradient is zero
    for (const Tensor* t : {&gx, &gw, &gb})
      if (t->defined()) fill(*t, 0.0);
    return;
  }
  Tensor gx_left = gx, gw_left = gw, gb_left = gb;  // what the direct kernels leave to im2col
  const bool direct = direct_conv_applies(x, w, p);
  if (direct) {
    if (gx.defined() && direct_conv_backward_input_applies(x, w, p) && direct_conv_weights_fit(w, p)) {
      direct_conv2d_backward_input(gx, go, w, p);
      gx_left = Tensor();
    }
    if ((gw.defined() || gb.defined()) && direct_weight_grad_pays(x, w, p)) {
      direct_conv2d_backward_weight(gw, gb, go, x, p);
      gw_left = gb_left = Tensor();
    }
    if (!gx_left.defined() && !gw_left.defined() && !gb_left.defined()) return;
  }
  if (go.dtype() == kBF16 && x.dtype() == kBF16 && w.dtype() == kBF16 && (direct || !use_depthwise(x, p)))
    return backward_impl<float, BFloat16>(gx_left, gw_left, gb_left, go, x, w, Geom(x, w, go, p));
  if (go.dtype() == kBF16) {
    const Tensor tx = f32_target(gx_left), tw = f32_target(gw_left), tb = f32_target(gb_left);
    conv2d_backward(tx, tw, tb, widened(go), widened(x), widened(w), p);
    kernels::copy_from_target(gx_left, tx);
    kernels::copy_from_target(gw_left, tw);
    return kernels::copy_from_target(gb_left, tb);
  }
  if (!direct && use_depthwise(x, p)) return depthwise_conv2d_backward(gx, gw, gb, go, x, w, p);
  const Geom g(x, w, go, p);
  dispatch_floating(go.dtype(), "conv2d_backward", [&]<class T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      backward_impl<T, T>(gx_left, gw_left, gb_left, go, x, w, g);
    } else {
      MDL_FAIL("conv2d_backward: the CPU kernel takes f32 or f64, got ", go.dtype());
    }
  });
}

}  // namespace mdl::cpu
