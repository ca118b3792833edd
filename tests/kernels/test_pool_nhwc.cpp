// The logic of the GPU's channels-last pooling kernels and of its gathered max pool backward
// (kernels/pool_windows.h, used by cuda/pool.cu), run on the CPU as their grids would and compared
// with the CPU's kernels (cpu/pool.cpp): positions counted channels-last, the channel vector a
// thread takes, the forwards' windows (max with NaN and its winner, average, adaptive average) V
// channels at a time, and the backward's winner spans, monotone envelope and gather, which must give
// the CPU's sums bit for bit (the same additions in the same order), planes walked either way.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/pool.h"
#include "kernels/pool_windows.h"
#include "mdl.h"
#include "tests/support/test_util.h"

using namespace mdl;
using namespace mdl::test;

namespace {

// Equal values, NaN matching NaN.
bool same_values(const std::vector<double>& a, const std::vector<double>& b, std::string& where) {
  if (a.size() != b.size()) {
    where = "sizes " + std::to_string(a.size()) + " and " + std::to_string(b.size());
    return false;
  }
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])))) {
      where = "element " + std::to_string(i) + ": " + std::to_string(a[i]) + " against " + std::to_string(b[i]);
      return false;
    }
  return true;
}

void check_same(const Tensor& got, const Tensor& want, const std::string& what) {
  std::string where;
  CHECK_MESSAGE(same_values(values(got), values(want), where), what, ": ", where);
}

int64_t offset(const Tensor& t, int64_t n, int64_t c, int64_t h, int64_t w) {
  return n * t.stride(0) + c * t.stride(1) + h * t.stride(2) + w * t.stride(3);
}

int64_t vector_of(const Tensor& t) {
  const int64_t size[4] = {t.size(0), t.size(1), t.size(2), t.size(3)};
  const int64_t stride[4] = {t.stride(0), t.stride(1), t.stride(2), t.stride(3)};
  return pool_channel_vector(size, stride, int64_t(t.element_size()), reinterpret_cast<uintptr_t>(t.raw_data()));
}

// x with NaNs at a few places and one large value that several overlapping windows pick.
Tensor pool_input(const Shape& s, DType t, uint64_t seed, bool nan) {
  Tensor x = sample(s, kF64, seed);
  std::vector<double> v = values(x);
  v[v.size() / 3] = 50.0;
  if (nan) v[v.size() / 2] = v[7 % v.size()] = NAN;
  return from_vector(v, s).to(t);
}

// The GPU's accumulation type: float for f16/bf16.
template <class T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

enum class Kind { Max, Avg, AvgPad, Adaptive };

// The channels-last forward of cuda/pool.cu on the CPU: thread i of N * Ho * Wo * C / V takes
// pixel (n, oh, ow) and channels [c, c + V), reading x through its strides; out and idx
// contiguous (N, C, Ho, Wo).
template <class T, int V>
void nhwc_forward(Kind kind, const Tensor& x, const Tensor& out, const Tensor& idx, const kernels::Pool2dParams& p) {
  using A = Acc<T>;
  const int64_t C = x.size(1), H = x.size(2), W = x.size(3), Ho = out.size(2), Wo = out.size(3);
  const T* xp = static_cast<const T*>(x.raw_data());
  T* op = out.data_ptr<T>();
  int64_t* ip = kind == Kind::Max ? idx.data_ptr<int64_t>() : nullptr;
  const int64_t threads = out.numel() / V;
  for (int64_t i = 0; i < threads; ++i) {
    const PoolPos o = pool_pos_channels_last(i, C / V, Ho, Wo);
    const int64_t c = o.c * V;
    const auto load = [&](int64_t h, int64_t w, A(&v)[V]) {
      for (int k = 0; k < V; ++k) v[k] = A(xp[offset(x, o.n, c + k, h, w)]);
    };
    const PoolWindow wh = kind == Kind::Adaptive ? adaptive_window(o.h, Ho, H)
                                                 : pool_window(o.h, p.stride_h, p.pad_h, p.kernel_h, H);
    const PoolWindow ww = kind == Kind::Adaptive ? adaptive_window(o.w, Wo, W)
                                                 : pool_window(o.w, p.stride_w, p.pad_w, p.kernel_w, W);
    A r[V];
    int64_t arg[V] = {};
    if (kind == Kind::Max) {
      max_pool_window<A, V>(wh, ww, W, load, r, arg);
    } else {
      sum_pool_window<A, V>(wh, ww, load, r);
      const A div = A(kind == Kind::Adaptive ? wh.padded * ww.padded : pool_divisor(wh, ww, kind == Kind::AvgPad));
      for (int k = 0; k < V; ++k) r[k] = r[k] / div;
    }
    for (int k = 0; k < V; ++k) {
      const int64_t at = offset(out, o.n, c + k, o.h, o.w);
      op[at] = T(r[k]);
      if (ip) ip[at] = arg[k];
    }
  }
}

