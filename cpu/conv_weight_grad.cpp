// The direct path's weight gradient as an implicit GEMM: grad_out is transposed once per call into
// pixel-major rows of output channels and the input zero-padded (both in parallel), then tiles
// of (input channel, taps, output channels) accumulate grad_w^T in registers
// (cpu/conv_weight_grad_impl.h), over blocks of samples whose rows stay in L2 while every tile of
// the thread passes over them. Each tile sums its pixels in one fixed order, whatever the thread
// count: convs with few tiles split the batch into a fixed number of chunks, whose partial sums
// are added in chunk order. bf16 values (autocast bf16) take the tile on bf16 pairs of adjacent
// pixels where the bf16 GEMM kernel is VDPBF16PS or its emulation. grad_out and x may be bf16
// tensors: read into the float copies as they are made; the gradients f32 or bf16, rounded once.
#include <algorithm>
#include <cstring>
#include <vector>

#include "cpu/conv_direct.h"
#include "cpu/conv_operand.h"
#include "cpu/scratch.h"
#include "kernels/views.h"
#include "tensor/error.h"
#include "tensor/parallel.h"

namespace mdl::cpu {

namespace {

// Sum of n floats in vector lanes (a single running sum would wait on each add's latency).
double plane_sum(const float* p, int64_t n) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += p[i];
  return double(s);
}

// Fewer tiles than this split the batch into chunks, so that every thread has work.
constexpr int64_t kMinItems = 16;
// The bytes of transposed gradient a block of samples may take (half of L2).
constexpr int64_t kBlockBytes = int64_t(512) << 10;
// The rows of grad_w^T a bf16 grad_w's final transpose takes at a time: 64 bytes of each output row.
constexpr int64_t kPanelRows = 32;

}  // namespace

