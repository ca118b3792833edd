// f16 and bf16 conversions against an independent double-precision reference and, where the
// CPU has F16C, against the hardware's own conversion instructions, bit for bit: all 65,536
// f16 patterns, every f16 midpoint and its neighbours, millions of random f32s; then tensors.
#include <doctest/doctest.h>

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "mdl.h"

using namespace mdl;

namespace {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// The exact value of an f16 pattern, decoded from its fields.
double f16_value(uint16_t h) {
  const int e = (h >> 10) & 31, m = h & 1023;
  double v = e == 31  ? (m ? std::numeric_limits<double>::quiet_NaN() : HUGE_VAL)
             : e == 0 ? std::ldexp(double(m), -24)
                      : std::ldexp(double(1024 + m), e - 25);
  return (h & 0x8000) ? -v : v;
}

// f16 bits of a non-NaN x, rounded to nearest even by scaling to units of the f16 ulp. The
// exponent field is added, not or-ed, so a mantissa that rounds up to 2048 carries into it.
uint16_t ref_f16_bits(double x) {
  const uint32_t sign = std::signbit(x) ? 0x8000u : 0u;
  const double a = std::fabs(x);
  if (std::isinf(a)) return uint16_t(sign | 0x7c00u);
  const int e = a == 0 ? -14 : std::max(std::ilogb(a), -14);
  const double r = std::nearbyint(a / std::ldexp(1.0, e - 10));  // exact division, RNE
  uint64_t bits = a < 0x1p-14 ? uint64_t(r) : (uint64_t(e + 15) << 10) + uint64_t(r) - 1024;
  return uint16_t(sign | std::min<uint64_t>(bits, 0x7c00u));
}

// bf16 bits of a non-NaN float: the value's upper 16 bits, plus one when the dropped lower
// half is above one half, or exactly one half with an odd upper part.
uint16_t ref_bf16_bits(float f) {
  const uint32_t u = bits_of(f);
  uint32_t hi = u >> 16, lo = u & 0xffffu;
  if (lo > 0x8000u || (lo == 0x8000u && (hi & 1u))) ++hi;
  return uint16_t(hi);
}

// x rounded to nearest even with p fraction bits and exponents down to emin (no overflow).
double ref_round(double x, int p, int emin) {
  const double a = std::fabs(x);
  const int e = a == 0 ? emin : std::max(std::ilogb(a), emin);
  const double ulp = std::ldexp(1.0, e - p);
  return std::copysign(std::nearbyint(a / ulp) * ulp, x);
}

bool f16_is_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu); }

// The hardware conversions, 8 at a time; n must be a multiple of 8.
__attribute__((target("f16c,avx"))) void hw_f32_to_f16(const float* src, uint16_t* dst, size_t n) {
  for (size_t i = 0; i < n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
}
__attribute__((target("f16c,avx"))) void hw_f16_to_f32(const uint16_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
}

// Every f32 whose f16 rounding is interesting: each f16 value, the midpoint between it and the
// next one up (65520 after the largest), and two f32 steps either side of both; both signs.
std::vector<float> midpoint_cases() {
  std::vector<float> v;
  for (uint16_t h = 0; h < 0x7c00; ++h) {
    const float lo = float(f16_value(h));
    const float mid = float((f16_value(h) + (h == 0x7bff ? 65536.0 : f16_value(uint16_t(h + 1)))) / 2);
    for (float c : {lo, mid}) {
      float up = c, down = c;
      v.push_back(c);
      for (int k = 0; k < 2; ++k) {
        up = std::nextafter(up, HUGE_VALF);
        down = std::nextafter(down, -HUGE_VALF);
        v.push_back(up);
        v.push_back(down);
      }
    }
  }
  const size_t n = v.size();
  for (size_t i = 0; i < n; ++i) v.push_back(-v[i]);
  return v;
}

// Random f32 bit patterns: half uniform over all 2^32 (NaN, inf, huge, tiny), half with
// exponents in and around the f16 range, where the mantissa bits decide the rounding.
std::vector<float> random_cases(size_t n) {
  std::mt19937 rng(1234);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    uint32_t u = rng();
    if (i % 2) u = (u & 0x807fffffu) | (uint32_t(127 - 27 + int(rng() % 46)) << 23);  // 2^-27 .. 2^18
    v[i] = float_of(u);
  }
  for (uint32_t u : {0x00000000u, 0x80000000u, 0x00000001u, 0x007fffffu, 0x7f7fffffu, 0x7f800000u, 0xff800000u,
                     0x7fc00000u, 0x7f800001u, 0xffffffffu, 0x7fa00000u, 0x33000000u, 0x33000001u, 0x477ff000u})
    v.push_back(float_of(u));
  while (v.size() % 8) v.push_back(0.0f);
  return v;
}

