// What the tests share: reading a tensor's values through a plain strided loop (no kernel checks
// itself), one elementwise comparison with absolute and relative tolerances, the CUDA-only
// decorator, and a seeded sample that is the same in every dtype.
#pragma once
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "mdl.h"
#include "cuda/api.h"
#include "tensor/sanitizers.h"

namespace mdl::test {

// Whether the library runs under AddressSanitizer or ThreadSanitizer, whose instrumented kernels run
// ten to twenty times slower: a few end-to-end tests take smaller data there, keeping every code
// path they reach (each says what it shrinks). The library answers: under AddressSanitizer the
// suites themselves compile uninstrumented, and one compile of them serves every build.
inline const bool kSanitized = built_with_address_sanitizer() || built_with_thread_sanitizer();

// The elements of t (any dtype, device and strides; undefined: none) in row-major order, as doubles.
// A CPU tensor is read through its strides by this loop, not by the library's copy kernels.
inline std::vector<double> values(const Tensor& t) {
  std::vector<double> out;
  if (!t.defined() || t.numel() == 0) return out;
  const Tensor c = t.device().is_cpu() ? t : t.cpu();
  out.reserve(size_t(c.numel()));
  // The shape and strides are read once: per element, the loop touches only these copies.
  const Shape size = c.shape(), stride = c.strides();
  const size_t dims = size.size();
  const int64_t numel = c.numel();
  dispatch(c.dtype(), "values", [&]<class T>() {
    const T* base = static_cast<const T*>(c.raw_data());
    std::vector<int64_t> idx(dims, 0);
    for (int64_t n = 0; n < numel; ++n) {
      int64_t off = 0;
      for (size_t d = 0; d < dims; ++d) off += idx[d] * stride[d];
      out.push_back(double(acc_t<T>(base[off])));
      for (size_t d = dims; d-- > 0;) {
        if (++idx[d] < size[d]) break;
        idx[d] = 0;
      }
    }
  });
  return out;
}

// An element passes when |got - want| <= atol + rtol * |want|. The defaults suit two f64
// computations of one formula; f32, f16 and bf16 results pass their own.
struct Tol {
  double rtol = 1e-12;
  double atol = 1e-14;
};
inline constexpr Tol kExact{0, 0};

// rtol = atol = x: within x * (1 + |want|), for results of order one whose small elements carry
// the rounding of order-one intermediates.
inline constexpr Tol same_tol(double x) { return {x, x}; }

// Two computations in dtype t, each rounding every step in t (a device against the CPU, a fused
// kernel against the composed ops).
inline Tol dtype_tol(DType t) {
  switch (t) {
    case kF64: return same_tol(1e-10);
    case kF32: return same_tol(2e-5);
    case kF16: return same_tol(2e-3);
    case kBF16: return same_tol(1.6e-2);
    default: return kExact;
  }
}

// The values compared: a tensor's (keeping its shape) or a list's.
struct Elements {
  std::vector<double> v;
  std::optional<Shape> shape;
  Elements(const Tensor& t) : v(values(t)), shape(t.shape()) {}
  Elements(std::vector<double> x) : v(std::move(x)) {}
  Elements(std::initializer_list<double> x) : v(x) {}
};

// The outcome of a comparison: how many elements fail, and the worst (by how far past its allowance).
struct Closeness {
  size_t count = 0, bad = 0, worst = 0;
  double got = 0, want = 0, err = 0, allowed = 0;
  bool ok() const { return bad == 0; }
  std::string report(const std::string& what, Tol tol) const {
    std::ostringstream s;
    s.precision(10);
    s << what << (what.empty() ? "" : ": ") << bad << " of " << count << " elements outside " << tol.atol << " + "
      << tol.rtol << " * |want|; worst at [" << worst << "]: got " << got << ", want " << want << ", |got - want| "
      << err << " (allowed " << allowed << ")";
    return s.str();
  }
};

// NaN in want is matched only by NaN in got; a NaN on one side only fails; equal infinities pass.
inline Closeness compare_close(const std::vector<double>& got, const std::vector<double>& want, Tol tol) {
  Closeness r;
  r.count = got.size();
  double worst_excess = -1;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    const double g = got[i], w = want[i];
    if ((std::isnan(g) && std::isnan(w)) || g == w) continue;
    const double err = std::abs(g - w), allowed = tol.atol + tol.rtol * std::abs(w);
    if (err <= allowed && std::isfinite(w)) continue;  // false for NaN; an infinity must be met exactly
    ++r.bad;
    const double excess = !(err < std::numeric_limits<double>::infinity()) || allowed == 0
                              ? std::numeric_limits<double>::infinity()
                              : err / allowed;
    if (excess > worst_excess)
      worst_excess = excess, r.worst = i, r.got = g, r.want = w, r.err = err, r.allowed = allowed;
  }
  return r;
}