// The gathered max pool backward of cuda/pool.cu on the CPU, block by block, lane by lane:
// gx (N, C, H, W) contiguous. Returns the outputs visited over all input elements.
template <class T>
int64_t gather_backward(const Tensor& gx, const Tensor& go, const Tensor& idx, int64_t block) {
  const int64_t N = gx.size(0), C = gx.size(1), H = gx.size(2), W = gx.size(3), Ho = go.size(2), Wo = go.size(3);
  const bool cl = C > 1 && idx.stride(1) == 1;
  const int64_t G = max_pool_gather_group(C, H * W, cl, block), groups = (C + G - 1) / G;
  const int64_t* ip = static_cast<const int64_t*>(idx.raw_data());
  const T* gp = static_cast<const T*>(go.raw_data());
  T* dp = gx.data_ptr<T>();
  int64_t visited = 0;
  for (int64_t b = 0; b < N * groups; ++b) {
    const int64_t n = b / groups, c0 = b % groups * G, g = std::min(G, C - c0);
    const size_t nh = size_t(Ho), nw = size_t(Wo);
    std::vector<int32_t> row_lo(nh), row_hi(nh), col_lo(nw), col_hi(nw);
    const auto winner_of = [&](int64_t c, int64_t oh, int64_t ow) { return ip[offset(idx, n, c, oh, ow)]; };
    for (int64_t r = 0; r < Ho + Wo; ++r) {
      int32_t lo = INT32_MAX, hi = INT32_MIN;
      for (int64_t lane = 0; lane < 32; ++lane) {
        int32_t l, h;
        max_pool_line_span(r, lane, 32, c0, g, H, W, Ho, Wo, cl, winner_of, l, h);
        lo = std::min(lo, l), hi = std::max(hi, h);
      }
      if (r < Ho) row_lo[size_t(r)] = lo, row_hi[size_t(r)] = hi;
      else col_lo[size_t(r - Ho)] = lo, col_hi[size_t(r - Ho)] = hi;
    }
    pool_running_min_from_end(row_lo.data(), Ho);
    pool_running_max(row_hi.data(), Ho);
    pool_running_min_from_end(col_lo.data(), Wo);
    pool_running_max(col_hi.data(), Wo);
    for (int64_t e = 0; e < g * H * W; ++e) {
      const PoolPos x = max_pool_gather_pos(e, n, c0, g, H, W, cl);
      const PoolLines rows = pool_lines_holding(row_lo.data(), row_hi.data(), Ho, x.h);
      const PoolLines cols = pool_lines_holding(col_lo.data(), col_hi.data(), Wo, x.w);
      visited += std::max<int64_t>(0, rows.end - rows.begin) * std::max<int64_t>(0, cols.end - cols.begin);
      const auto winner = [&](int64_t oh, int64_t ow) { return ip[offset(idx, x.n, x.c, oh, ow)]; };
      const auto grad = [&](int64_t oh, int64_t ow) { return Acc<T>(gp[offset(go, x.n, x.c, oh, ow)]); };
      dp[offset(gx, x.n, x.c, x.h, x.w)] = T(max_pool_gather<Acc<T>>(x.h * W + x.w, rows, cols, winner, grad));
    }
  }
  return visited;
}

template <class F>
void with_type(DType t, const F& f) {
  if (t == kF32) f.template operator()<float>();
  else if (t == kF16) f.template operator()<Half>();
  else if (t == kBF16) f.template operator()<BFloat16>();
  else f.template operator()<double>();
}

struct PoolCase {
  Shape x;
  kernels::Pool2dParams p;
};

