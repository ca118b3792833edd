// f16/bf16 kernels through float blocks (cpu/float_block.h): bulk conversion (F16C, vector
// code) must give the same bits as converting element by element (toggles::set_bulk_half_conversion
// (false)), at every block length and stride, and through the unary, binary and max pool kernels
// on contiguous, strided and broadcast operands full of NaN, infinities, subnormals and ties.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "mdl.h"
#include "nn/functional.h"
#include "cpu/float_block.h"
#include "switches/list/toggles.h"

using namespace mdl;
namespace F = mdl::nn::functional;

namespace {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Restores bulk conversion when a check fails part way.
struct BulkConversion {
  explicit BulkConversion(bool on) { toggles::set_bulk_half_conversion(on); }
  ~BulkConversion() { toggles::set_bulk_half_conversion(true); }
};

// 16-bit patterns that exercise every conversion rule: all of them in turn, so zeros, subnormals,
// the largest finite, infinities and quiet and signalling NaNs of both signs are all there.
template <class T>
std::vector<T> all_patterns(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = T::from_bits(uint16_t(i < 65536 ? i : rng()));
  std::shuffle(v.begin(), v.end(), rng);
  return v;
}

// Floats whose 16-bit rounding is interesting: random patterns over every exponent (NaN, inf,
// overflow, underflow), and exact ties of f16 and bf16.
std::vector<float> float_cases(size_t n) {
  std::mt19937 rng(9);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    uint32_t u = rng();
    if (i % 3 == 1) u = (u & 0x807fffffu) | ((100u + u % 60u) << 23);  // near the f16 range
    if (i % 3 == 2) u &= 0xffffe000u | 0x1000u;                        // f16 ties and near-ties
    std::memcpy(&v[i], &u, 4);
  }
  return v;
}

template <class T>
std::vector<uint16_t> bits(const Tensor& t) {
  std::vector<uint16_t> b;
  for (T h : t.contiguous().to_vector<T>()) b.push_back(h.bits);
  return b;
}

template <class T>
void check_blocks() {
  const std::vector<T> src = all_patterns<T>(3 * cpu::kFloatBlock + 65536, 1);
  const std::vector<float> fs = float_cases(3 * cpu::kFloatBlock);
  for (int64_t stride : {1, 3, 0})
    for (int64_t n = 0; n <= cpu::kFloatBlock; ++n) {
      float bulk[cpu::kFloatBlock], each[cpu::kFloatBlock];
      const char* p = reinterpret_cast<const char*>(src.data() + n);  // every alignment
      const int64_t sb = stride * int64_t(sizeof(T));
      toggles::set_bulk_half_conversion(true);
      cpu::load_floats<T>(p, sb, bulk, n);
      toggles::set_bulk_half_conversion(false);
      cpu::load_floats<T>(p, sb, each, n);
      for (int64_t i = 0; i < n; ++i)
        if (bits_of(bulk[i]) != bits_of(each[i])) FAIL_CHECK("load stride ", stride, " length ", n, " at ", i);
      if (stride == 0) continue;
      std::vector<T> out_bulk(size_t(n * stride) + 1), out_each(size_t(n * stride) + 1);
      toggles::set_bulk_half_conversion(true);
      cpu::store_floats<T>(reinterpret_cast<char*>(out_bulk.data()), sb, fs.data() + n, n);
      toggles::set_bulk_half_conversion(false);
      cpu::store_floats<T>(reinterpret_cast<char*>(out_each.data()), sb, fs.data() + n, n);
      for (size_t i = 0; i < out_bulk.size(); ++i)
        if (out_bulk[i].bits != out_each[i].bits) FAIL_CHECK("store stride ", stride, " length ", n, " at ", i);
      CHECK(out_bulk.back().bits == 0);  // nothing written past the run
    }
  toggles::set_bulk_half_conversion(true);
}

// f(inputs) computed with bulk and with per-element conversion: the same bits.
template <class T>
void check_same_bits(const std::string& what, const std::function<Tensor()>& f) {
  std::vector<uint16_t> bulk, each;
  {
    BulkConversion on(true);
    bulk = bits<T>(f());
  }
  {
    BulkConversion off(false);
    each = bits<T>(f());
  }
  REQUIRE(bulk.size() == each.size());
  size_t bad = 0;
  for (size_t i = 0; i < bulk.size(); ++i) bad += bulk[i] != each[i];
  INFO(what);
  CHECK(bad == 0);
}

void check_same_bools(const std::string& what, const std::function<Tensor()>& f) {
  std::vector<uint8_t> bulk, each;
  {
    BulkConversion on(true);
    for (bool b : f().contiguous().to_vector<bool>()) bulk.push_back(b);
  }
  {
    BulkConversion off(false);
    for (bool b : f().contiguous().to_vector<bool>()) each.push_back(b);
  }
  INFO(what);
  CHECK(bulk == each);
}

