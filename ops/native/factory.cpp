// Factories (zeros, arange, rand, from_vector, ...) and the Philox generator they draw from.
#include "ops/native/factory.h"

#include <cmath>
#include <cstring>

#include "ops/native/native.h"
#include "tensor/parallel.h"
#include "kernels/philox.h"

namespace mdl {

// ---- Philox 4x32-10 (kernels/philox.h) ----
std::array<uint32_t, 4> Generator::philox(uint64_t seed, uint64_t counter, uint64_t subsequence) {
  const PhiloxWords r = philox4x32_10(seed, counter, subsequence);
  return {r.w[0], r.w[1], r.w[2], r.w[3]};
}

uint64_t Generator::next_u64() {
  auto r = philox(seed_, advance(1));
  return uint64_t(r[0]) | uint64_t(r[1]) << 32;
}

double Generator::next_double() { return double(next_u64() >> 11) * 0x1.0p-53; }

Generator& default_generator() {
  static Generator g(0);
  return g;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

// ---- factories ----------------------------------------------------------------------------
namespace {
Tensor finish(Tensor t, const TensorOptions& o) {
  if (o.requires_grad) {
    MDL_CHECK(is_floating(t.dtype()), "requires_grad: only floating tensors can require gradients, got ", t.dtype());
    t.requires_grad_(true);
  }
  return t;
}

// Fills a new CPU tensor from f(i), computed in V (double, or int64 for integers exact past 2^53),
// then converts it to o's dtype (an integer narrower than V wraps) and moves it to o's device.
template <class V = double, class F>
Tensor generate(const Shape& shape, const TensorOptions& o, F f) {
  Tensor cpu = make_tensor(shape, dtype_of<V>::value, Device::cpu());
  V* p = cpu.data_ptr<V>();
  parallel_for(0, cpu.numel(), kGrainSize, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) p[i] = f(i);
  });
  return native::to_device(native::to_dtype(cpu, o.dtype), o.device);
}

inline double u01(uint32_t x) { return (double(x) + 0.5) * 0x1.0p-32; }  // in (0, 1)
}  // namespace

Tensor empty(const Shape& shape, TensorOptions o) { return finish(make_tensor(shape, o.dtype, o.device), o); }
Tensor full(const Shape& shape, double v, TensorOptions o) {
  Tensor t = make_tensor(shape, o.dtype, o.device);
  native::fill_(t, v, "full");
  return finish(t, o);
}
Tensor zeros(const Shape& shape, TensorOptions o) { return full(shape, 0.0, o); }
Tensor ones(const Shape& shape, TensorOptions o) { return full(shape, 1.0, o); }
Tensor scalar_tensor(double v, TensorOptions o) { return full({}, v, o); }

Tensor arange(double end, TensorOptions o) { return arange(0, end, 1, o); }
Tensor arange(double start, double end, double step, TensorOptions o) {
  MDL_CHECK(step != 0 && std::isfinite(start) && std::isfinite(end) && std::isfinite(step),
            "arange: invalid range start=", start, " end=", end, " step=", step);
  MDL_CHECK(o.dtype != kBool, "arange: not defined for bool");
  MDL_CHECK((end - start) / step >= 0, "arange: step ", step, " goes the wrong way from ", start, " to ", end);
  const double count = std::ceil((end - start) / step);
  MDL_CHECK(count < 9.0e15, "arange: ", count, " elements from ", start, " to ", end, " by ", step, " are too many");
  const int64_t n = int64_t(count);
  if (!is_floating(o.dtype)) {  // integer values exactly, as PyTorch: whole start and step
    MDL_CHECK(std::trunc(start) == start && std::trunc(step) == step, "arange: an ", o.dtype,
              " range takes whole start and step, got start=", start, " step=", step);
    MDL_CHECK(std::abs(start) < 9.2e18 && std::abs(step) < 9.2e18, "arange: start=", start, " step=", step,
              " are past i64's range");
    const auto s0 = int64_t(start), st = int64_t(step);
    return finish(
        generate<int64_t>({n}, o, [&](int64_t i) { return int64_t(uint64_t(s0) + uint64_t(i) * uint64_t(st)); }), o);
  }
  return finish(generate({n}, o, [&](int64_t i) { return start + double(i) * step; }), o);
}

Tensor linspace(double start, double end, int64_t steps, TensorOptions o) {
  MDL_CHECK(steps >= 0, "linspace: steps must be non-negative, got ", steps);
  double step = steps > 1 ? (end - start) / double(steps - 1) : 0.0;
  // Fill from both ends, as PyTorch does, so the last value is exactly `end`.
  return finish(generate({steps}, o,
                         [&](int64_t i) {
                           return i < steps / 2 || steps == 1 ? start + step * double(i)
                                                              : end - step * double(steps - 1 - i);
                         }),
                o);
}

Tensor eye(int64_t n, TensorOptions o) {
  MDL_CHECK(n >= 0, "eye: n must be non-negative, got ", n);
  return finish(generate({n, n}, o, [&](int64_t i) { return i / n == i % n ? 1.0 : 0.0; }), o);
}