// Counts the values whose scalar Half conversion differs from the reference (and the
// hardware, when present); NaNs must stay NaN with the sign and the top payload bits.
int64_t count_f32_to_f16_mismatches(const std::vector<float>& v) {
  std::vector<uint16_t> hw(v.size());
  const bool has_hw = cpu_has_f16c();
  if (has_hw) hw_f32_to_f16(v.data(), hw.data(), v.size() / 8 * 8);
  int64_t bad = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t got = Half(v[i]).bits;
    if (has_hw && i < v.size() / 8 * 8 && got != hw[i]) ++bad;
    if (std::isnan(v[i])) {
      const uint32_t u = bits_of(v[i]);
      if (got != uint16_t(((u >> 16) & 0x8000u) | 0x7e00u | ((u >> 13) & 0x3ffu))) ++bad;
    } else if (got != ref_f16_bits(v[i])) {
      ++bad;
    }
  }
  return bad;
}

}  // namespace

TEST_CASE("half: all 65536 f16 patterns decode exactly and round-trip through f32") {
  int64_t bad_value = 0, bad_trip = 0, bad_hw = 0;
  std::vector<uint16_t> all(65536);
  for (uint32_t h = 0; h < 65536; ++h) all[h] = uint16_t(h);
  std::vector<float> hw(65536);
  if (cpu_has_f16c()) hw_f16_to_f32(all.data(), hw.data(), all.size());
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = Half::from_bits(uint16_t(h));
    const uint16_t back = Half(f).bits;
    if (f16_is_nan(uint16_t(h))) {
      // NaNs stay NaN, keep sign and payload, and come back quiet, as F16C does.
      if (!std::isnan(f) || std::signbit(f) != bool(h & 0x8000u)) ++bad_value;
      if (back != (h | 0x200u)) ++bad_trip;
    } else {
      const double want = f16_value(uint16_t(h));
      if (double(f) != want || std::signbit(f) != bool(h & 0x8000u)) ++bad_value;
      if (back != h) ++bad_trip;
    }
    if (cpu_has_f16c() && bits_of(f) != bits_of(hw[h])) ++bad_hw;
  }
  CHECK(bad_value == 0);
  CHECK(bad_trip == 0);
  CHECK(bad_hw == 0);
}

TEST_CASE("half: f32 -> f16 matches the reference and F16C at every midpoint and its neighbours") {
  if (!cpu_has_f16c()) MESSAGE("no F16C on this CPU: checked against the software reference only");
  const std::vector<float> v = midpoint_cases();
  CHECK(v.size() > 500000);
  CHECK(count_f32_to_f16_mismatches(v) == 0);
}

TEST_CASE("half: f32 -> f16 matches the reference and F16C on 4 million random f32 patterns") {
  const std::vector<float> v = random_cases(4'000'000);
  CHECK(count_f32_to_f16_mismatches(v) == 0);
}

