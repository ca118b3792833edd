// The direct convolution's driver: picks the ISA loop (cpu/conv_direct_avx512.cpp or
// cpu/conv_direct_avx2.cpp, following the GEMM kernel choice), copies each sample into a
// zero-padded buffer whose rows are whole vectors wide, and splits the work over the threads: the
// forward and input gradient by sample when the batch has enough of them, else by blocks of
// output channels. The weight gradient has its own driver, cpu/conv_weight_grad.cpp.
#include "cpu/conv_direct.h"

#include <algorithm>
#include <atomic>
#include <vector>

#include "cpu/conv_operand.h"
#include "cpu/gemm.h"
#include "cpu/kernels.h"
#include "kernels/views.h"
#include "tensor/error.h"
#include "tensor/half.h"
#include "tensor/parallel.h"
#include "switches/list/toggles.h"

namespace mdl::cpu {

namespace {

// Weights in the layout DirectConvPlane describes, for all groups one after another, from
// at(g, co, c, t): group g's output channel co, input channel c, tap t = ki * kw + kj.
template <class At>
Scratch<float> pack_weights(int64_t G, int64_t cog, int64_t cig, int64_t kk, int64_t K, const At& at) {
  const int64_t blocks = (cog + K - 1) / K;
  Scratch<float> p(G * blocks * cig * kk * K, 0.0f);
  for (int64_t g = 0; g < G; ++g)
    for (int64_t co = 0; co < cog; ++co)
      for (int64_t c = 0; c < cig; ++c)
        for (int64_t t = 0; t < kk; ++t) p[(((g * blocks + co / K) * cig + c) * kk + t) * K + co % K] = at(g, co, c, t);
  return p;
}

// Weights packed for the row tile, from the same at(g, co, c, t): p[((g * cig + c) * kk + t) *
// cop + co], zero for co >= cog.
template <class At>
Scratch<float> pack_weight_rows(int64_t G, int64_t cog, int64_t cig, int64_t kk, int64_t cop, const At& at) {
  Scratch<float> p(G * cig * kk * cop, 0.0f);
  for (int64_t g = 0; g < G; ++g)
    for (int64_t co = 0; co < cog; ++co)
      for (int64_t c = 0; c < cig; ++c)
        for (int64_t t = 0; t < kk; ++t) p[((g * cig + c) * kk + t) * cop + co] = at(g, co, c, t);
  return p;
}

// Row-packed weights (pack_weight_rows, cig input channels) as bf16 pairs for the pair tile:
// p[((g * cip + cp) * kk + t) * cop + co] = (input channels 2cp and 2cp + 1, zero past cig),
// with cip = ceil(cig / 2).
Scratch<uint32_t> pair_weight_rows(const Scratch<float>& rows, int64_t G, int64_t cig, int64_t kk, int64_t cop) {
  const int64_t cip = (cig + 1) / 2;
  Scratch<uint32_t> p(G * cip * kk * cop);
  for (int64_t g = 0; g < G; ++g)
    for (int64_t c = 0; c < cig; c += 2)
      for (int64_t t = 0; t < kk; ++t) {
        const float* lo = rows.data() + ((g * cig + c) * kk + t) * cop;
        detail::bf16_pairs_avx512(lo, c + 1 < cig ? lo + kk * cop : nullptr, cop,
                                  p.data() + ((g * cip + c / 2) * kk + t) * cop);
      }
  return p;
}

// Which forward tile a conv takes: the row tile (lanes over output channels) with at least
// kRowChannels input and output channels per group; below that the plane tile (lanes over
// columns), where a row tile's few channels would leave its lanes or its FMAs idle. On an Ice
// Lake (bench_conv, 2 threads, three alternations) the row tile took SimpleCNN's second conv
// forward from 7.1-7.3 ms to 5.7-5.8, a ResNet 3x3 64 -> 64 forward from 15.3-19.5 to 13.8-14.6;
// with one input channel (SimpleCNN's first conv) it took 1.6 ms where the plane tile takes 1.1.
constexpr int64_t kRowChannels = 8;
bool use_rows(int64_t cig, int64_t cog) { return cig >= kRowChannels && cog >= kRowChannels; }

// A conv with stride 1 and dilation 1 over x (N, C, H, W; f32 or bf16, read into the padded
// buffers as floats) with weights w packed by pack_weights (plane tile) or pack_weight_rows (row
// tile, with bias padded to G * cop floats) into out (N, C_out, Ho, Wo) contiguous: f32, or bf16
// (out16), each sample then computed in a float buffer and rounded once.
struct Job {
  const detail::DirectIsa& isa;
  const void* x;
  DType xt;
  int64_t xs[4];
  int64_t N, C, H, W, G, kh, kw, ph, pw;
  const float* w;
  const float* bias;
  float* out;
  BFloat16* out16;
  int64_t Cout, Ho, Wo;
  bool rows_tile;
  // The pair tile (row tile on bf16 values): its loop and the weights packed by pair_weight_rows.
  detail::ConvGemmRowPairsFn pair_row = nullptr;
  const uint32_t* wpairs = nullptr;

