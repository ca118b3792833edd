// fill and copy/cast kernels: any strides, any pair of dtypes. Contiguous runs of the same
// dtype are memcpy'd; f32<->f16 runs use the F16C bulk conversions, other f32/f16/bf16 mixes go
// through float blocks; a transposed matrix goes in register blocks (cpu/transpose_blocks.h) or
// cache-sized tiles.
#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>

#include "kernels/convert.h"
#include "switches/list/toggles.h"
#include "cpu/cpu_features.h"
#include "cpu/kernels.h"
#include "cpu/float_block.h"
#include "cpu/transpose_blocks.h"
#include "cpu/loops.h"
#include "tensor/parallel.h"

namespace mdl::cpu {

void fill(const Tensor& out, double value) {
  dispatch(out.dtype(), "fill", [&]<class T>() {
    const T v = convert<T>(value);
    StridedLoop<1> loop({&out});
    loop.run([&](char* const* p, const int64_t* s, int64_t n) {
      if (s[0] == sizeof(T)) {
        T* o = reinterpret_cast<T*>(p[0]);
        for (int64_t i = 0; i < n; ++i) o[i] = v;
      } else {
        for (int64_t i = 0; i < n; ++i) *reinterpret_cast<T*>(p[0] + i * s[0]) = v;
      }
    });
  });
}

const TransposeBlocks* transpose_blocks() {
  static const TransposeBlocks* const t = has_avx512f()    ? &transpose_blocks_avx512()
                                          : has_avx2_fma() ? &transpose_blocks_avx2()
                                                           : nullptr;
  return t;
}

namespace {

// b's source offset (elements) through the leading dims' strides.
int64_t lead_offset(int64_t b, const Shape& lead_sizes, const Shape& lead_strides) {
  int64_t off = 0;
  for (int64_t d = int64_t(lead_sizes.size()) - 1, rest = b; d >= 0; --d) {
    off += (rest % lead_sizes[size_t(d)]) * lead_strides[size_t(d)];
    rest /= lead_sizes[size_t(d)];
  }
  return off;
}

// The same copy as transpose_tiles in panels of up to kPanelRows destination rows, each through the
// register-block kernel: a panel's source columns are runs of kPanelRows elements (2 KiB of f32),
// long enough for the hardware prefetcher to follow, where a 32-row tile's runs were 128 bytes.
// Destinations of kTransposeStreamBytes and more go out through non-temporal stores when aligned.
void transpose_panels(const TransposeBlocks& k, char* dst, const char* src, int64_t E, int64_t batch,
                      const Shape& lead_sizes, const Shape& lead_strides, int64_t R, int64_t C, int64_t ld) {
  constexpr int64_t kPanelRows = 512;
  const int64_t panels = (R + kPanelRows - 1) / kPanelRows, rows = std::min(R, kPanelRows);
  const bool stream = batch * R * C * E >= kTransposeStreamBytes && transpose_can_stream(dst, C, int(E));
  parallel_for(0, batch * panels, std::max<int64_t>(1, kGrainSize / (rows * C)), [&](int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t b = u / panels, r0 = (u % panels) * kPanelRows;
      const char* s = src + (lead_offset(b, lead_sizes, lead_strides) + r0) * E;
      k.run(dst + (b * R + r0) * C * E, s, std::min(kPanelRows, R - r0), C, C, ld, int(E), stream);
    }
  });
}

// dst (..., R, C) contiguous = src (..., R, C) whose last two dims are transposed in memory
// (stride 1 along R, ld along C), E-byte elements, in kTile x kTile tiles, so a tile's reads come
// back to the same source lines. Copied row by row, each read of a source column lands on a new
// cache line (and page): a 4096 x 4096 f32 transpose ran at 1.6 GB/s. (On this VM strided access
// stays slow either way: a plain blocked transpose reached about 2 GB/s; finer tiles, 8-16, and a
// second level of 128 x 128 blocks measured no better than 32.)
template <size_t E>
void transpose_tiles(char* dst, const char* src, int64_t batch, const Shape& lead_sizes, const Shape& lead_strides,
                     int64_t R, int64_t C, int64_t ld) {
  constexpr int64_t kTile = 32;
  const int64_t tr = (R + kTile - 1) / kTile, tc = (C + kTile - 1) / kTile;
  parallel_for(0, batch * tr, std::max<int64_t>(1, kGrainSize / (kTile * C)), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t b = t / tr, r0 = (t % tr) * kTile, r1 = std::min(R, r0 + kTile);
      const char* s = src + lead_offset(b, lead_sizes, lead_strides) * int64_t(E);
      char* o = dst + b * R * C * int64_t(E);
      for (int64_t j = 0; j < tc; ++j) {
        const int64_t c0 = j * kTile, c1 = std::min(C, c0 + kTile);
        for (int64_t r = r0; r < r1; ++r)
          for (int64_t c = c0; c < c1; ++c) std::memcpy(o + (r * C + c) * int64_t(E), s + (r + c * ld) * int64_t(E), E);
      }
    }
  });
}