TEST_CASE("half: f16 overflow, underflow and ties") {
  CHECK(Half(65504.0f).bits == 0x7bff);
  CHECK(Half(65519.99f).bits == 0x7bff);
  CHECK(Half(std::nextafter(65520.0f, 0.0f)).bits == 0x7bff);
  CHECK(Half(65520.0f).bits == 0x7c00);
  CHECK(Half(-65520.0f).bits == 0xfc00);
  CHECK(Half(1e9f).bits == 0x7c00);
  CHECK(float(Half(65520.0f)) == HUGE_VALF);
  CHECK(Half(0x1p-24f).bits == 0x0001);  // smallest subnormal
  CHECK(Half(0x1p-25f).bits == 0x0000);  // tie between 0 and 2^-24: to even 0
  CHECK(Half(-0x1p-25f).bits == 0x8000);
  CHECK(Half(std::nextafter(0x1p-25f, 1.0f)).bits == 0x0001);  // just above the tie: up
  CHECK(Half(3 * 0x1p-25f).bits == 0x0002);                    // tie between 1 and 2 ulps: to even 2
  CHECK(Half(0x1p-14f).bits == 0x0400);                        // smallest normal
  CHECK(Half(0x1p-14f - 0x1p-25f).bits == 0x0400);             // tie at the top of the subnormals: to even
  CHECK(Half(2049.0f).bits == Half(2048.0f).bits);             // 2048 + half an ulp: to even
  CHECK(Half(2051.0f).bits == Half(2052.0f).bits);
  CHECK(float(Half(-0.0f)) == 0.0f);
  CHECK(std::signbit(float(Half(-0.0f))));
  CHECK(std::isnan(float(Half(std::numeric_limits<float>::quiet_NaN()))));
}

TEST_CASE("half: bf16 rounds to nearest even, keeps NaN and infinities") {
  CHECK(BFloat16(1.0f).bits == 0x3f80);
  CHECK(BFloat16(1.0f + 0x1p-8f).bits == 0x3f80);                            // tie: to even
  CHECK(BFloat16(1.0f + 3 * 0x1p-8f).bits == 0x3f82);                        // tie: to even (up)
  CHECK(BFloat16(std::nextafter(1.0f + 0x1p-8f, 2.0f)).bits == 0x3f81);      // above the tie: up
  CHECK(BFloat16(std::nextafter(1.0f + 3 * 0x1p-8f, 0.0f)).bits == 0x3f81);  // below the tie: down
  CHECK(BFloat16(float_of(0x7f7fffffu)).bits == 0x7f80);                     // FLT_MAX rounds to inf
  CHECK(BFloat16(HUGE_VALF).bits == 0x7f80);
  CHECK(BFloat16(-HUGE_VALF).bits == 0xff80);
  for (uint32_t nan : {0x7fc00000u, 0x7f800001u, 0xff800001u, 0x7fffffffu}) {
    const uint16_t b = BFloat16(float_of(nan)).bits;
    CHECK((b & 0x7f80u) == 0x7f80u);
    CHECK((b & 0x7fu) != 0);
    CHECK((b & 0x8000u) == ((nan >> 16) & 0x8000u));
  }
  // All bf16 patterns round-trip; NaNs stay NaN.
  int64_t bad = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = BFloat16::from_bits(uint16_t(h));
    if (bits_of(f) != h << 16) ++bad;
    const bool nan = (h & 0x7f80u) == 0x7f80u && (h & 0x7fu);
    if (nan ? !std::isnan(float(BFloat16(f))) : BFloat16(f).bits != h) ++bad;
  }
  CHECK(bad == 0);
  // Random patterns against the reference.
  const std::vector<float> v = random_cases(1'000'000);
  bad = 0;
  for (float f : v)
    if (!std::isnan(f) && BFloat16(f).bits != ref_bf16_bits(f)) ++bad;
  CHECK(bad == 0);
}