  int64_t cig() const { return C / G; }
  int64_t cip() const { return (cig() + 1) / 2; }
  int64_t cog() const { return Cout / G; }
  int64_t cop() const { return (cog() + isa.lanes - 1) / isa.lanes * isa.lanes; }
  int64_t wq() const { return (Wo + isa.lanes - 1) / isa.lanes * isa.lanes + kw - 1; }
  int64_t hp() const { return Ho + kh - 1; }
  int64_t plane() const { return hp() * wq(); }

  // buf (c1 - c0, hp, width) = channels [c0, c1) of sample n of x, zero-padded and moved left by
  // `shift` columns: buf[c - c0, r, q] = x[n, c, r - ph, q + shift - pw], zero outside x.
  void pad(int64_t n, float* buf, int64_t width, int64_t shift, int64_t c0, int64_t c1) const {
    const int64_t plane = hp() * width;
    std::fill(buf, buf + (c1 - c0) * plane, 0.0f);
    const int64_t rows = std::min(H, hp() - ph);
    const int64_t q0 = std::max<int64_t>(0, pw - shift), q1 = std::min(width, W + pw - shift);  // columns from x
    if (q1 <= q0) return;
    const char* xb = static_cast<const char*>(x);
    const int64_t es = int64_t(dtype_size(xt));
    for (int64_t c = c0; c < c1; ++c)
      for (int64_t ih = 0; ih < rows; ++ih) {
        const char* src = xb + es * (n * xs[0] + c * xs[1] + ih * xs[2] + (q0 + shift - pw) * xs[3]);
        read_floats(src, xt, xs[3], buf + (c - c0) * plane + (ih + ph) * width + q0, q1 - q0);
      }
  }
  void pad(int64_t n, float* buf) const { pad(n, buf, wq(), 0, 0, C); }

  // Where the tiles write sample n: the output itself when f32, else buf, rounded into it by emit.
  int64_t sample_size() const { return Cout * Ho * Wo; }
  float* sample_out(int64_t n, Scratch<float>& buf) const {
    if (out) return out + n * sample_size();
    buf.resize(sample_size());
    return buf.data();
  }
  void emit(int64_t n, const float* sample) const {
    if (out16) f32_to_bf16(sample, out16 + n * sample_size(), sample_size());
  }

  detail::DirectConvPlane plane_of(const float* padded, float* sample, int64_t g) const {
    const int64_t packed = (cog() + isa.channels - 1) / isa.channels * isa.channels * cig() * kh * kw;
    return {
        padded + g * cig() * plane(), plane(), wq(), w + g * packed, cig(), kh, kw, bias ? bias + g * cog() : nullptr,
        sample + g * cog() * Ho * Wo, Ho,      Wo};
  }