const std::vector<PoolCase> kCases{
    {{2, 3, 9, 11}, {3, 3, 2, 2, 1, 1}},                                        // overlapping, padding, odd C
    {{2, 5, 8, 8}, {2, 2, 2, 2, 0, 0}},   {{1, 13, 7, 6}, {3, 2, 1, 1, 1, 0}},  // overlapping by stride 1
    {{3, 16, 10, 9}, {3, 3, 2, 2, 0, 0}},                                       // C a multiple of the vectors
    {{2, 8, 5, 12}, {4, 4, 3, 1, 2, 2}},  {{1, 24, 4, 4}, {4, 4, 1, 1, 0, 0}},  // one window
    {{2, 1, 6, 7}, {3, 3, 2, 2, 1, 1}},                                         // one channel
};

}  // namespace

TEST_CASE("pool nhwc: positions counted channels-last are a channels-last tensor's memory order") {
  for (const Shape& s : {Shape{2, 3, 4, 5}, Shape{1, 8, 1, 7}, Shape{3, 1, 2, 2}, Shape{2, 16, 3, 1}}) {
    Tensor t = make_tensor(s, kF32, Device::cpu(), MemoryFormat::ChannelsLast);
    for (int64_t i = 0; i < t.numel(); ++i) {
      const PoolPos q = pool_pos_channels_last(i, s[1], s[2], s[3]);
      REQUIRE_MESSAGE(offset(t, q.n, q.c, q.h, q.w) == i, shape_str(s), " element ", i);
    }
  }
}

TEST_CASE("pool nhwc: a thread takes a 16-byte vector of channels only where C and the alignment allow") {
  const auto cl = [](const Shape& s, DType t) { return make_tensor(s, t, Device::cpu(), MemoryFormat::ChannelsLast); };
  CHECK(vector_of(cl({2, 16, 5, 5}, kF16)) == 8);
  CHECK(vector_of(cl({2, 8, 5, 5}, kBF16)) == 8);
  CHECK(vector_of(cl({2, 8, 5, 5}, kF32)) == 4);
  CHECK(vector_of(cl({2, 4, 5, 5}, kF32)) == 4);
  CHECK(vector_of(cl({2, 6, 5, 5}, kF64)) == 2);
  CHECK(vector_of(cl({64, 64, 32, 32}, kF32)) == 4);
  CHECK(vector_of(cl({2, 12, 5, 5}, kF16)) == 1);  // C not a multiple of 8
  CHECK(vector_of(cl({2, 6, 5, 5}, kF32)) == 1);
  CHECK(vector_of(cl({2, 13, 3, 3}, kF32)) == 1);
  CHECK(vector_of(cl({2, 3, 3, 3}, kF16)) == 1);
  CHECK(vector_of(empty({2, 16, 5, 5}, TensorOptions(kF16))) == 1);  // (N, C, H, W): channels strided
  // Channels 1.. of a channels-last tensor: unit-strided, but 2 bytes past the alignment.
  CHECK(vector_of(cl({2, 24, 5, 5}, kF16).slice(1, 1, 17)) == 1);
  // Channels 8..24: aligned, every pixel's vector too.
  CHECK(vector_of(cl({2, 24, 5, 5}, kF16).slice(1, 8, 24)) == 8);
  // Every other pixel of a row: the W stride 2 * 8 halves, still whole vectors.
  CHECK(vector_of(cl({2, 8, 5, 6}, kF16).slice(3, 0, 6, 2)) == 8);
  // A pixel stride of 12 floats with C = 4 (channels 0..4 of 12): 48 bytes, aligned.
  CHECK(vector_of(cl({2, 12, 3, 3}, kF32).slice(1, 0, 4)) == 4);
  // Of 6 floats (24 bytes): not.
  CHECK(vector_of(cl({2, 6, 3, 3}, kF32).slice(1, 0, 4)) == 1);
  // Dims of size 1 do not count, whatever their stride.
  const int64_t size[4] = {1, 8, 1, 1}, stride[4] = {3, 1, 5, 7};
  CHECK(pool_channel_vector(size, stride, 2, 0) == 8);
  CHECK(pool_channel_vector(size, stride, 2, 8) == 1);
}