TEST_CASE("half: double -> f16 and bf16 round once, not through float") {
  // Just above the midpoint between 1 and 1 + 2^-10: float rounding would land on the midpoint,
  // and the tie would then go to even (1.0).
  const double above = 1.0 + 0x1p-11 + 0x1p-40;
  CHECK(Half(float(above)).bits == 0x3c00);
  CHECK(Half(above).bits == 0x3c01);
  const double below = 1.0 + 3 * 0x1p-11 - 0x1p-40;  // just below a midpoint whose tie goes up
  CHECK(Half(float(below)).bits == 0x3c02);
  CHECK(Half(below).bits == 0x3c01);
  const double bf_above = 1.0 + 0x1p-8 + 0x1p-40;
  CHECK(BFloat16(float(bf_above)).bits == 0x3f80);
  CHECK(BFloat16(bf_above).bits == 0x3f81);
  // The f64 -> f16 cast kernel rounds once too.
  std::vector<double> xs = {above, below, -above, 65519.999, 65520.0, 0x1p-25 + 0x1p-60};
  std::vector<Half> got = from_vector<double>(xs).to(kF16).to_vector<Half>();
  REQUIRE(got.size() == xs.size());
  for (size_t i = 0; i < xs.size(); ++i) CHECK(got[i].bits == ref_f16_bits(xs[i]));
  // Random doubles near f16 midpoints, against the reference.
  std::mt19937_64 rng(99);
  int64_t bad = 0;
  for (int i = 0; i < 200000; ++i) {
    const uint16_t h = uint16_t(rng() % 0x7bff);
    const double mid = (f16_value(h) + f16_value(uint16_t(h + 1))) / 2;
    const double x = mid + std::ldexp(double(int64_t(rng() % 2001) - 1000), -60) * (mid + 1e-10);
    if (Half(x).bits != ref_f16_bits(x) || Half(-x).bits != ref_f16_bits(-x)) ++bad;
  }
  CHECK(bad == 0);
}

TEST_CASE("half: bulk conversions equal the scalar ones") {
  std::vector<float> v = random_cases(100'000);
  v.push_back(1.5f);
  v.push_back(-3.0e-6f);
  v.push_back(70000.0f);  // length not a multiple of 8: the tail goes through an 8-lane buffer
  std::vector<Half> h(v.size());
  f32_to_f16(v.data(), h.data(), int64_t(v.size()));
  int64_t bad = 0;
  for (size_t i = 0; i < v.size(); ++i)
    if (h[i].bits != Half(v[i]).bits) ++bad;
  CHECK(bad == 0);

  std::vector<Half> all(65536 + 3);
  for (size_t i = 0; i < all.size(); ++i) all[i] = Half::from_bits(uint16_t(i));
  std::vector<float> f(all.size());
  f16_to_f32(all.data(), f.data(), int64_t(all.size()));
  bad = 0;
  for (size_t i = 0; i < all.size(); ++i)
    if (bits_of(f[i]) != bits_of(float(all[i]))) ++bad;
  CHECK(bad == 0);

  for (int64_t n = 0; n <= 40; ++n) {  // every tail length of 8 and 16 lanes, the next value untouched
    CAPTURE(n);
    std::vector<Half> hn(size_t(n) + 1, Half::from_bits(0x7777));
    std::vector<float> fn(size_t(n) + 1, 42.0f);
    f32_to_f16(v.data(), hn.data(), n);
    f16_to_f32(all.data() + 1000, fn.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      CHECK(hn[size_t(i)].bits == Half(v[size_t(i)]).bits);
      CHECK(bits_of(fn[size_t(i)]) == bits_of(float(all[size_t(1000 + i)])));
    }
    CHECK(hn[size_t(n)].bits == 0x7777);
    CHECK(fn[size_t(n)] == 42.0f);
  }

  std::vector<BFloat16> b(v.size());
  f32_to_bf16(v.data(), b.data(), int64_t(v.size()));
  std::vector<float> back(v.size());
  bf16_to_f32(b.data(), back.data(), int64_t(v.size()));
  bad = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (b[i].bits != BFloat16(v[i]).bits) ++bad;
    if (bits_of(back[i]) != uint32_t(b[i].bits) << 16) ++bad;
  }
  CHECK(bad == 0);
}