// One CHECK per comparison, naming the worst element; sizes (and shapes, when both are tensors) must agree.
inline void check_close(const Elements& got, const Elements& want, Tol tol = {}, const std::string& what = "") {
  if (got.shape && want.shape)
    REQUIRE_MESSAGE(*got.shape == *want.shape, what, ": shapes ", shape_str(*got.shape), " and ",
                    shape_str(*want.shape));
  REQUIRE_MESSAGE(got.v.size() == want.v.size(), what, ": ", got.v.size(), " elements against ", want.v.size());
  const Closeness r = compare_close(got.v, want.v, tol);
  CHECK_MESSAGE(r.ok(), r.report(what, tol));
}

// max |a - b| / max |b| over all elements, in f64 (0 when both are zero): a normwise error, for results
// whose small elements carry only the rounding of the large ones.
inline double max_rel_diff(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = values(a), y = values(b);
  double scale = 0, diff = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    scale = std::max(scale, std::abs(y[i]));
    diff = std::max(diff, std::abs(x[i] - y[i]));
  }
  return diff / std::max(scale, 1e-300);
}

// Marks a CUDA-only test case skipped (reported skipped, not passed) without a GPU. Evaluated at
// registration (static init): cuda::is_available() only asks the runtime for a device count.
#define MDL_CUDA_ONLY doctest::skip(!::mdl::cuda::is_available())

// A normal sample drawn in f64 from `seed`, then cast to t: the same values for every dtype and device.
inline Tensor sample(const Shape& s, DType t, uint64_t seed) {
  Generator g(seed);
  return randn(s, TensorOptions(kF64), &g).to(t);
}

// A contiguous copy of t that requires grad: a gradcheck leaf.
inline Tensor leaf_of(const Tensor& t) {
  Tensor c = t.contiguous();
  c.requires_grad_();
  return c;
}

// Uniform values in [lo, hi), drawn in f64 from g, then cast to t.
inline Tensor uniform(const Shape& s, Generator& g, double lo = -1.0, double hi = 1.0, DType t = kF64) {
  return (rand(s, kF64, &g) * (hi - lo) + lo).to(t);
}

// The coordinates of flat index i in a row-major tensor of shape s, and back.
inline Shape unravel(int64_t i, const Shape& s) {
  Shape c(s.size());
  for (size_t d = s.size(); d-- > 0;) {
    c[d] = i % s[d];
    i /= s[d];
  }
  return c;
}
inline int64_t ravel(const Shape& c, const Shape& s) {
  int64_t i = 0;
  for (size_t d = 0; d < s.size(); ++d) i = i * s[d] + c[d];
  return i;
}

// For each element of `to` (row-major), the flat index of the element of `from` it is broadcast
// from, by NumPy's rules.
inline std::vector<int64_t> broadcast_index(const Shape& from, const Shape& to) {
  const int64_t n = shape_numel(to), lead = int64_t(to.size()) - int64_t(from.size());
  std::vector<int64_t> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    int64_t rem = i, src = 0, mul = 1;
    for (int64_t d = int64_t(to.size()) - 1; d >= 0; --d) {
      const int64_t k = rem % to[size_t(d)];
      rem /= to[size_t(d)];
      if (d >= lead) {
        const int64_t fs = from[size_t(d - lead)];
        if (fs != 1) src += k * mul;
        mul *= fs;
      }
    }
    out[size_t(i)] = src;
  }
  return out;
}

}  // namespace mdl::test