  // The row tiles' view of group g of a padded sample (f32, C planes) or of its pairs (cip() planes
  // a group), with the weights packed to match, writing to outT (the sample's output transposed,
  // G * Ho * Wo rows of cop floats, group g's first).
  template <class E>
  detail::ConvGemmRowOf<E> row_of(const E* sample, const E* weights, int64_t cin, float* outT, int64_t g) const {
    return {sample + g * cin * plane(),
            plane(),
            wq(),
            weights + g * cin * kh * kw * cop(),
            cop(),
            cin,
            kh,
            kw,
            bias ? bias + g * cop() : nullptr,
            outT + g * Ho * Wo * cop(),
            Wo};
  }
  // A sample's output (C_out, Ho, Wo) from outT.
  void store(const float* outT, float* sample) const {
    for (int64_t g = 0; g < G; ++g)
      detail::transpose_rows_avx2(outT + g * Ho * Wo * cop(), cop(), Ho * Wo, cog(), sample + g * cog() * Ho * Wo,
                                  Ho * Wo);
  }
  int64_t co_blocks() const {
    const int64_t step = isa.row_vectors * isa.lanes;
    return (cop() + step - 1) / step;
  }
  // Rows [oh0, oh1) of output channel block cb (isa.row_vectors vectors) of one sample and group,
  // each cut into near-equal tiles of at most isa.row_pixels pixels, by tile(r, oh, ow0, k, co, nv).
  template <class R, class Tile>
  void rows(const R& r, Tile tile, int64_t cb, int64_t oh0, int64_t oh1) const {
    const int64_t co = cb * isa.row_vectors * isa.lanes;
    const int nv = int(std::min<int64_t>(isa.row_vectors, (cop() - co) / isa.lanes));
    const int64_t tiles = (Wo + isa.row_pixels - 1) / isa.row_pixels;
    for (int64_t oh = oh0; oh < oh1; ++oh)
      for (int64_t i = 0; i < tiles; ++i) {
        const int64_t ow0 = Wo * i / tiles, ow1 = Wo * (i + 1) / tiles;
        tile(r, oh, ow0, int(ow1 - ow0), co, nv);
      }
  }
  // One sample in the row tiles' buffers: zero-padded, in bf16 pairs for the pair tile, and its
  // output transposed.
  struct RowBuffers {
    Scratch<float> padded, outT;
    Scratch<uint32_t> pairs;
  };
  RowBuffers row_buffers() const {
    return {Scratch<float>(pairs_from_bf16() ? 0 : C * plane()), Scratch<float>(G * Ho * Wo * cop()),
            Scratch<uint32_t>(pair_row ? G * cip() * plane() : 0)};
  }
  // bf16 input on the pair tile: its channel pairs interleaved straight from bf16, zero-padded.
  bool pairs_from_bf16() const { return pair_row && xt == kBF16; }
  void pad_pairs(int64_t n, uint32_t* pairs) const {
    std::fill(pairs, pairs + G * cip() * plane(), 0u);
    const int64_t rows = std::min(H, hp() - ph), q0 = std::min(pw, wq()), q1 = std::min(wq(), W + pw);
    const uint16_t* xb = static_cast<const uint16_t*>(x);
    for (int64_t g = 0; g < G; ++g)
      for (int64_t cp = 0; cp < cip(); ++cp) {
        const int64_t c = g * cig() + 2 * cp;
        const bool odd = 2 * cp + 1 == cig();  // the last channel of an odd count pairs with zero
        for (int64_t ih = 0; ih < rows; ++ih) {
          uint32_t* dst = pairs + (g * cip() + cp) * plane() + (ih + ph) * wq();
          const uint16_t* lo = xb + n * xs[0] + c * xs[1] + ih * xs[2];
          const uint16_t* hi = odd ? lo : lo + xs[1];
          const uint32_t hi_mask = odd ? 0u : 0xffffu;
          for (int64_t q = q0; q < q1; ++q) {
            const int64_t at = (q - pw) * xs[3];
            dst[q] = uint32_t(lo[at]) | (uint32_t(hi[at] & hi_mask) << 16);
          }
        }
      }
  }
  void load_sample(int64_t n, RowBuffers& b) const {
    if (pairs_from_bf16()) return pad_pairs(n, b.pairs.data());
    pad(n, b.padded.data());
    if (!pair_row) return;
    for (int64_t g = 0; g < G; ++g)
      for (int64_t cp = 0; cp < cip(); ++cp) {
        const float* lo = b.padded.data() + (g * cig() + 2 * cp) * plane();
        detail::bf16_pairs_avx512(lo, 2 * cp + 1 < cig() ? lo + plane() : nullptr, plane(),
                                  b.pairs.data() + (g * cip() + cp) * plane());
      }
  }
  void tile_rows(RowBuffers& b, int64_t g, int64_t cb, int64_t oh0, int64_t oh1) const {
    if (pair_row) return rows(row_of(b.pairs.data(), wpairs, cip(), b.outT.data(), g), pair_row, cb, oh0, oh1);
    rows(row_of(b.padded.data(), w, cig(), b.outT.data(), g), isa.row, cb, oh0, oh1);
  }
  void run_rows() const {
    if (N >= get_num_threads() || in_parallel_region()) {
      parallel_for(0, N, 1, [&](int64_t n0, int64_t n1) {
        RowBuffers b = row_buffers();
        Scratch<float> sbuf;
        for (int64_t n = n0; n < n1; ++n) {
          load_sample(n, b);
          for (int64_t g = 0; g < G; ++g)
            for (int64_t cb = 0; cb < co_blocks(); ++cb) tile_rows(b, g, cb, 0, Ho);
          float* sample = sample_out(n, sbuf);
          store(b.outT.data(), sample);
          emit(n, sample);
        }
      });
      return;
    }
    // Fewer samples than threads: each sample's (group, channel block, row) items are shared out.
    RowBuffers b = row_buffers();
    Scratch<float> sbuf;
    const int64_t items = G * co_blocks() * Ho;
    for (int64_t n = 0; n < N; ++n) {
      load_sample(n, b);
      parallel_for(0, items, 1, [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) {
          const int64_t g = i / (co_blocks() * Ho), cb = i / Ho % co_blocks(), oh = i % Ho;
          tile_rows(b, g, cb, oh, oh + 1);
        }
      });
      float* sample = sample_out(n, sbuf);
      store(b.outT.data(), sample);
      emit(n, sample);
    }
  }