Tensor rand(const Shape& shape, TensorOptions o, Generator* gen) {
  MDL_CHECK(is_floating(o.dtype), "rand: expected a floating dtype, got ", o.dtype);
  Generator& g = gen ? *gen : default_generator();
  uint64_t seed = g.seed(), base = g.advance(uint64_t(shape_numel(shape)));
  return finish(generate(shape, o,
                         [&](int64_t i) {
                           auto r = Generator::philox(seed, base + uint64_t(i));
                           return double((uint64_t(r[0]) | uint64_t(r[1]) << 32) >> 11) * 0x1.0p-53;
                         }),
                o);
}

Tensor randn(const Shape& shape, TensorOptions o, Generator* gen) {
  MDL_CHECK(is_floating(o.dtype), "randn: expected a floating dtype, got ", o.dtype);
  Generator& g = gen ? *gen : default_generator();
  uint64_t seed = g.seed(), base = g.advance(uint64_t(shape_numel(shape)));
  return finish(generate(shape, o,
                         [&](int64_t i) {  // Box-Muller on one Philox block per element
                           auto r = Generator::philox(seed, base + uint64_t(i));
                           return std::sqrt(-2.0 * std::log(u01(r[0]))) * std::cos(2.0 * M_PI * u01(r[1]));
                         }),
                o);
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions o, Generator* gen) {
  MDL_CHECK(high > low, "randint: empty range [", low, ", ", high, ")");
  if (o.dtype == kU8 || o.dtype == kI32 || o.dtype == kBool) {
    const int64_t lo = o.dtype == kI32 ? INT32_MIN : 0, hi = o.dtype == kU8 ? 255 : o.dtype == kI32 ? INT32_MAX : 1;
    MDL_CHECK(low >= lo && high - 1 <= hi, "randint: the range [", low, ", ", high, ") is past ", o.dtype, "'s [", lo,
              ", ", hi, "]");
  }
  Generator& g = gen ? *gen : default_generator();
  uint64_t seed = g.seed(), base = g.advance(uint64_t(shape_numel(shape)));
  const uint64_t range = uint64_t(high) - uint64_t(low);
  auto draw = [&](int64_t i) {
    auto r = Generator::philox(seed, base + uint64_t(i));
    uint64_t x = uint64_t(r[0]) | uint64_t(r[1]) << 32;
    return int64_t(uint64_t(low) + x % range);
  };
  if (is_floating(o.dtype)) return finish(generate(shape, o, [&](int64_t i) { return double(draw(i)); }), o);
  return finish(generate<int64_t>(shape, o, draw), o);
}

Tensor randperm(int64_t n, Generator* gen) {
  MDL_CHECK(n >= 0, "randperm: n must be non-negative, got ", n);
  Generator& g = gen ? *gen : default_generator();
  Tensor t = make_tensor({n}, kI64, Device::cpu());
  int64_t* p = t.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) p[i] = i;
  for (int64_t i = n - 1; i > 0; --i) std::swap(p[i], p[int64_t(g.next_u64() % uint64_t(i + 1))]);  // Fisher-Yates
  return t;
}

Tensor empty_like(const Tensor& t) { return empty(t.shape(), {t.dtype(), t.device()}); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), {t.dtype(), t.device()}); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), {t.dtype(), t.device()}); }
Tensor full_like(const Tensor& t, double v) { return full(t.shape(), v, {t.dtype(), t.device()}); }
Tensor rand_like(const Tensor& t) { return rand(t.shape(), {t.dtype(), t.device()}); }
Tensor randn_like(const Tensor& t) { return randn(t.shape(), {t.dtype(), t.device()}); }

Tensor from_blob(const void* ptr, const Shape& shape, TensorOptions o) {
  MDL_CHECK(ptr || shape_numel(shape) == 0, "from_blob: null pointer for shape ", shape_str(shape));
  Tensor t = make_tensor(shape, o.dtype, Device::cpu());
  if (t.numel()) std::memcpy(t.raw_data(), ptr, t.nbytes());
  return finish(native::to_device(t, o.device), o);
}

template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, TensorOptions o) {
  Shape s = shape.empty() && values.size() != 1 ? Shape{int64_t(values.size())} : shape;
  if (shape.empty() && values.size() == 1) s = Shape{1};
  MDL_CHECK(shape_numel(s) == int64_t(values.size()), "from_vector: ", values.size(), " values do not fill shape ",
            shape_str(s));
  Tensor t = make_tensor(s, dtype_of<T>::value, Device::cpu());
  T* p = static_cast<T*>(t.raw_data());
  for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  return finish(native::to_device(native::to_dtype(t, o.dtype), o.device), o);
}

#define MDL_INSTANTIATE(T) template Tensor from_vector<T>(const std::vector<T>&, const Shape&, TensorOptions);
#define MDL_INSTANTIATE_DTYPE(e, T, DT, name, size) MDL_INSTANTIATE(T)
MDL_DTYPES(MDL_INSTANTIATE_DTYPE)
#undef MDL_INSTANTIATE_DTYPE
#undef MDL_INSTANTIATE

}  // namespace mdl
