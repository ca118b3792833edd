// fill and copy/cast kernels: any strides, any pair of dtypes. Contiguous runs of the same
// dtype are memcpy'd; f32<->f16 runs use the F16C bulk conversions.
#include <cstring>

#include "tensor/cpu/convert.h"
#include "tensor/cpu/cpu_kernels.h"
#include "tensor/cpu/loops.h"

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

void copy(const Tensor& dst, const Tensor& src) {
  MDL_CHECK(dst.device().is_cpu() && src.device().is_cpu(), "copy: CPU kernel given tensors on ", dst.device(),
            " and ", src.device());
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