// grad_w[co, c, ki, kj] = sum over (n, oh, ow) of grad_out[n, co, oh, ow] x[n, c, oh + ki - ph, ow + kj - pw].
void direct_conv2d_backward_weight(const Tensor& gw, const Tensor& gb, const Tensor& go_, const Tensor& x,
                                   const kernels::Conv2dParams& p) {
  const detail::DirectIsa* isa = detail::direct_isa();
  MDL_CHECK(isa, "direct_conv2d_backward_weight: no direct kernel for this CPU or setting");
  const Tensor go = kernels::contiguous(go_);
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), G = p.groups;
  const int64_t Cout = go.size(1), Ho = go.size(2), Wo = go.size(3), P = Ho * Wo;
  // grad_out's plane (n, co) as floats: its own data when f32, else widened into buf (P floats).
  const DType got = go.dtype();
  const char* gob = static_cast<const char*>(go.raw_data());
  const auto go_planes = [&](int64_t n, int64_t co, int64_t planes, Scratch<float>& buf) -> const float* {
    const char* src = gob + (n * Cout + co) * P * int64_t(dtype_size(got));
    if (got == kF32) return reinterpret_cast<const float*>(src);
    buf.resize(planes * P);
    read_floats(src, got, 1, buf.data(), planes * P);
    return buf.data();
  };
  if (gb.defined()) {
    std::vector<float> sums(static_cast<size_t>(Cout));
    // Each thread's channels are contiguous planes of every sample: walked sample by sample (each
    // channel's planes still added in sample order), they stream.
    parallel_for(0, Cout, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(N * P, 1)), [&](int64_t c0, int64_t c1) {
      Scratch<float> buf;
      std::vector<double> s(size_t(c1 - c0), 0.0);
      for (int64_t n = 0; n < N; ++n) {
        const float* planes = go_planes(n, c0, c1 - c0, buf);
        for (int64_t co = c0; co < c1; ++co) s[size_t(co - c0)] += plane_sum(planes + (co - c0) * P, P);
      }
      for (int64_t co = c0; co < c1; ++co) sums[size_t(co)] = float(s[size_t(co - c0)]);
    });
    write_floats(sums.data(), gb);
  }
  if (!gw.defined()) return;
  const int64_t kh = gw.size(2), kw = gw.size(3), kk = kh * kw, cig = C / G, cog = Cout / G;
  const int64_t L = isa->lanes, cop = (cog + L - 1) / L * L, cob_floats = isa->weight_grad_vectors * L;
  const int64_t hp = H + 2 * p.pad_h, wp = W + 2 * p.pad_w, plane = hp * wp;  // stride 1: Ho + kh - 1 rows

  // Tile t: group g, input channel c, taps [tg * 9, ..), output channels [cb * cob_floats, ..):
  // t = ((g * cig + c) * tap_groups + tg) * co_blocks + cb.
  const int64_t tap_groups = (kk + detail::kWeightGradTaps - 1) / detail::kWeightGradTaps;
  const int64_t co_blocks = (cop + cob_floats - 1) / cob_floats, tiles = G * cig * tap_groups * co_blocks;
  const int64_t chunks = std::clamp<int64_t>((kMinItems + tiles - 1) / tiles, 1, N);
  const int64_t acc_size = G * cig * kk * cop;  // grad_w^T[g][c][t][co]
  Scratch<float> acc_buf(chunks * acc_size);    // each chunk's first block of samples stores every element
  float* acc = acc_buf.data();
  // bf16 values on the pair tile: per block, grad_out^T's adjacent pixels in pairs (wpairs per row)
  // and the padded input in bf16 (rows wp + 1 wide: a pair read at the row's end stays in it).
  const detail::DirectPairLoops* pair = detail::direct_pair_loops(p);
  const detail::WeightGradPairsFn pair_tile = pair ? pair->weight_grad : nullptr;
  const int64_t wpairs = (Wo + 1) / 2, wp16 = wp + 1, plane16 = hp * wp16;
  // A block of samples: its transposed grad_out, which every tile of the thread reads again, within
  // kBlockBytes (pairs of bf16 in half an f32 copy's bytes). Each channel's padded planes serve only
  // that channel's tiles, so they stream. Every block adds each tile's registers into acc once: with
  // 512 channels acc is 9 MiB, and blocks sized by both buffers (5 samples of 4x4) spent a fifth of
  // the bf16 weight gradient there.
  const int64_t gt_sample_bytes = G *
                                  (pair_tile ? Ho * wpairs * int64_t(sizeof(uint32_t)) : P * int64_t(sizeof(float))) *
                                  cop;
  const int64_t block = std::clamp<int64_t>(kBlockBytes / gt_sample_bytes, 1, N);
  const char* xd = static_cast<const char*>(x.raw_data());
  const int64_t xes = int64_t(dtype_size(x.dtype()));
  const int64_t xs0 = x.stride(0), xs1 = x.stride(1), xs2 = x.stride(2), xs3 = x.stride(3);
  // bf16 operands go to the pair tile's buffers as they are: the padded input copied in bf16, and
  // grad_out^T's pixel pairs, when rows are an even number of pixels wide, transposed as the 32-bit
  // words they already are (no f32 copy of either, no rounding).
  const bool x_bf16 = pair_tile && x.dtype() == kBF16;
  const bool go_words = pair_tile && got == kBF16 && Wo % 2 == 0;
  parallel_for(0, chunks * tiles, 1, [&](int64_t i0, int64_t i1) {
    // The thread's input channels, and its copies of a block of samples: gt[g][b][p][co] =
    // grad_out[n0 + b, g * cog + co, p] (zero for co >= cog), xp[b][c - c_lo] = x[n0 + b, c] zero-padded.
    const int64_t c_lo = i1 - i0 >= tiles ? 0 : i0 % tiles / co_blocks / tap_groups;
    const int64_t c_hi = i1 - i0 >= tiles ? G * cig : (i1 - 1) % tiles / co_blocks / tap_groups + 1;
    const int64_t chans = c_lo < c_hi ? c_hi - c_lo : G * cig;
    const int64_t c0 = c_lo < c_hi ? c_lo : 0;
    Scratch<float> gt_buf(go_words ? 0 : block * G * P * cop), xp_buf(x_bf16 ? 0 : block * chans * plane);
    float *gt = gt_buf.data(), *xp = xp_buf.data();
    Scratch<uint32_t> gtp_buf(pair_tile ? block * G * Ho * wpairs * cop : 0);
    Scratch<uint16_t> xp16_buf(pair_tile ? block * chans * plane16 : 0);
    uint32_t* gtp = gtp_buf.data();
    uint16_t* xp16 = xp16_buf.data();
    Scratch<float> go_buf;
    for (int64_t ch = i0 / tiles; ch * tiles < i1; ++ch) {
      const int64_t ta = std::max(i0, ch * tiles) - ch * tiles, tb = std::min(i1, (ch + 1) * tiles) - ch * tiles;
      const int64_t s0 = N * ch / chunks, s1 = N * (ch + 1) / chunks;
      for (int64_t n0 = s0; n0 < s1; n0 += block) {
        const int64_t nb = std::min(block, s1 - n0);
        for (int64_t g = 0; g < G; ++g)
          for (int64_t b = 0; b < nb; ++b) {
            if (go_words) {
              const uint16_t* src = reinterpret_cast<const uint16_t*>(gob) + ((n0 + b) * Cout + g * cog) * P;
              uint32_t* dst = gtp + (g * nb + b) * Ho * wpairs * cop;
              detail::transpose_rows_avx2(reinterpret_cast<const float*>(src), P / 2, cog, P / 2,
                                          reinterpret_cast<float*>(dst), cop);
              if (cop > cog)
                for (int64_t q = 0; q < P / 2; ++q) std::fill(dst + q * cop + cog, dst + (q + 1) * cop, 0u);
              continue;
            }
            float* dst = gt + (g * nb + b) * P * cop;
            detail::transpose_rows_avx2(go_planes(n0 + b, g * cog, cog, go_buf), P, cog, P, dst, cop);
            if (cop > cog)
              for (int64_t q = 0; q < P; ++q) std::fill(dst + q * cop + cog, dst + (q + 1) * cop, 0.0f);
          }
        for (int64_t b = 0; b < nb; ++b)
          for (int64_t c = c0; c < c0 + chans && x_bf16; ++c) {
            uint16_t* dst = xp16 + (b * chans + c - c0) * plane16;
            std::fill(dst, dst + plane16, uint16_t(0));
            const uint16_t* src = reinterpret_cast<const uint16_t*>(xd) + (n0 + b) * xs0 + c * xs1;
            for (int64_t ih = 0; ih < H; ++ih) {
              uint16_t* d = dst + (ih + p.pad_h) * wp16 + p.pad_w;
              const uint16_t* s = src + ih * xs2;
              if (xs3 == 1) std::memcpy(d, s, size_t(W) * sizeof(uint16_t));
              else
                for (int64_t iw = 0; iw < W; ++iw) d[iw] = s[iw * xs3];
            }
          }
        for (int64_t b = 0; b < nb && !x_bf16; ++b)
          for (int64_t c = c0; c < c0 + chans; ++c) {
            float* dst = xp + (b * chans + c - c0) * plane;
            std::fill(dst, dst + plane, 0.0f);
            const char* src = xd + ((n0 + b) * xs0 + c * xs1) * xes;
            for (int64_t ih = 0; ih < H; ++ih)
              read_floats(src + ih * xs2 * xes, x.dtype(), xs3, dst + (ih + p.pad_h) * wp + p.pad_w, W);
          }
        if (pair_tile) {
          for (int64_t r = 0; r < G * nb * Ho && !go_words; ++r)  // grad_out^T rows in pairs of pixels
            for (int64_t e = 0; e < wpairs; ++e) {
              const float* lo = gt + (r * Wo + 2 * e) * cop;
              detail::bf16_pairs_avx512(lo, 2 * e + 1 < Wo ? lo + cop : nullptr, cop, gtp + (r * wpairs + e) * cop);
            }
          for (int64_t r = 0; r < nb * chans * hp && !x_bf16; ++r) {  // the padded input in bf16
            detail::bf16_bits_avx512(xp + r * wp, wp, xp16 + r * wp16);
            xp16[r * wp16 + wp] = 0;
          }
        }
        for (int64_t t = ta; t < tb; ++t) {
          const int64_t cb = t % co_blocks, tg = t / co_blocks % tap_groups, gc = t / co_blocks / tap_groups;
          const int64_t g = gc / cig, t0 = tg * detail::kWeightGradTaps, co = cb * cob_floats;
          const int k = int(std::min<int64_t>(detail::kWeightGradTaps, kk - t0));
          const int nv = int(std::min<int64_t>(isa->weight_grad_vectors, (cop - co) / L));
          float* tile_acc = acc + ch * acc_size + gc * kk * cop;
          if (pair_tile) {
            const detail::WeightGradTilePairs a{gtp + g * nb * Ho * wpairs * cop,
                                                cop,
                                                xp16 + (gc - c0) * plane16,
                                                chans * plane16,
                                                wp16,
                                                Ho,
                                                wpairs,
                                                kh,
                                                kw,
                                                0,
                                                nb,
                                                tile_acc,
                                                n0 == s0};
            pair_tile(a, t0, k, co, nv);
            continue;
          }
          const detail::WeightGradTile a{gt + g * nb * P * cop,
                                         cop,
                                         xp + (gc - c0) * plane,
                                         chans * plane,
                                         wp,
                                         Ho,
                                         Wo,
                                         kh,
                                         kw,
                                         0,
                                         nb,
                                         tile_acc,
                                         n0 == s0};
          isa->weight_grad(a, t0, k, co, nv);
        }
      }
    }
  });

  // grad_w[g * cog + co, c, t] = the chunks' grad_w^T[g][c][t][co], added in chunk order into chunk
  // 0's rows, then each group's (cig * kk, cop) block transposed in tiles (a column walk of it
  // missed the cache at every element once it outgrew L2: 512 channels spent a third of their
  // weight gradient there). A bf16 grad_w takes each panel of kPanelRows rows transposed into
  // floats and rounded straight into its rows, with no f32 copy of grad_w written and read back.
  if (chunks > 1)
    parallel_for(0, acc_size, kGrainSize / std::max<int64_t>(chunks, 1), [&](int64_t e0, int64_t e1) {
      for (int64_t ch = 1; ch < chunks; ++ch)
        for (int64_t e = e0; e < e1; ++e) acc[e] += acc[ch * acc_size + e];
    });
  const int64_t rows = cig * kk;
  if (gw.dtype() == kF32) {
    float* gwp = gw.data_ptr<float>();
    parallel_for(0, G * rows, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(cog, 1)),
                 [&](int64_t i0, int64_t i1) {
                   for (int64_t i = i0; i < i1;) {
                     const int64_t g = i / rows, r0 = i % rows, r1 = std::min(rows, r0 + (i1 - i));
                     detail::transpose_rows_avx2(acc + (g * rows + r0) * cop, cop, r1 - r0, cog,
                                                 gwp + g * cog * rows + r0, rows);
                     i += r1 - r0;
                   }
                 });
    return;
  }
  MDL_CHECK(gw.dtype() == kBF16, "conv2d: the direct kernel writes f32 or bf16, got ", gw.dtype());
  BFloat16* gwb = gw.data_ptr<BFloat16>();
  const int64_t panels = (rows + kPanelRows - 1) / kPanelRows;
  parallel_for(0, G * panels, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(cog * kPanelRows, 1)),
               [&](int64_t i0, int64_t i1) {
                 Scratch<float> panel(cog * kPanelRows);  // (cog, kPanelRows): the panel's rows of grad_w
                 for (int64_t i = i0; i < i1; ++i) {
                   const int64_t g = i / panels, r0 = i % panels * kPanelRows, m = std::min(kPanelRows, rows - r0);
                   detail::transpose_rows_avx2(acc + (g * rows + r0) * cop, cop, m, cog, panel.data(), kPanelRows);
                   for (int64_t co = 0; co < cog; ++co)
                     f32_to_bf16(panel.data() + co * kPanelRows, gwb + (g * cog + co) * rows + r0, m);
                 }
               });
}

}  // namespace mdl::cpu