// Takes the tiled path when dst is contiguous, both share dtype and shape, and src's last two dims
// are a large enough transposed matrix; returns whether it did.
bool transposed_copy(const Tensor& dst, const Tensor& src) {
  const int64_t n = dst.dim();
  if (!toggles::tiled_transpose() || n < 2 || dst.dtype() != src.dtype() || dst.shape() != src.shape() ||
      !dst.is_contiguous())
    return false;
  const int64_t R = dst.size(n - 2), C = dst.size(n - 1), ld = src.stride(n - 1);
  if (src.stride(n - 2) != 1 || ld < R || R < 16 || C < 16 || dst.numel() < (int64_t(1) << 14)) return false;
  const Shape lead_sizes(dst.shape().begin(), dst.shape().end() - 2),
      lead_strides(src.strides().begin(), src.strides().end() - 2);
  int64_t batch = 1;
  for (int64_t s : lead_sizes) batch *= s;
  char* o = static_cast<char*>(dst.raw_data());
  const char* x = static_cast<const char*>(src.raw_data());
  const int64_t E = int64_t(dtype_size(dst.dtype()));
  const TransposeBlocks* k = toggles::vector_transpose() ? transpose_blocks() : nullptr;
  if (k && (k->sizes >> std::countr_zero(uint64_t(E))) & 1) {
    transpose_panels(*k, o, x, E, batch, lead_sizes, lead_strides, R, C, ld);
    return true;
  }
  switch (E) {
    case 1: transpose_tiles<1>(o, x, batch, lead_sizes, lead_strides, R, C, ld); return true;
    case 2: transpose_tiles<2>(o, x, batch, lead_sizes, lead_strides, R, C, ld); return true;
    case 4: transpose_tiles<4>(o, x, batch, lead_sizes, lead_strides, R, C, ld); return true;
    case 8: transpose_tiles<8>(o, x, batch, lead_sizes, lead_strides, R, C, ld); return true;
    default: return false;
  }
}

}  // namespace


void copy(const Tensor& dst, const Tensor& src) {
  MDL_CHECK(dst.device().is_cpu() && src.device().is_cpu(), "copy: CPU kernel given tensors on ", dst.device(), " and ",
            src.device());
  if (transposed_copy(dst, src)) return;
  StridedLoop<2> loop({&dst, &src});
  dispatch(dst.dtype(), "copy", [&]<class To>() {
    dispatch(src.dtype(), "copy", [&]<class From>() {
      loop.run([&](char* const* p, const int64_t* s, int64_t n) {
        const bool contiguous = s[0] == sizeof(To) && s[1] == sizeof(From);
        if constexpr (std::is_same_v<To, From>) {
          if (contiguous) return void(std::memcpy(p[0], p[1], size_t(n) * sizeof(To)));
        }
        if constexpr (std::is_same_v<To, Half> && std::is_same_v<From, float>) {
          if (contiguous) return f32_to_f16(reinterpret_cast<const float*>(p[1]), reinterpret_cast<Half*>(p[0]), n);
        }
        if constexpr (std::is_same_v<To, float> && std::is_same_v<From, Half>) {
          if (contiguous) return f16_to_f32(reinterpret_cast<const Half*>(p[1]), reinterpret_cast<float*>(p[0]), n);
        }
        // Any other mix of f32, f16 and bf16 (strided, or bf16): blocks of floats, exact on the
        // way in, one rounding on the way out.
        constexpr bool kThroughFloat = (is_half_v<To> || is_half_v<From>)&&!std::is_same_v<To, From> &&
                                       (is_half_v<To> || std::is_same_v<To, float>)&&(is_half_v<From> ||
                                                                                      std::is_same_v<From, float>);
        if constexpr (kThroughFloat) {
          float buf[kFloatBlock];
          for (int64_t i0 = 0; i0 < n; i0 += kFloatBlock) {
            const int64_t m = std::min(kFloatBlock, n - i0);
            load_floats<From>(p[1] + i0 * s[1], s[1], buf, m);
            store_floats<To>(p[0] + i0 * s[0], s[0], buf, m);
          }
          return;
        }
        if (contiguous) {
          To* o = reinterpret_cast<To*>(p[0]);
          const From* x = reinterpret_cast<const From*>(p[1]);
          for (int64_t i = 0; i < n; ++i) o[i] = convert<To>(x[i]);
        } else {
          for (int64_t i = 0; i < n; ++i)
            *reinterpret_cast<To*>(p[0] + i * s[0]) = convert<To>(*reinterpret_cast<const From*>(p[1] + i * s[1]));
        }
      });
    });
  });
}

}  // namespace mdl::cpu
