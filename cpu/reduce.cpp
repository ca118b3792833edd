// CPU reductions: sum/mean/max/min/prod over any set of dims, max/min with indices along one dim,
// and variance. Dims are sorted by input stride and merged; then the "inner" shape (the unit-stride
// dim is reduced: lanes of accumulators run along contiguous rows) or the "outer" shape (a kept dim
// is innermost: whole input rows accumulate into a row of outputs) runs. Sums are blocked: float
// lanes within a block of ~4096 elements (each lane, or each row of outputs, summing a few dozen
// terms from zero before they are combined), blocks folded in double in order, whatever the threads.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/convert.h"
#include "cpu/kernels.h"
#include "kernels/reduce_rules.h"
#include "cpu/loops.h"
#include "tensor/parallel.h"

namespace mdl::cpu {

namespace {

template <class X>
inline bool is_nan(X x) {
  if constexpr (std::is_floating_point_v<X>) return x != x;
  else return false;
}

// f16/bf16 -> float, in bulk when contiguous.
template <class T>
void to_float(const T* p, int64_t n, int64_t stride, float* dst) {
  if (stride == 1) {
    to_f32(p, dst, n);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = float(p[i * stride]);
  }
}

constexpr int64_t kConvChunk = 1024;       // f16/bf16 elements converted per step
constexpr int64_t kBlock = 4096;           // elements per block of a sum (float lanes inside)
constexpr int64_t kMaxPartials = 1 << 22;  // per-block partials kept when splitting a reduction
constexpr int64_t kShort = 16;             // reductions this short skip the lanes
constexpr int64_t kShortRow = 256;         // outputs per call when they do
constexpr int64_t kArgLanes = 64;          // max/min with indices: rows this long use lanes first
constexpr int kLaneRun = 32;               // terms a float lane sums from zero
constexpr int kRowRun = 16;                // rows a row of outputs sums from zero

// ---- The reductions --------------------------------------------------------------------------
// Each has Lane accumulators (identity, step, combine) whose per-block results fold into one Outer
// per output. X is what an element is read as (float for f16/bf16, so they share the f32 loops).
// Centered ops read a per-output center (the mean, for var).

// Wide: double lanes for floats (var's mean).
template <class X_, bool Wide = false>
struct SumOp {
  using X = X_;
  static constexpr bool kFloat = std::is_floating_point_v<X>;
  static constexpr bool kCentered = false;
  using Lane =
      std::conditional_t<kFloat, std::conditional_t<Wide, double, X>, uint64_t>;  // unsigned: integer overflow wraps
  using Outer = std::conditional_t<kFloat, double, uint64_t>;
  using Center = Lane;
  static Lane identity() { return Lane(0); }
  static Outer outer_identity() { return Outer(0); }
  static Lane step(Lane a, X x, Lane) { return a + Lane(x); }
  static Lane combine(Lane a, Lane b) { return a + b; }
  static Outer fold(Outer o, Lane b) { return o + Outer(b); }
};

template <class X_>
struct ProdOp {
  using X = X_;
  static constexpr bool kFloat = std::is_floating_point_v<X>;
  static constexpr bool kCentered = false;
  using Lane = std::conditional_t<kFloat, X, uint64_t>;
  using Outer = std::conditional_t<kFloat, double, uint64_t>;
  using Center = Lane;
  static Lane identity() { return Lane(1); }
  static Outer outer_identity() { return Outer(1); }
  static Lane step(Lane a, X x, Lane) { return a * Lane(x); }
  static Lane combine(Lane a, Lane b) { return a * b; }
  static Outer fold(Outer o, Lane b) { return o * Outer(b); }
};

// Max/min; NaN wins (and stays) as in PyTorch.
template <class X_, bool IsMax>
struct MaxOp {
  using X = X_;
  static constexpr bool kCentered = false;
  using Lane = X;
  using Outer = X;
  using Center = Lane;
  static Lane identity() {
    if constexpr (std::is_floating_point_v<X>)
      return IsMax ? -std::numeric_limits<X>::infinity() : std::numeric_limits<X>::infinity();
    else return IsMax ? std::numeric_limits<X>::lowest() : std::numeric_limits<X>::max();
  }
  static Outer outer_identity() { return identity(); }
  static Lane step(Lane a, X x, Lane) {
    bool take = IsMax ? x > a : x < a;
    return (take | is_nan(x)) ? x : a;
  }
  static Lane combine(Lane a, Lane b) { return step(a, b, a); }
  static Outer fold(Outer o, Lane b) { return step(o, b, o); }
};

// Sum of squared deviations from the per-output center, in X lanes, or in double lanes (Wide) for
// the f32 outputs whose squares overflow float.
template <class X_, bool Wide = false>
struct SqDevOp {
  using X = X_;
  static constexpr bool kCentered = true;
  using Lane = std::conditional_t<Wide, double, X>;
  using Outer = double;
  using Center = X;
  static Lane identity() { return Lane(0); }
  static Outer outer_identity() { return 0.0; }
  static Lane step(Lane a, X x, Center c) {
    const Lane d = Lane(x) - Lane(c);
    return a + d * d;
  }
  static Lane combine(Lane a, Lane b) { return a + b; }
  static Outer fold(Outer o, Lane b) { return o + Outer(b); }
};

template <class Op>
inline constexpr int kLanes = int(std::min<size_t>(32, 128 / sizeof(typename Op::Lane)));  // 8 SSE registers

// ---- Inner loops ------------------------------------------------------------------------------

// lanes[j] accumulates elements j, j+L, j+2L, ... of the run p[0], p[s], ..., p[(n-1)s]: a lane
// sums kLaneRun of them from zero before it combines them into lanes[j], so that no float sum of a
// block adds more than a few dozen terms in series (long serial float sums of same-sign terms
// drift by many ulps).
template <class Op, class U>
[[gnu::noinline]] void lanes_run(typename Op::Lane* lanes, const U* p, int64_t n, int64_t s, typename Op::Center c) {
  using X = typename Op::X;
  using Lane = typename Op::Lane;
  constexpr int L = kLanes<Op>;
  Lane a[L];  // local, so the compiler knows it does not alias p
  for (int j = 0; j < L; ++j) a[j] = lanes[j];
  int64_t i = 0;
  if (s == 1) {
    for (; i + L * kLaneRun <= n; i += L * kLaneRun) {
      Lane r[L];
      for (int j = 0; j < L; ++j) r[j] = Op::identity();
      for (int k = 0; k < kLaneRun; ++k)
        for (int j = 0; j < L; ++j) r[j] = Op::step(r[j], X(p[i + k * L + j]), c);
      for (int j = 0; j < L; ++j) a[j] = Op::combine(a[j], r[j]);
    }
    for (; i + L <= n; i += L)
      for (int j = 0; j < L; ++j) a[j] = Op::step(a[j], X(p[i + j]), c);
    for (int j = 0; i < n; ++i, ++j) a[j] = Op::step(a[j], X(p[i]), c);
  } else {
    for (; i + L * kLaneRun <= n; i += L * kLaneRun) {
      Lane r[L];
      for (int j = 0; j < L; ++j) r[j] = Op::identity();
      for (int64_t k = 0; k < L * kLaneRun; ++k) r[k % L] = Op::step(r[k % L], X(p[(i + k) * s]), c);
      for (int j = 0; j < L; ++j) a[j] = Op::combine(a[j], r[j]);
    }
    for (int j = 0; i < n; ++i, j = j + 1 == L ? 0 : j + 1) a[j] = Op::step(a[j], X(p[i * s]), c);
  }
  for (int j = 0; j < L; ++j) lanes[j] = a[j];
}

template <class Op, class T>
inline void accum_run(typename Op::Lane* lanes, const T* p, int64_t n, int64_t s, typename Op::Center c) {
  if constexpr (is_half_v<T>) {
    float buf[kConvChunk];
    for (int64_t i = 0; i < n; i += kConvChunk) {
      const int64_t k = std::min(kConvChunk, n - i);
      to_float(p + i * s, k, s, buf);
      lanes_run<Op>(lanes, buf, k, 1, c);
    }
  } else {
    lanes_run<Op>(lanes, p, n, s, c);
  }
}

template <class Op>
[[gnu::noinline]] typename Op::Lane combine_lanes(typename Op::Lane* l) {
  for (int w = kLanes<Op> / 2; w >= 1; w /= 2)
    for (int j = 0; j < w; ++j) l[j] = Op::combine(l[j], l[j + w]);
  return l[0];
}

// acc[j] = step(acc[j], p[j*s], c[j]) for j < n: one input row into a row of outputs.
template <class Op, class U>
[[gnu::noinline]] void row_run(typename Op::Lane* __restrict acc, const U* __restrict p, int64_t n, int64_t s,
                               const typename Op::Center* __restrict c) {
  using X = typename Op::X;
  using Center = typename Op::Center;
  if (s == 1) {
    for (int64_t j = 0; j < n; ++j) acc[j] = Op::step(acc[j], X(p[j]), Op::kCentered ? c[j] : Center());
  } else {
    for (int64_t j = 0; j < n; ++j) acc[j] = Op::step(acc[j], X(p[j * s]), Op::kCentered ? c[j] : Center());
  }
}

template <class Op, class T>
inline void accum_row(typename Op::Lane* acc, const T* p, int64_t n, int64_t s, const typename Op::Center* c) {
  if constexpr (is_half_v<T>) {
    float buf[kConvChunk];
    for (int64_t j = 0; j < n; j += kConvChunk) {
      const int64_t k = std::min(kConvChunk, n - j);
      to_float(p + j * s, k, s, buf);
      row_run<Op>(acc + j, buf, k, 1, Op::kCentered ? c + j : nullptr);
    }
  } else {
    row_run<Op>(acc, p, n, s, c);
  }
}

// res[i] = the reduction of the short run p[i*rs + k*s], k < n, for i < count: many tiny outputs.
template <class Op, class T>
void short_runs(typename Op::Lane* res, const T* p, int64_t count, int64_t rs, int64_t n, int64_t s,
                const typename Op::Center* c) {
  using X = typename Op::X;
  using Lane = typename Op::Lane;
  for (int64_t i = 0; i < count; ++i) {
    Lane a = Op::identity();
    const typename Op::Center ci = Op::kCentered ? c[i] : typename Op::Center();
    for (int64_t k = 0; k < n; ++k) a = Op::step(a, X(p[i * rs + k * s]), ci);
    res[i] = a;
  }
}

// Where elements come from: the input's bytes and the two inner loops for its dtype, behind
// function pointers, so the loop shapes below are compiled once per op, not once per dtype.
template <class Op>
struct Source {
  using Lane = typename Op::Lane;
  using Center = typename Op::Center;
  const char* base;
  int64_t esize;
  void (*run)(Lane* lanes, const void* p, int64_t n, int64_t s, Center c);
  void (*row)(Lane* acc, const void* p, int64_t n, int64_t s, const Center* c);
  void (*shorts)(Lane* res, const void* p, int64_t count, int64_t rs, int64_t n, int64_t s, const Center* c);
  const void* at(int64_t off) const { return base + off * esize; }
};

template <class Op, class T>
Source<Op> source_of(const Tensor& in) {
  using Lane = typename Op::Lane;
  using Center = typename Op::Center;
  return {static_cast<const char*>(in.raw_data()), int64_t(sizeof(T)),
          [](Lane* l, const void* p, int64_t n, int64_t s, Center c) {
            accum_run<Op>(l, static_cast<const T*>(p), n, s, c);
          },
          [](Lane* a, const void* p, int64_t n, int64_t s, const Center* c) {
            accum_row<Op>(a, static_cast<const T*>(p), n, s, c);
          },
          [](Lane* r, const void* p, int64_t count, int64_t rs, int64_t n, int64_t s, const Center* c) {
            short_runs<Op>(r, static_cast<const T*>(p), count, rs, n, s, c);
          }};
}

// Receives finished floating results: out[off] (or buf[m]) = o / div, in the destination's dtype.
struct FloatSink {
  char* dst;
  DType t;
  double div = 1.0;
  bool by_index = false;
  void operator()(int64_t m, int64_t off, double o) const {
    const int64_t i = by_index ? m : off;
    const double v = o / div;
    switch (t) {
      case kF32: reinterpret_cast<float*>(dst)[i] = float(v); break;
      case kF64: reinterpret_cast<double*>(dst)[i] = v; break;
      case kF16: reinterpret_cast<Half*>(dst)[i] = convert<Half>(v); break;
      case kBF16: reinterpret_cast<BFloat16*>(dst)[i] = convert<BFloat16>(v); break;
      default: break;
    }
  }
};

// Receives integer results (wrapped sums and products, or max/min) in the output's dtype.
template <class V>
struct IntSink {
  char* dst;
  DType t;
  void operator()(int64_t, int64_t off, V o) const {
    switch (t) {
      case kI64: reinterpret_cast<int64_t*>(dst)[off] = int64_t(o); break;
      case kI32: reinterpret_cast<int32_t*>(dst)[off] = int32_t(o); break;
      case kU8:
      case kBool: reinterpret_cast<uint8_t*>(dst)[off] = uint8_t(o); break;
      default: break;
    }
  }
};

// ---- Geometry --------------------------------------------------------------------------------

struct Dim {
  int64_t size, in, out;  // strides in elements; out is 0 for reduced dims
};

// Walks a list of dims in row-major order, tracking NS offsets.
template <int NS>
struct Odometer {
  int n = 0;
  int64_t size[kMaxDimsCpu];
  int64_t stride[NS][kMaxDimsCpu];
  int64_t idx[kMaxDimsCpu];
  int64_t off[NS] = {};

