// Reading f32 or bf16 runs into floats and rounding floats into a bf16 tensor (cpu/conv_operand.h).
#include "cpu/conv_operand.h"

#include <cstring>

#include "tensor/error.h"
#include "tensor/half.h"

namespace mdl::cpu {

void read_floats(const void* src, DType t, int64_t stride, float* dst, int64_t n) {
  if (t == kF32) {
    const float* s = static_cast<const float*>(src);
    if (stride == 1) return (void)std::memcpy(dst, s, size_t(n) * sizeof(float));
    for (int64_t i = 0; i < n; ++i) dst[i] = s[i * stride];
    return;
  }
  MDL_CHECK(t == kBF16, "conv2d: the direct kernel reads f32 or bf16, got ", t);
  const BFloat16* s = static_cast<const BFloat16*>(src);
  if (stride == 1) return bf16_to_f32(s, dst, n);
  for (int64_t i = 0; i < n; ++i) dst[i] = float(s[i * stride]);
}

const float* float_values(const Tensor& t, Scratch<float>& store) {
  if (t.dtype() == kF32) return t.data_ptr<float>();
  store.resize(t.numel());
  read_floats(t.raw_data(), t.dtype(), 1, store.data(), t.numel());
  return store.data();
}

void write_floats(const float* src, const Tensor& dst) {
  if (dst.dtype() == kF32) return (void)std::memcpy(dst.data_ptr<float>(), src, size_t(dst.numel()) * sizeof(float));
  MDL_CHECK(dst.dtype() == kBF16, "conv2d: the direct kernel writes f32 or bf16, got ", dst.dtype());
  f32_to_bf16(src, dst.data_ptr<BFloat16>(), dst.numel());
}

}  // namespace mdl::cpu