template <class T>
void check_kernels(DType dt) {
  const int64_t rows = 37, cols = 301;  // odd sizes: block tails everywhere
  Tensor a = from_vector<T>(all_patterns<T>(size_t(rows * cols), 2), {rows, cols});
  Tensor b = from_vector<T>(all_patterns<T>(size_t(rows * cols), 3), {rows, cols});
  Tensor at = from_vector<T>(all_patterns<T>(size_t(rows * cols), 4), {cols, rows}).t();  // strided
  Tensor s = full({}, 0.75, dt);
  REQUIRE(a.dtype() == dt);

  using UnaryFn = Tensor (*)(const Tensor&);
  const std::vector<std::pair<const char*, UnaryFn>> unary = {
      {"relu", [](const Tensor& x) { return relu(x); }}, {"neg", [](const Tensor& x) { return neg(x); }},
      {"exp", [](const Tensor& x) { return exp(x); }},   {"sqrt", [](const Tensor& x) { return sqrt(x); }},
      {"tanh", [](const Tensor& x) { return tanh(x); }}, {"sigmoid", [](const Tensor& x) { return sigmoid(x); }},
      {"gelu", [](const Tensor& x) { return gelu(x); }}};
  for (const auto& [name, fn] : unary) {
    check_same_bits<T>(std::string(name) + " contiguous", [&] { return fn(a); });
    check_same_bits<T>(std::string(name) + " strided", [&] { return fn(at); });
  }

  using BinaryFn = Tensor (*)(const Tensor&, const Tensor&);
  const std::vector<std::pair<const char*, BinaryFn>> arith = {
      {"add", [](const Tensor& x, const Tensor& y) { return x + y; }},
      {"sub", [](const Tensor& x, const Tensor& y) { return x - y; }},
      {"mul", [](const Tensor& x, const Tensor& y) { return x * y; }},
      {"div", [](const Tensor& x, const Tensor& y) { return x / y; }},
      {"pow", [](const Tensor& x, const Tensor& y) { return pow(x, y); }},
      {"maximum", [](const Tensor& x, const Tensor& y) { return maximum(x, y); }},
      {"minimum", [](const Tensor& x, const Tensor& y) { return minimum(x, y); }}};
  for (const auto& [name, fn] : arith) {
    check_same_bits<T>(std::string(name) + " contiguous", [&] { return fn(a, b); });
    check_same_bits<T>(std::string(name) + " strided", [&] { return fn(at, b); });
    check_same_bits<T>(std::string(name) + " scalar", [&] { return fn(a, s); });
    check_same_bits<T>(std::string(name) + " row broadcast", [&] { return fn(a, b.narrow(0, 0, 1)); });
  }
  const std::vector<std::pair<const char*, BinaryFn>> compare = {
      {"eq", [](const Tensor& x, const Tensor& y) { return eq(x, y); }},
      {"lt", [](const Tensor& x, const Tensor& y) { return lt(x, y); }},
      {"le", [](const Tensor& x, const Tensor& y) { return le(x, y); }}};
  for (const auto& [name, fn] : compare) {
    check_same_bools(std::string(name) + " contiguous", [&] { return fn(a, b); });
    check_same_bools(std::string(name) + " strided", [&] { return fn(at, b); });
    check_same_bools(std::string(name) + " scalar", [&] { return fn(a, s); });
  }
}

}  // namespace

TEST_CASE("float blocks: bulk and per-element loads and stores give the same bits at every length and stride") {
  check_blocks<Half>();
  check_blocks<BFloat16>();
}

TEST_CASE("float blocks: f16 and bf16 unary, binary and comparison kernels give the same bits either way") {
  SUBCASE("f16") { check_kernels<Half>(kF16); }
  SUBCASE("bf16") { check_kernels<BFloat16>(kBF16); }
}

TEST_CASE("float blocks: f16 and bf16 2x2 max pool, forward and backward, give the same bits either way") {
  for (DType dt : {kF16, kBF16})
    for (int64_t W : {6, 9, 28, 300}) {  // 3 outputs (no vectors), 4, 14, 150 (past one block)
      CAPTURE(W);
      Generator g(static_cast<uint64_t>(W));
      Tensor x = randn({2, 3, 4, W}, kF32, &g) * 100.0;
      // NaN, infinities and values that overflow f16 in some windows.
      std::vector<float> v = x.contiguous().to_vector<float>();
      for (size_t i = 0; i < v.size(); i += 7) v[i] = i % 3 == 0 ? NAN : i % 3 == 1 ? INFINITY : 7.0e4f;
      Tensor xh = from_vector<float>(v, x.shape()).to(dt);
      Tensor gy = (randn({2, 3, 2, W / 2}, kF32, &g) * 1e-3).to(dt);
      // The input gradient shows where each window's winner was: gy lands on its index.
      auto run = [&] {
        Tensor xi = xh.detach().requires_grad_();
        Tensor y = F::max_pool2d(xi, {2, 2});
        y.backward(gy);
        return cat({y.detach().reshape({-1}), xi.grad().reshape({-1})}, 0);
      };
      if (dt == kF16) {
        check_same_bits<Half>("max pool", run);
        continue;
      }
      check_same_bits<BFloat16>("max pool", run);
      // bf16 widens in the registers: each winner is one of its inputs, so the f32 pool of the same
      // values, narrowed, has the same bits, vectorised or not.
      for (bool vectorized : {true, false}) {
        toggles::Scoped v(toggles::Toggle::max_pool_vectorized, vectorized);
        CHECK(bits<BFloat16>(F::max_pool2d(xh, {2, 2})) ==
              bits<BFloat16>(F::max_pool2d(xh.to(kF32), {2, 2}).to(kBF16)));
      }
    }
}

