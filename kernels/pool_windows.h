// The windows a pooling output reads, written once for both backends (cpu/pool.cpp, cuda/pool.cu):
// a strided window clipped to the input, and an adaptive pool's window.
#pragma once
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

}  // namespace mdl