  void run() const {
    if (rows_tile) return run_rows();
    const int nt = get_num_threads();
    if (N >= nt || in_parallel_region()) {
      parallel_for(0, N, 1, [&](int64_t n0, int64_t n1) {
        Scratch<float> buf(C * plane()), sbuf;
        for (int64_t n = n0; n < n1; ++n) {
          pad(n, buf.data());
          float* sample = sample_out(n, sbuf);
          for (int64_t g = 0; g < G; ++g) isa.plane(plane_of(buf.data(), sample, g), 0, cog());
          emit(n, sample);
        }
      });
      return;
    }
    // Fewer samples than threads: each sample's channel blocks are shared out.
    Scratch<float> buf(C * plane()), sbuf;
    constexpr int64_t kBlock = 12;
    const int64_t blocks = (cog() + kBlock - 1) / kBlock;
    for (int64_t n = 0; n < N; ++n) {
      pad(n, buf.data());
      float* sample = sample_out(n, sbuf);
      parallel_for(0, G * blocks, 1, [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) {
          const int64_t g = i / blocks, co = i % blocks * kBlock;
          isa.plane(plane_of(buf.data(), sample, g), co, std::min(cog(), co + kBlock));
        }
      });
      emit(n, sample);
    }
  }
};

}  // namespace