TEST_CASE("float blocks: f16 and bf16 batch norm, forward and backward, give the same bits either way") {
  for (DType dt : {kF16, kBF16})
    for (int64_t S : {7, 300}) {  // a row shorter than a block, and one past a block
      CAPTURE(S);
      Generator g(static_cast<uint64_t>(S));
      const Tensor x = (randn({3, 4, S}, kF32, &g) * 3.0 + 1.0).to(dt), gy = randn({3, 4, S}, kF32, &g).to(dt);
      const Tensor w = randn({4}, kF32, &g), b = randn({4}, kF32, &g);
      auto run = [&] {
        Tensor xi = x.detach().requires_grad_();
        Tensor y = F::batch_norm(xi, Tensor(), Tensor(), w, b, true);
        y.backward(gy);
        return cat({y.detach().reshape({-1}), xi.grad().reshape({-1})}, 0);
      };
      if (dt == kF16) check_same_bits<Half>("batch norm", run);
      else check_same_bits<BFloat16>("batch norm", run);
    }
}

TEST_CASE("float blocks: casts among f32, f16 and bf16, contiguous and strided, equal the scalar conversion") {
  const std::vector<float> v = float_cases(4096);
  Tensor f = from_vector<float>(v, {64, 64});
  for (Tensor src : {f, f.t(), f.narrow(1, 1, 37)}) {
    for (DType to : {kF16, kBF16}) {
      CAPTURE(dtype_name(to));
      Tensor h = src.to(to).contiguous();
      const std::vector<float> sv = src.contiguous().to_vector<float>();
      size_t bad = 0;
      if (to == kF16) {
        const std::vector<Half> hv = h.to_vector<Half>();
        for (size_t i = 0; i < sv.size(); ++i) bad += hv[i].bits != Half(sv[i]).bits;
      } else {
        const std::vector<BFloat16> bv = h.to_vector<BFloat16>();
        for (size_t i = 0; i < sv.size(); ++i) bad += bv[i].bits != BFloat16(sv[i]).bits;
      }
      CHECK(bad == 0);
      // Back to f32 and across to the other 16-bit type, strided too: bits either way.
      const DType other = to == kF16 ? kBF16 : kF16;
      Tensor hs = h.t();
      if (to == kF16) {
        check_same_bits<BFloat16>("f16 -> bf16", [&] { return hs.to(other); });
      } else {
        check_same_bits<Half>("bf16 -> f16", [&] { return hs.to(other); });
      }
      const std::vector<float> back = hs.to(kF32).contiguous().to_vector<float>();
      const std::vector<float> want = [&] {
        std::vector<float> w;
        Tensor c = hs.contiguous();
        if (to == kF16)
          for (Half x : c.to_vector<Half>()) w.push_back(float(x));
        else
          for (BFloat16 x : c.to_vector<BFloat16>()) w.push_back(float(x));
        return w;
      }();
      bad = 0;
      for (size_t i = 0; i < back.size(); ++i) bad += bits_of(back[i]) != bits_of(want[i]);
      CHECK(bad == 0);
    }
  }
}

TEST_CASE("float blocks: f16 and bf16 attention and GELU backward give the same bits either way") {
  for (DType dt : {kF16, kBF16}) {
    CAPTURE(dtype_name(dt));
    Generator g(11);
    // (B, H, T, D) with a permuted (strided) q, so the widening gathers.
    Tensor q = randn({2, 5, 3, 8}, kF32, &g).to(dt).permute({0, 2, 1, 3});
    Tensor k = randn({2, 3, 5, 8}, kF32, &g).to(dt), v = randn({2, 3, 5, 8}, kF32, &g).to(dt);
    Tensor go = randn({2, 3, 5, 8}, kF32, &g).to(dt);
    Tensor x = (randn({7, 33}, kF32, &g) * 3.0).to(dt), gx = randn({7, 33}, kF32, &g).to(dt);
    auto run = [&] {
      Tensor qi = q.detach().requires_grad_(), ki = k.detach().requires_grad_(), vi = v.detach().requires_grad_();
      Tensor out = F::scaled_dot_product_attention(qi, ki, vi, Tensor(), /*causal=*/true);
      out.backward(go);
      Tensor xi = x.detach().requires_grad_();
      gelu(xi).backward(gx);
      return cat({out.detach().reshape({-1}), qi.grad().reshape({-1}), ki.grad().reshape({-1}), vi.grad().reshape({-1}),
                  xi.grad().reshape({-1})},
                 0);
    };
    if (dt == kF16) check_same_bits<Half>("attention, gelu", run);
    else check_same_bits<BFloat16>("attention, gelu", run);
  }
}