  Odometer() = default;
  // dims [first, last) of ds; which(d, s) gives stride s of dim d.
  template <class Which>
  [[gnu::noinline]] Odometer(const std::vector<Dim>& ds, size_t first, size_t last, const Which& which) {
    for (size_t d = first; d < last; ++d, ++n) {
      size[n] = ds[d].size;
      for (int s = 0; s < NS; ++s) stride[s][n] = which(ds[d], s);
    }
    seek(0);
  }
  [[gnu::noinline]] void seek(int64_t flat) {
    for (int s = 0; s < NS; ++s) off[s] = 0;
    for (int d = n - 1; d >= 0; --d) {
      idx[d] = flat % size[d];
      flat /= size[d];
      for (int s = 0; s < NS; ++s) off[s] += idx[d] * stride[s][d];
    }
  }
  [[gnu::noinline]] void next() {
    for (int d = n - 1; d >= 0; --d) {
      for (int s = 0; s < NS; ++s) off[s] += stride[s][d];
      if (++idx[d] < size[d]) return;
      for (int s = 0; s < NS; ++s) off[s] -= stride[s][d] * size[d];
      idx[d] = 0;
    }
  }
};

inline int64_t in_stride(const Dim& d, int) { return d.in; }
inline int64_t in_out_stride(const Dim& d, int s) { return s == 0 ? d.in : d.out; }

// The reduction as merged kept and reduced dims, each outer to inner by input stride.
struct Plan {
  std::vector<Dim> kept, red;
  int64_t M = 1, R = 1;  // outputs, elements per output
  bool inner = true;     // the innermost dim is reduced
};

Plan make_plan(const Tensor& out, const Tensor& in, const std::vector<bool>& mask) {
  struct D {
    Dim d;
    bool red;
  };
  std::vector<D> ds;
  for (int64_t i = 0; i < in.dim(); ++i)
    if (in.size(i) != 1) ds.push_back({{in.size(i), in.stride(i), mask[i] ? 0 : out.stride(i)}, bool(mask[i])});
  // Outer to inner by input stride; broadcast (stride 0) dims go outermost.
  auto key = [](const D& x) { return x.d.in == 0 ? std::numeric_limits<int64_t>::max() : std::abs(x.d.in); };
  std::stable_sort(ds.begin(), ds.end(), [&](const D& a, const D& b) { return key(a) > key(b); });
  Plan p;
  std::vector<D> merged;
  for (const D& x : ds) {
    if (!merged.empty()) {
      D& q = merged.back();
      if (q.red == x.red && q.d.in == x.d.in * x.d.size && (x.red || q.d.out == x.d.out * x.d.size)) {
        q.d = {q.d.size * x.d.size, x.d.in, x.d.out};
        continue;
      }
    }
    merged.push_back(x);
  }
  for (const D& x : merged) (x.red ? p.red : p.kept).push_back(x.d);
  for (const Dim& d : p.kept) p.M *= d.size;
  for (const Dim& d : p.red) p.R *= d.size;
  p.inner = merged.empty() || merged.back().red;
  if (p.red.empty()) p.red.push_back({1, 0, 0});  // nothing to reduce: one element per output
  return p;
}

// ---- The two loop shapes -----------------------------------------------------------------------
// emit(m, out_offset, outer) receives output m (flat in kept-dim order) once; it may run on any thread.

// Inner: each output reduces runs along the innermost reduced dim r0 with lanes.
template <class Op, class Emit>
void run_inner(const Plan& p, const Source<Op>& src, const typename Op::Center* centers, const Emit& emit) {
  using Lane = typename Op::Lane;
  using Outer = typename Op::Outer;
  const Dim r0 = p.red.back();
  const int64_t M = p.M, R = p.R, nblocks = (R + kBlock - 1) / kBlock;
  const Odometer<2> kept0(p.kept, 0, p.kept.size(), in_out_stride);
  const Odometer<1> red0(p.red, 0, p.red.size() - 1, in_stride);

  // Runs go into lanes r; short ones are combined into l every kLaneRun terms a lane, as lanes_run
  // does within a long run.
  auto block = [&](int64_t in_off, int64_t b, typename Op::Center c, Odometer<1>& ro) {
    constexpr int L = kLanes<Op>;
    Lane l[L], r[L];
    for (int j = 0; j < L; ++j) l[j] = r[j] = Op::identity();
    int64_t rb = b * kBlock, pending = 0;
    const int64_t re = std::min(R, rb + kBlock);
    int64_t i0 = rb % r0.size;
    ro.seek(rb / r0.size);
    while (rb < re) {
      const int64_t n = std::min(r0.size - i0, re - rb);
      src.run(r, src.at(in_off + ro.off[0] + i0 * r0.in), n, r0.in, c);
      if ((pending += n) >= L * kLaneRun && n < L * kLaneRun) {
        for (int j = 0; j < L; ++j) l[j] = Op::combine(l[j], r[j]), r[j] = Op::identity();
        pending = 0;
      }
      rb += n;
      i0 = 0;
      ro.next();
    }
    for (int j = 0; j < L; ++j) l[j] = Op::combine(l[j], r[j]);
    return combine_lanes<Op>(l);
  };
  auto center = [&](int64_t m) { return Op::kCentered ? centers[m] : typename Op::Center(); };

  if (p.red.size() == 1 && R <= kShort && !p.kept.empty()) {
    // Many outputs of a few elements each: a plain loop over a row of outputs at a time.
    const Dim k0 = p.kept.back();
    const Odometer<2> outer0(p.kept, 0, p.kept.size() - 1, in_out_stride);
    const int64_t nj = (k0.size + kShortRow - 1) / kShortRow;
    parallel_for(0, M / k0.size * nj, std::max<int64_t>(1, kGrainSize / (R * kShortRow)), [&](int64_t ib, int64_t ie) {
      Odometer<2> ko = outer0;
      Lane res[kShortRow];
      for (int64_t it = ib; it < ie; ++it) {
        const int64_t mo = it / nj, j0 = it % nj * kShortRow, w = std::min(kShortRow, k0.size - j0);
        const int64_t m0 = mo * k0.size + j0;
        ko.seek(mo);
        src.shorts(res, src.at(ko.off[0] + j0 * k0.in), w, k0.in, R, r0.in, Op::kCentered ? centers + m0 : nullptr);
        for (int64_t j = 0; j < w; ++j)
          emit(m0 + j, ko.off[1] + (j0 + j) * k0.out, Op::fold(Op::outer_identity(), res[j]));
      }
    });
    return;
  }

  const int nt = get_num_threads();
  const bool split = nt > 1 && M < 4 * nt && nblocks >= 2 && M * R >= 2 * kGrainSize && M * nblocks <= kMaxPartials;
  if (!split) {
    parallel_for(0, M, std::max<int64_t>(1, kGrainSize / R), [&](int64_t mb, int64_t me) {
      Odometer<2> ko = kept0;
      Odometer<1> ro = red0;
      ko.seek(mb);
      for (int64_t m = mb; m < me; ++m, ko.next()) {
        Outer o = Op::outer_identity();
        for (int64_t b = 0; b < nblocks; ++b) o = Op::fold(o, block(ko.off[0], b, center(m), ro));
        emit(m, ko.off[1], o);
      }
    });
    return;
  }
  // Few outputs: threads split the blocks; the partials fold in block order, as above.
  std::vector<Lane> part(size_t(nblocks * M));
  parallel_for(0, nblocks, std::max<int64_t>(1, kGrainSize / (kBlock * M)), [&](int64_t bb, int64_t be) {
    Odometer<2> ko = kept0;
    Odometer<1> ro = red0;
    for (int64_t b = bb; b < be; ++b) {
      ko.seek(0);
      for (int64_t m = 0; m < M; ++m, ko.next()) part[b * M + m] = block(ko.off[0], b, center(m), ro);
    }
  });
  Odometer<2> ko = kept0;
  for (int64_t m = 0; m < M; ++m, ko.next()) {
    Outer o = Op::outer_identity();
    for (int64_t b = 0; b < nblocks; ++b) o = Op::fold(o, part[b * M + m]);
    emit(m, ko.off[1], o);
  }
}

// Outer: the innermost dim k0 is kept; rows of k0 accumulate over all reduced positions.
template <class Op, class Emit>
void run_outer(const Plan& p, const Source<Op>& src, const typename Op::Center* centers, const Emit& emit) {
  using Lane = typename Op::Lane;
  using Outer = typename Op::Outer;
  const Dim k0 = p.kept.back();
  const int64_t c0 = k0.size, Mo = p.M / c0, R = p.R;
  const int64_t rows = kRowRun * kRowRun;  // rows per block
  const int64_t nblocks = (R + rows - 1) / rows;
  const Odometer<2> kept0(p.kept, 0, p.kept.size() - 1, in_out_stride);
  const Odometer<1> red0(p.red, 0, p.red.size(), in_stride);

  // tmp[0, w) = block b of rows, for outputs j0 .. j0+w of outer output row (in_off): runs of
  // kRowRun rows summed from zero (in run[0, w) after the first) and combined into tmp.
  auto block = [&](int64_t in_off, int64_t b, int64_t j0, int64_t w, Lane* tmp, Lane* run, const typename Op::Center* c,
                   Odometer<1>& ro) {
    int64_t rb = b * rows;
    const int64_t re = std::min(R, rb + rows);
    ro.seek(rb);
    for (Lane* acc = tmp; rb < re; acc = run) {
      for (int64_t j = 0; j < w; ++j) acc[j] = Op::identity();
      for (const int64_t rr = std::min(re, rb + kRowRun); rb < rr; ++rb, ro.next())
        src.row(acc, src.at(in_off + ro.off[0] + j0 * k0.in), w, k0.in, c);
      if (acc == run)
        for (int64_t j = 0; j < w; ++j) tmp[j] = Op::combine(tmp[j], run[j]);
    }
  };
  auto center = [&](int64_t m) { return Op::kCentered ? centers + m : nullptr; };

  const int nt = get_num_threads();
  int64_t nj = (c0 + 1023) / 1024;  // chunks of a row of outputs
  if (Mo * nj < 4 * nt) nj = std::max(nj, std::min((c0 + 63) / 64, (4 * nt + Mo - 1) / Mo));
  const int64_t jc = (c0 + nj - 1) / nj;
  nj = (c0 + jc - 1) / jc;
  const int64_t items = Mo * nj;
  const bool split = nt > 1 && items < 4 * nt && nblocks >= 2 && p.M * R >= 2 * kGrainSize &&
                     p.M * nblocks <= kMaxPartials;
  if (!split) {
    parallel_for(0, items, std::max<int64_t>(1, kGrainSize / (R * jc)), [&](int64_t ib, int64_t ie) {
      std::vector<Lane> tmp(jc), run(jc);
      std::vector<Outer> o(jc);
      Odometer<2> ko = kept0;
      Odometer<1> ro = red0;
      for (int64_t it = ib; it < ie; ++it) {
        const int64_t mo = it / nj, j0 = it % nj * jc, w = std::min(jc, c0 - j0);
        ko.seek(mo);
        std::fill(o.begin(), o.begin() + w, Op::outer_identity());
        for (int64_t b = 0; b < nblocks; ++b) {
          block(ko.off[0], b, j0, w, tmp.data(), run.data(), center(mo * c0 + j0), ro);
          for (int64_t j = 0; j < w; ++j) o[j] = Op::fold(o[j], tmp[j]);
        }
        for (int64_t j = 0; j < w; ++j) emit(mo * c0 + j0 + j, ko.off[1] + (j0 + j) * k0.out, o[j]);
      }
    });
    return;
  }
  std::vector<Lane> part(size_t(nblocks * p.M));
  parallel_for(0, nblocks, std::max<int64_t>(1, kGrainSize / (rows * p.M)), [&](int64_t bb, int64_t be) {
    Odometer<2> ko = kept0;
    Odometer<1> ro = red0;
    std::vector<Lane> run(c0);
    for (int64_t b = bb; b < be; ++b) {
      ko.seek(0);
      for (int64_t mo = 0; mo < Mo; ++mo, ko.next())
        block(ko.off[0], b, 0, c0, &part[b * p.M + mo * c0], run.data(), center(mo * c0), ro);
    }
  });
  Odometer<2> ko = kept0;
  for (int64_t mo = 0; mo < Mo; ++mo, ko.next())
    for (int64_t j = 0; j < c0; ++j) {
      Outer o = Op::outer_identity();
      for (int64_t b = 0; b < nblocks; ++b) o = Op::fold(o, part[b * p.M + mo * c0 + j]);
      emit(mo * c0 + j, ko.off[1] + j * k0.out, o);
    }
}

template <class Op, class Emit>
void run_plan(const Plan& p, const Source<Op>& src, const typename Op::Center* centers, const Emit& emit) {
  if (p.inner) run_inner<Op>(p, src, centers, emit);
  else run_outer<Op>(p, src, centers, emit);
}

}  // namespace

// ---- Kernels ----------------------------------------------------------------------------------

void reduce(ReduceOp op, const Tensor& out, const Tensor& in, const std::vector<bool>& reduce_mask) {
  const char* name = reduce_op_name(op);
  MDL_CHECK(in.dim() <= kMaxDimsCpu, name, ": tensors of more than ", kMaxDimsCpu,
            " dims are not supported, got shape ", in.shape());
  kernels::check_reduce_geometry(name, out, in, reduce_mask.size());
  MDL_CHECK(op != ReduceOp::Mean || in.is_floating_point(), name, ": expected a floating dtype, got ", in.dtype());
  if (!kernels::reduce_writes_directly(op, in.dtype(), out.dtype())) {
    Tensor tmp = make_tensor(out.shape(), kernels::reduce_natural_dtype(op, in.dtype()), out.device());
    reduce(op, tmp, in, reduce_mask);
    kernels::copy(out.device(), out, tmp);
    return;
  }
  if (out.numel() == 0) return;
  if (in.numel() == 0) {
    kernels::fill(out.device(), out, kernels::reduce_empty_value(op));
    return;
  }
  const Plan plan = make_plan(out, in, reduce_mask);
  dispatch(in.dtype(), name, [&]<class B>() {
    using T = std::conditional_t<std::is_same_v<B, bool>, uint8_t, B>;  // bool reduces as its 0/1 bytes
    using X = acc_t<T>;
    char* dst = static_cast<char*>(out.raw_data());
    if constexpr (std::is_floating_point_v<X>) {
      const FloatSink sink{dst, out.dtype(), op == ReduceOp::Mean ? double(plan.R) : 1.0};
      switch (op) {
        case ReduceOp::Sum:
        case ReduceOp::Mean: run_plan(plan, source_of<SumOp<X>, T>(in), nullptr, sink); break;
        case ReduceOp::Prod: run_plan(plan, source_of<ProdOp<X>, T>(in), nullptr, sink); break;
        case ReduceOp::Max: run_plan(plan, source_of<MaxOp<X, true>, T>(in), nullptr, sink); break;
        case ReduceOp::Min: run_plan(plan, source_of<MaxOp<X, false>, T>(in), nullptr, sink); break;
      }
    } else {
      const IntSink<uint64_t> wide{dst, out.dtype()};
      const IntSink<X> same{dst, out.dtype()};
      switch (op) {
        case ReduceOp::Sum: run_plan(plan, source_of<SumOp<X>, T>(in), nullptr, wide); break;
        case ReduceOp::Prod: run_plan(plan, source_of<ProdOp<X>, T>(in), nullptr, wide); break;
        case ReduceOp::Max: run_plan(plan, source_of<MaxOp<X, true>, T>(in), nullptr, same); break;
        case ReduceOp::Min: run_plan(plan, source_of<MaxOp<X, false>, T>(in), nullptr, same); break;
        case ReduceOp::Mean: break;  // rejected above
      }
    }
  });
}

// Two passes: the mean m, then the blocked sum of squared deviations from c, m rounded to the
// input's precision, less n (m - c)^2 so that the rounding of the centre adds nothing. A float mean
// is summed in float lanes, within some dozens of ulps of the truth; where f32 outputs come out
// near constant (a std under kNearConstant of the mean, which that error could dominate) the mean
// is summed again in double lanes, and where they come out inf or NaN the squares are summed again
// in double lanes: a square over the float range need not make the variance overflow.
void var(const Tensor& out, const Tensor& in, const std::vector<bool>& reduce_mask, int64_t correction) {
  MDL_CHECK(in.dim() <= kMaxDimsCpu, "var", ": tensors of more than ", kMaxDimsCpu,
            " dims are not supported, got shape ", in.shape());
  kernels::check_reduce_geometry("var", out, in, reduce_mask.size());
  if (out.dtype() != in.dtype()) {
    Tensor tmp = make_tensor(out.shape(), in.dtype(), out.device());
    var(tmp, in, reduce_mask, correction);
    kernels::copy(out.device(), out, tmp);
    return;
  }
  dispatch_floating(in.dtype(), "var", [&]<class T>() {
    if (out.numel() == 0) return;
    if (in.numel() == 0) {
      kernels::fill(out.device(), out, std::numeric_limits<double>::quiet_NaN());
      return;
    }
    const Plan plan = make_plan(out, in, reduce_mask);
    using X = acc_t<T>;
    constexpr double kNearConstant = 1.0 / 8192;
    const double n = double(plan.R);
    std::vector<double> mean(size_t(plan.M));
    std::vector<X> centers(size_t(plan.M));
    auto mean_pass = [&]<class Op>() {
      run_plan(plan, source_of<Op, T>(in), nullptr, FloatSink{reinterpret_cast<char*>(mean.data()), kF64, n, true});
      std::copy(mean.begin(), mean.end(), centers.begin());
    };
    const FloatSink sink{static_cast<char*>(out.raw_data()), out.dtype(),
                         double(std::max<int64_t>(0, plan.R - correction))};
    std::atomic<bool> overflow{false}, near_constant{false};
    auto deviation_pass = [&]<class Op>() {
      run_plan(plan, source_of<Op, T>(in), centers.data(), [&](int64_t m, int64_t off, double o) {
        const double mu = mean[size_t(m)], shift = mu - double(centers[size_t(m)]);
        double v = o - n * shift * shift;
        if (v < 0) v = 0;  // NaN stays NaN
        sink(m, off, v);
        if (!std::isfinite(v)) overflow.store(true, std::memory_order_relaxed);
        else if (v < n * (kNearConstant * mu) * (kNearConstant * mu))
          near_constant.store(true, std::memory_order_relaxed);
      });
    };
    mean_pass.template operator()<SumOp<X>>();
    deviation_pass.template operator()<SqDevOp<X>>();
    if constexpr (std::is_same_v<X, float>) {
      if (!near_constant.load() && !overflow.load()) return;
      if (near_constant.load()) mean_pass.template operator()<SumOp<X, true>>();
      if (overflow.load()) deviation_pass.template operator()<SqDevOp<X, true>>();
      else deviation_pass.template operator()<SqDevOp<X>>();
    }
  });
}

// ---- max/min with indices along one dim ----------------------------------------------------------

namespace {

// Does v replace the current best b? Strictly better (ties keep the first), or the first NaN.
template <bool IsMax, class X>
inline bool better(X v, X b) {
  return !is_nan(b) && ((IsMax ? v > b : v < b) || is_nan(v));
}

template <class T, bool IsMax>
void arg_reduce_impl(const Tensor& values, const Tensor& indices, const Tensor& in, int64_t dim) {
  using X = acc_t<T>;
  const int64_t n = in.size(dim), sd = in.stride(dim);
  // Kept dims (strides: in, values, indices), sorted outer to inner by input stride and merged.
  struct K {
    int64_t size, s[3];
  };
  std::vector<K> ks;
  for (int64_t d = 0; d < in.dim(); ++d)
    if (d != dim && in.size(d) != 1) ks.push_back({in.size(d), {in.stride(d), values.stride(d), indices.stride(d)}});
  auto key = [](const K& k) { return k.s[0] == 0 ? std::numeric_limits<int64_t>::max() : std::abs(k.s[0]); };
  std::stable_sort(ks.begin(), ks.end(), [&](const K& a, const K& b) { return key(a) > key(b); });
  std::vector<K> merged;
  for (const K& k : ks) {
    if (!merged.empty()) {
      K& q = merged.back();
      bool ok = true;
      for (int s = 0; s < 3; ++s) ok = ok && q.s[s] == k.s[s] * k.size;
      if (ok) {
        q.size *= k.size;
        for (int s = 0; s < 3; ++s) q.s[s] = k.s[s];
        continue;
      }
    }
    merged.push_back(k);
  }
  int64_t M = 1;
  for (const K& k : merged) M *= k.size;
  // Rows of outputs when a kept dim has a smaller input stride than the reduced one.
  const int64_t sd_key = sd == 0 ? std::numeric_limits<int64_t>::max() : std::abs(sd);
  const bool outer = !merged.empty() && key(merged.back()) < sd_key;
  const size_t nodo = merged.size() - (outer ? 1 : 0);
  struct Geo {
    int n = 0;
    int64_t size[kMaxDimsCpu], s[3][kMaxDimsCpu];
  } g;
  for (size_t d = 0; d < nodo; ++d, ++g.n) {
    g.size[g.n] = merged[d].size;
    for (int s = 0; s < 3; ++s) g.s[s][g.n] = merged[d].s[s];
  }
  auto offsets = [&](int64_t flat, int64_t off[3]) {
    off[0] = off[1] = off[2] = 0;
    for (int d = g.n - 1; d >= 0; --d) {
      const int64_t i = flat % g.size[d];
      flat /= g.size[d];
      for (int s = 0; s < 3; ++s) off[s] += i * g.s[s][d];
    }
  };
  const T* src = static_cast<const T*>(in.raw_data());
  T* val = static_cast<T*>(values.raw_data());
  int64_t* idx = static_cast<int64_t*>(indices.raw_data());

  if (!outer) {
    parallel_for(0, M, std::max<int64_t>(1, kGrainSize / n), [&](int64_t mb, int64_t me) {
      for (int64_t m = mb; m < me; ++m) {
        int64_t off[3];
        offsets(m, off);
        const T* p = src + off[0];
        X best = X(p[0]);
        int64_t bi = 0;
        if (n >= kArgLanes) {  // the extreme with vector lanes, then the first place it occurs
          using Op = MaxOp<X, IsMax>;
          typename Op::Lane lanes[kLanes<Op>];
          for (auto& l : lanes) l = Op::identity();
          accum_run<Op>(lanes, p, n, sd, X());
          best = combine_lanes<Op>(lanes);
          while (is_nan(best) ? !is_nan(X(p[bi * sd])) : X(p[bi * sd]) != best) ++bi;
        } else {
          for (int64_t i = 1; i < n && !is_nan(best); ++i) {
            const X v = X(p[i * sd]);
            if (better<IsMax>(v, best)) best = v, bi = i;
          }
        }
        val[off[1]] = p[bi * sd];
        idx[off[2]] = bi;
      }
    });
    return;
  }
  const K k0 = merged.back();
  const int64_t c0 = k0.size, Mo = M / c0, jc = std::min<int64_t>(c0, 1024), nj = (c0 + jc - 1) / jc;
  parallel_for(0, Mo * nj, std::max<int64_t>(1, kGrainSize / (n * jc)), [&](int64_t ib, int64_t ie) {
    std::vector<X> best(jc);
    std::vector<int64_t> bi(jc);
    for (int64_t it = ib; it < ie; ++it) {
      const int64_t mo = it / nj, j0 = it % nj * jc, w = std::min(jc, c0 - j0);
      int64_t off[3];
      offsets(mo, off);
      const T* p = src + off[0] + j0 * k0.s[0];
      for (int64_t j = 0; j < w; ++j) best[j] = X(p[j * k0.s[0]]), bi[j] = 0;
      for (int64_t i = 1; i < n; ++i)
        for (int64_t j = 0; j < w; ++j) {
          const X v = X(p[i * sd + j * k0.s[0]]);
          if (better<IsMax>(v, best[j])) best[j] = v, bi[j] = i;
        }
      for (int64_t j = 0; j < w; ++j) {
        val[off[1] + (j0 + j) * k0.s[1]] = p[bi[j] * sd + j * k0.s[0]];
        idx[off[2] + (j0 + j) * k0.s[2]] = bi[j];
      }
    }
  });
}

}  // namespace

void arg_reduce(bool is_max, const Tensor& values, const Tensor& indices, const Tensor& in, int64_t dim) {
  const char* name = is_max ? "max" : "min";
  MDL_CHECK(in.dim() <= kMaxDimsCpu, name, ": tensors of more than ", kMaxDimsCpu, " dims are not supported");
  MDL_CHECK(dim >= 0 && dim < in.dim(), name, ": dim ", dim, " out of range for shape ", in.shape());
  MDL_CHECK(values.dim() == in.dim() && indices.dim() == in.dim() && indices.dtype() == kI64, name, ": values ",
            values.shape(), " and indices ", indices.shape(), " (", indices.dtype(),
            ") are not the keepdim form of input ", in.shape());
  if (values.dtype() != in.dtype()) {
    Tensor tmp = make_tensor(values.shape(), in.dtype(), values.device());
    arg_reduce(is_max, tmp, indices, in, dim);
    kernels::copy(values.device(), values, tmp);
    return;
  }
  if (values.numel() == 0) return;
  MDL_CHECK(in.size(dim) > 0, name, ": cannot reduce over dim ", dim, " of size 0 (shape ", in.shape(), ")");
  dispatch(in.dtype(), name, [&]<class B>() {
    using T = std::conditional_t<std::is_same_v<B, bool>, uint8_t, B>;
    if (is_max) arg_reduce_impl<T, true>(values, indices, in, dim);
    else arg_reduce_impl<T, false>(values, indices, in, dim);
  });
}

}  // namespace mdl::cpu