namespace detail {
const DirectIsa* direct_isa() {
  static constexpr DirectIsa avx512{direct_conv_plane_avx512, weight_grad_gemm_avx512,  conv_gemm_row_avx512,
                                    kDirectLanesAvx512,       kDirectChannelsAvx512,    kConvRowPixelsAvx512,
                                    kConvRowVectorsAvx512,    kWeightGradVectorsAvx512, "avx512f 4x6x16"};
  static constexpr DirectIsa avx2{direct_conv_plane_avx2, weight_grad_gemm_avx2,  conv_gemm_row_avx2,
                                  kDirectLanesAvx2,       kDirectChannelsAvx2,    kConvRowPixelsAvx2,
                                  kConvRowVectorsAvx2,    kWeightGradVectorsAvx2, "avx2-fma 3x3x8"};
  if (!toggles::direct_conv()) return nullptr;
  switch (gemm_f32_kernel()) {
    case GemmKernel::avx512:
    case GemmKernel::avx512_bf16:  // forced (tests): AVX-512 CPUs
    case GemmKernel::avx512_bf16_emulated: return &avx512;
    case GemmKernel::avx2: return &avx2;
    default: return nullptr;
  }
}

const DirectPairLoops* direct_pair_loops(const kernels::Conv2dParams& p) {
  static constexpr DirectPairLoops native{conv_gemm_row_bf16, weight_grad_gemm_bf16};
  static constexpr DirectPairLoops emulated{conv_gemm_row_bf16_emulated, weight_grad_gemm_bf16_emulated};
  if (!p.bf16_values) return nullptr;
  switch (gemm_bf16_values_kernel()) {
    case GemmKernel::avx512_bf16: return &native;
    case GemmKernel::avx512_bf16_emulated: return &emulated;
    default: return nullptr;
  }
}
}  // namespace detail

const char* direct_conv_kernel_name() {
  const detail::DirectIsa* k = detail::direct_isa();
  return k ? k->name : nullptr;
}

bool direct_conv_applies(const Tensor& x, const Tensor& w, const kernels::Conv2dParams& p) {
  // bf16 values go to AMX's GEMM where it runs; otherwise direct, whose row tile multiplies them in pairs
  // where VDPBF16PS runs. One input channel a group stays direct (its plane tile) even there: a K of
  // kH*kW fills no AMX tile, and im2col would take a one-channel input to the depthwise kernel in f32.
  const bool amx = (p.bf16_values || x.dtype() == kBF16) && gemm_bf16_values_kernel() == GemmKernel::amx_bf16 &&
                   w.size(1) > 1;
  return (x.dtype() == kF32 || x.dtype() == kBF16) && w.dtype() == x.dtype() && !amx && p.stride_h == 1 &&
         p.stride_w == 1 && p.dil_h == 1 && p.dil_w == 1 && (p.groups == 1 || p.groups != x.size(1)) &&
         detail::direct_isa() != nullptr && w.size(2) > 0 && w.size(3) > 0;
}

bool direct_weight_grad_pays(const Tensor& x, const Tensor& w, const kernels::Conv2dParams& p) {
  return direct_conv_applies(x, w, p) && (detail::direct_isa()->lanes == detail::kDirectLanesAvx512 || w.size(1) > 1);
}

bool direct_conv_weights_fit(const Tensor& w, const kernels::Conv2dParams& p) {
  constexpr int64_t kMaxGroupWeights = int64_t(1) << 18;  // f32 values: 1 MiB
  const int64_t per_group = w.size(0) / std::max<int64_t>(p.groups, 1) * w.size(1) * w.size(2) * w.size(3);
  return !toggles::im2col_large_weights() || per_group <= kMaxGroupWeights;
}

bool direct_conv_backward_input_applies(const Tensor& x, const Tensor& w, const kernels::Conv2dParams& p) {
  return direct_conv_applies(x, w, p) && p.pad_h <= w.size(2) - 1 && p.pad_w <= w.size(3) - 1;
}