TEST_CASE("pool nhwc: the channels-last forwards give the CPU's results bit for bit, V channels at a time") {
  for (DType t : {kF32, kF16, kBF16, kF64})
    for (size_t ci = 0; ci < kCases.size(); ++ci)
      for (Kind kind : {Kind::Max, Kind::Avg, Kind::AvgPad, Kind::Adaptive}) {
        const PoolCase& k = kCases[ci];
        const kernels::Pool2dParams& p = k.p;
        const Tensor x = pool_input(k.x, t, 10 + ci, kind == Kind::Max).contiguous(MemoryFormat::ChannelsLast);
        const int64_t Ho = kind == Kind::Adaptive ? 3 : (k.x[2] + 2 * p.pad_h - p.kernel_h) / p.stride_h + 1;
        const int64_t Wo = kind == Kind::Adaptive ? 4 : (k.x[3] + 2 * p.pad_w - p.kernel_w) / p.stride_w + 1;
        const Shape os{k.x[0], k.x[1], Ho, Wo};
        Tensor want = empty(os, TensorOptions(t)), want_idx = empty(os, TensorOptions(kI64));
        switch (kind) {
          case Kind::Max: kernels::max_pool2d_forward(Device::cpu(), want, want_idx, x, p); break;
          case Kind::Avg: kernels::avg_pool2d_forward(Device::cpu(), want, x, p, false); break;
          case Kind::AvgPad: kernels::avg_pool2d_forward(Device::cpu(), want, x, p, true); break;
          case Kind::Adaptive: kernels::adaptive_avg_pool2d_forward(Device::cpu(), want, x); break;
        }
        const int64_t v = vector_of(x);
        with_type(t, [&]<class T>() {
          for (int64_t width : {int64_t(1), v}) {
            const std::string what = std::string(dtype_name(t)) + " case " + std::to_string(ci) + " kind " +
                                     std::to_string(int(kind)) + " V " + std::to_string(width);
            Tensor got = empty(os, TensorOptions(t)), got_idx = zeros(os, TensorOptions(kI64));
            if (width == 1) nhwc_forward<T, 1>(kind, x, got, got_idx, p);
            else if (width == 2) nhwc_forward<T, 2>(kind, x, got, got_idx, p);
            else if (width == 4) nhwc_forward<T, 4>(kind, x, got, got_idx, p);
            else nhwc_forward<T, 8>(kind, x, got, got_idx, p);
            check_same(got, want, what);
            if (kind == Kind::Max) check_same(got_idx, want_idx, what + " indices");
          }
        });
      }
}

TEST_CASE("pool nhwc: the gathered max pool backward adds the CPU's sums in its order, bit for bit") {
  for (DType t : {kF32, kF16, kBF16, kF64})
    for (size_t ci = 0; ci < kCases.size(); ++ci) {
      const PoolCase& k = kCases[ci];
      const kernels::Pool2dParams& p = k.p;
      const Tensor x = pool_input(k.x, t, 20 + ci, ci % 2 == 0);
      const Shape os{k.x[0], k.x[1], (k.x[2] + 2 * p.pad_h - p.kernel_h) / p.stride_h + 1,
                     (k.x[3] + 2 * p.pad_w - p.kernel_w) / p.stride_w + 1};
      Tensor out = empty(os, TensorOptions(t)), idx = empty(os, TensorOptions(kI64));
      kernels::max_pool2d_forward(Device::cpu(), out, idx, x, p);
      // Gradients of a few exact values, so that several outputs picking one input sum to a
      // result that depends on the order of the additions.
      const Tensor go = (sample(os, kF64, 30 + ci) * 1000.0).to(t);
      Tensor want = empty(k.x, TensorOptions(t));
      kernels::max_pool2d_backward(Device::cpu(), want, go, idx);
      // The windows the gather may visit: those holding each input element, at most.
      int64_t windows = 0;
      for (int64_t h = 0; h < k.x[2]; ++h)
        for (int64_t w = 0; w < k.x[3]; ++w)
          for (int64_t oh = 0; oh < os[2]; ++oh)
            for (int64_t ow = 0; ow < os[3]; ++ow) {
              const PoolWindow wh = pool_window(oh, p.stride_h, p.pad_h, p.kernel_h, k.x[2]);
              const PoolWindow ww = pool_window(ow, p.stride_w, p.pad_w, p.kernel_w, k.x[3]);
              windows += h >= wh.lo && h < wh.hi && w >= ww.lo && w < ww.hi;
            }
      with_type(t, [&]<class T>() {
        // Indices and gradients (N, C, H, W) and channels-last; blocks of the kernel's 256 threads
        // and of fewer (more blocks, fewer planes each).
        for (bool cl : {false, true})
          for (int64_t block : {256, 32}) {
            const std::string what = std::string(dtype_name(t)) + " case " + std::to_string(ci) +
                                     (cl ? " channels-last" : "") + " block " + std::to_string(block);
            const MemoryFormat f = cl ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous;
            Tensor got = zeros(k.x, TensorOptions(t)).fill_(7.0);  // every element must be written
            const int64_t visited = gather_backward<T>(got, go.contiguous(f), idx.contiguous(f), block);
            check_same(got, want, what);
            const int64_t planes = k.x[0] * k.x[1];
            CHECK_MESSAGE(visited <= windows * planes, what, ": visited ", visited, " outputs, windows ",
                          windows * planes);
          }
      });
    }
}