TEST_CASE("half: f32 <-> f16 tensor casts, contiguous and strided, equal the scalar conversion") {
  const std::vector<float> v = random_cases(1 << 16);
  const int64_t n = int64_t(v.size());
  Tensor x = from_vector<float>(v, {n / 8, 8});
  for (Tensor src : {x, x.t()}) {  // contiguous: F16C bulk path; transposed: per-element path
    Tensor h = src.to(kF16);
    CHECK(h.dtype() == kF16);
    CHECK(h.shape() == src.shape());
    const Half* p = h.contiguous().data_ptr<Half>();
    const std::vector<float> sv = src.contiguous().to_vector<float>();
    int64_t bad = 0;
    for (int64_t i = 0; i < n; ++i)
      if (p[i].bits != Half(sv[size_t(i)]).bits) ++bad;
    CHECK(bad == 0);
    Tensor back = h.to(kF32).contiguous();
    const float* q = back.data_ptr<float>();
    bad = 0;
    for (int64_t i = 0; i < n; ++i)
      if (bits_of(q[i]) != bits_of(float(p[i]))) ++bad;
    CHECK(bad == 0);
  }
}

TEST_CASE("half: f16 and bf16 tensor arithmetic computes in f32 and rounds once") {
  Tensor a = from_vector<Half>({Half(2048.0f), Half(2048.0f), Half(1.0f)});
  Tensor b = from_vector<Half>({Half(1.0f), Half(3.0f), Half(0x1p-11f)});
  Tensor c = a + b;
  REQUIRE(c.dtype() == kF16);
  std::vector<Half> r = c.to_vector<Half>();
  CHECK(float(r[0]) == 2048.0f);  // 2049 is a tie: to even
  CHECK(float(r[1]) == 2052.0f);  // 2051 is a tie: to even
  CHECK(float(r[2]) == 1.0f);     // 1 + 2^-11 is a tie: to even

  // For + - * / the f32 result rounded to 16 bits is the correctly rounded 16-bit result
  // (24 >= 2 * 11 + 2), so every element must equal the rounding of the exact double result.
  std::mt19937 rng(5);
  std::vector<Half> xs, ys;
  std::vector<BFloat16> bxs, bys;
  for (int i = 0; i < 20000; ++i) {
    uint16_t hx = uint16_t(rng()), hy = uint16_t(rng());
    if (f16_is_nan(hx) || (hx & 0x7c00u) == 0x7c00u) hx = 0x3c00;
    if (f16_is_nan(hy) || (hy & 0x7c00u) == 0x7c00u || (hy & 0x7fffu) == 0) hy = 0x4000;
    xs.push_back(Half::from_bits(hx));
    ys.push_back(Half::from_bits(hy));
    bxs.push_back(BFloat16::from_bits(uint16_t(0x3000u + rng() % 0x1e00u) | uint16_t(rng() & 0x8000u)));
    bys.push_back(BFloat16::from_bits(uint16_t(0x3000u + rng() % 0x1e00u) | uint16_t(rng() & 0x8000u)));
  }
  Tensor hx = from_vector<Half>(xs), hy = from_vector<Half>(ys);
  Tensor bx = from_vector<BFloat16>(bxs), by = from_vector<BFloat16>(bys);
  struct Case {
    const char* name;
    Tensor h, b;
    double (*f)(double, double);
  };
  const Case cases[] = {
      {"add", hx + hy, bx + by, [](double p, double q) { return p + q; }},
      {"sub", hx - hy, bx - by, [](double p, double q) { return p - q; }},
      {"mul", hx * hy, bx * by, [](double p, double q) { return p * q; }},
      {"div", hx / hy, bx / by, [](double p, double q) { return p / q; }},
  };
  for (const Case& k : cases) {
    INFO(k.name);
    REQUIRE(k.h.dtype() == kF16);
    REQUIRE(k.b.dtype() == kBF16);
    const Half* ph = k.h.data_ptr<Half>();
    const BFloat16* pb = k.b.data_ptr<BFloat16>();
    int64_t bad = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      const double exact = k.f(double(float(xs[i])), double(float(ys[i])));
      if (ph[i].bits != ref_f16_bits(exact)) ++bad;
      const double bexact = k.f(double(float(bxs[i])), double(float(bys[i])));
      if (float(pb[i]) != ref_round(bexact, 7, -126)) ++bad;
    }
    CHECK(bad == 0);
  }
}