void direct_conv2d_forward(const Tensor& out, const Tensor& x, const Tensor& w_, const Tensor& b_,
                           const kernels::Conv2dParams& p) {
  const detail::DirectIsa* k = detail::direct_isa();
  MDL_CHECK(k, "direct_conv2d_forward: no direct kernel for this CPU or setting");
  const Tensor w = kernels::contiguous(w_), b = b_.defined() ? kernels::contiguous(b_) : b_;
  const int64_t G = p.groups, cog = w.size(0) / G, cig = w.size(1), kk = w.size(2) * w.size(3);
  Scratch<float> w_store, b_store;
  const float* wp = float_values(w, w_store);
  const float* bp = b.defined() ? float_values(b, b_store) : nullptr;
  const auto at = [&](int64_t g, int64_t co, int64_t c, int64_t t) { return wp[((g * cog + co) * cig + c) * kk + t]; };
  const bool rows = use_rows(cig, cog);
  const int64_t cop = (cog + k->lanes - 1) / k->lanes * k->lanes;
  const detail::DirectPairLoops* pair = rows ? detail::direct_pair_loops(p) : nullptr;
  const Scratch<float> packed = rows ? pack_weight_rows(G, cog, cig, kk, cop, at)
                                     : pack_weights(G, cog, cig, kk, k->channels, at);
  const Scratch<uint32_t> pairs = pair ? pair_weight_rows(packed, G, cig, kk, cop) : Scratch<uint32_t>();
  Scratch<float> bias(rows && b.defined() ? G * cop : 0, 0.0f);
  for (int64_t g = 0; g < G && !bias.empty(); ++g) std::copy_n(bp + g * cog, cog, bias.data() + g * cop);
  Job job{*k,
          x.raw_data(),
          x.dtype(),
          {x.stride(0), x.stride(1), x.stride(2), x.stride(3)},
          x.size(0),
          x.size(1),
          x.size(2),
          x.size(3),
          p.groups,
          w.size(2),
          w.size(3),
          p.pad_h,
          p.pad_w,
          packed.data(),
          !b.defined() ? nullptr
          : rows       ? bias.data()
                       : bp,
          out.dtype() == kF32 ? out.data_ptr<float>() : nullptr,
          out.dtype() == kF32 ? nullptr : out.data_ptr<BFloat16>(),
          out.size(1),
          out.size(2),
          out.size(3),
          rows,
          pair ? pair->row : nullptr,
          pairs.data()};
  job.run();
}

// grad_x[n, c, ih, iw] = sum over (co, ki, kj) of w[co, c, ki, kj] grad_out[n, co, ih + ph - ki, iw + pw - kj]:
// a stride-1 conv of grad_out with w flipped in both spatial axes and its channel axes swapped
// per group, padded by k - 1 - pad.
void direct_conv2d_backward_input(const Tensor& gx, const Tensor& go, const Tensor& w_,
                                  const kernels::Conv2dParams& p) {
  const detail::DirectIsa* k = detail::direct_isa();
  MDL_CHECK(k, "direct_conv2d_backward_input: no direct kernel for this CPU or setting");
  const Tensor w = kernels::contiguous(w_);
  const int64_t Cout = w.size(0), cig = w.size(1), kh = w.size(2), kw = w.size(3), G = p.groups, cog = Cout / G;
  const int64_t kk = kh * kw;
  Scratch<float> w_store;
  const float* wp = float_values(w, w_store);
  // Output channel c, input channel co of the flipped weights: w[co, c] rotated by 180 degrees.
  const auto at = [&](int64_t g, int64_t c, int64_t co, int64_t t) {
    return wp[((g * cog + co) * cig + c) * kk + (kk - 1 - t)];
  };
  const bool rows = use_rows(cog, cig);
  const int64_t cop = (cig + k->lanes - 1) / k->lanes * k->lanes;
  const detail::DirectPairLoops* pair = rows ? detail::direct_pair_loops(p) : nullptr;
  const Scratch<float> wt = rows ? pack_weight_rows(G, cig, cog, kk, cop, at)
                                 : pack_weights(G, cig, cog, kk, k->channels, at);
  const Scratch<uint32_t> pairs = pair ? pair_weight_rows(wt, G, cog, kk, cop) : Scratch<uint32_t>();
  Job job{*k,
          go.raw_data(),
          go.dtype(),
          {go.stride(0), go.stride(1), go.stride(2), go.stride(3)},
          go.size(0),
          Cout,
          go.size(2),
          go.size(3),
          G,
          kh,
          kw,
          kh - 1 - p.pad_h,
          kw - 1 - p.pad_w,
          wt.data(),
          nullptr,
          gx.dtype() == kF32 ? gx.data_ptr<float>() : nullptr,
          gx.dtype() == kF32 ? nullptr : gx.data_ptr<BFloat16>(),
          gx.size(1),
          gx.size(2),
          gx.size(3),
          rows,
          pair ? pair->row : nullptr,
          pairs.data()};
  job.run();
}

}  // namespace mdl::cpu