TEST_CASE("pool nhwc: several outputs picking one input add in (oh, ow) order, as the CPU does") {
  // One large value at (3, 3) that all 9 windows of a 3x3 / stride 1 / padding 1 pool around it
  // pick, with gradients whose float sum depends on the order: 1e8, then eight 1s and -1e8.
  Tensor x = zeros({1, 1, 7, 7});
  x.slice(2, 3, 4).slice(3, 3, 4).fill_(5.0);
  const kernels::Pool2dParams p{3, 3, 1, 1, 1, 1};
  Tensor out = empty({1, 1, 7, 7}), idx = empty({1, 1, 7, 7}, TensorOptions(kI64));
  kernels::max_pool2d_forward(Device::cpu(), out, idx, x, p);
  std::vector<double> g(49, 0.0);
  for (int64_t oh = 2; oh <= 4; ++oh)
    for (int64_t ow = 2; ow <= 4; ++ow) g[size_t(oh * 7 + ow)] = 1.0;
  g[2 * 7 + 2] = 1e8;
  g[4 * 7 + 4] = -1e8;
  const Tensor go = from_vector(g, {1, 1, 7, 7});
  Tensor want = empty({1, 1, 7, 7}), got = empty({1, 1, 7, 7});
  kernels::max_pool2d_backward(Device::cpu(), want, go, idx);
  gather_backward<float>(got, go, idx, 256);
  check_same(got, want, "nine winners at one input");
  // 1e8 + 1 + ... rounds each 1 away; -1e8 last leaves 0, where any other order would leave more.
  CHECK(values(got)[3 * 7 + 3] == 0.0);
}

TEST_CASE("pool nhwc: monotone spans and the lines holding a position") {
  std::vector<int32_t> lo{3, 0, 4, 6, 5}, hi{2, 5, 4, 9, 7};
  pool_running_min_from_end(lo.data(), 5);
  pool_running_max(hi.data(), 5);
  CHECK(lo == std::vector<int32_t>{0, 0, 4, 5, 5});
  CHECK(hi == std::vector<int32_t>{2, 5, 5, 9, 9});
  CHECK(pool_first_above(hi.data(), 5, 1) == 0);
  CHECK(pool_first_above(hi.data(), 5, 4) == 1);
  CHECK(pool_first_above(hi.data(), 5, 9) == 5);
  const PoolLines a = pool_lines_holding(lo.data(), hi.data(), 5, 4),
                  b = pool_lines_holding(lo.data(), hi.data(), 5, 8);
  CHECK(a.begin == 1);
  CHECK(a.end == 3);
  CHECK(b.begin == 3);
  CHECK(b.end == 5);
  CHECK(pool_first_above(hi.data(), 0, 3) == 0);
  CHECK(max_pool_gather_group(64, 16 * 16, true, 256) == 32);
  CHECK(max_pool_gather_group(5, 16 * 16, true, 256) == 5);
  CHECK(max_pool_gather_group(64, 16 * 16, false, 256) == 1);
  CHECK(max_pool_gather_group(64, 4 * 4, false, 256) == 16);
  CHECK(max_pool_gather_group(3, 2 * 2, false, 256) == 3);
}
