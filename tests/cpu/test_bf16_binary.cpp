// bf16 add, subtract, multiply and divide in the registers (cpu/bf16_binary.h) at every width this CPU
// runs (8 and 16 floats): each result the float op's value rounded once to bf16, NaN, infinities,
// subnormals and rounding ties included, at lengths around the widths and with either operand
// broadcast; and through the tensor ops, the same bits as the float-block path (wide_bf16_binary off)
// on contiguous, broadcast and strided operands.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "cpu/bf16_binary.h"
#include "cpu/cpu_features.h"
#include "mdl.h"
#include "switches/list/toggles.h"
#include "tensor/float_mode.h"

using namespace mdl;

namespace {

std::vector<const cpu::Bf16Binary*> widths_here() {
  std::vector<const cpu::Bf16Binary*> w;
  if (cpu::has_avx2_fma()) w.push_back(&cpu::bf16_binary8());
  if (cpu::has_avx512f()) w.push_back(&cpu::bf16_binary16());
  return w;
}

// Random bf16 bits, one in eight a special value: NaN, +-inf, +-0, +-subnormals, the largest finite.
std::vector<uint16_t> bf16_values(size_t n, std::mt19937& rng) {
  const uint16_t special[] = {0x7fc0, 0xffc1, 0x7f80, 0xff80, 0x0000, 0x8000, 0x0001, 0x8053, 0x7f7f, 0xff7f};
  std::uniform_int_distribution<int> pick(0, 7), which(0, 9);
  std::uniform_real_distribution<float> u(-4, 4);
  std::vector<uint16_t> v(n);
  for (uint16_t& b : v) b = pick(rng) == 0 ? special[which(rng)] : BFloat16(u(rng)).bits;
  return v;
}

float value(uint16_t b) { return float(BFloat16::from_bits(b)); }

float apply(BinaryOp op, float x, float y) {
  switch (op) {
    case BinaryOp::Add: return x + y;
    case BinaryOp::Sub: return x - y;
    case BinaryOp::Mul: return x * y;
    default: return x / y;
  }
}

}  // namespace

TEST_CASE("bf16 binary in the registers: the float op rounded once, at every width and broadcast" *
          doctest::skip(!cpu::has_avx2_fma())) {
  std::mt19937 rng(17);
  for (bool flush : {false, true}) {
    toggles::set_flush_denormal(flush);
    sync_float_mode();
    for (const cpu::Bf16Binary* k : widths_here())
      for (BinaryOp op : {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div})
        for (int64_t n : {1, 7, 8, 9, 15, 16, 17, 33, 100})
          for (int64_t sa : {1, 0})
            for (int64_t sb : {1, 0}) {
              CAPTURE(flush);
              CAPTURE(k->width);
              CAPTURE(int(op));
              CAPTURE(n);
              CAPTURE(sa);
              CAPTURE(sb);
              const std::vector<uint16_t> a = bf16_values(size_t(n), rng), b = bf16_values(size_t(n), rng);
              std::vector<uint16_t> got(size_t(n) + 1, 0xabcd);
              k->run(op, a.data(), sa, b.data(), sb, got.data(), n);
              int wrong = 0;
              for (int64_t i = 0; i < n; ++i) {
                const float want = apply(op, value(a[size_t(i * sa)]), value(b[size_t(i * sb)]));
                // two NaN operands: either one's payload may come out, as the compiler orders a
                // commutative op's operands
                if (std::isnan(want)) wrong += !std::isnan(value(got[size_t(i)]));
                else wrong += got[size_t(i)] != BFloat16(want).bits;
              }
              CHECK(wrong == 0);
              CHECK(got[size_t(n)] == 0xabcd);  // nothing written past n
            }
  }
  toggles::set_flush_denormal(true);
  sync_float_mode();
}

TEST_CASE("bf16 binary ops: wide_bf16_binary on and off give the same bits on every operand layout") {
  Generator gen(3);
  const Tensor a = (randn({6, 1000}, {}, &gen) * 3.0).to(kBF16), b = (randn({6, 1000}, {}, &gen) * 3.0).to(kBF16);
  const Tensor row = randn({1000}, {}, &gen).to(kBF16), one = randn({1}, {}, &gen).to(kBF16);
  const Tensor at = (randn({1000, 6}, {}, &gen)).to(kBF16).transpose(0, 1);  // strided: the blocks either way
  auto all = [&] {
    std::vector<Tensor> r;
    for (const Tensor& y : {b, row, one, at}) r.insert(r.end(), {a + y, a - y, a * y, a / y, y / a});
    r.push_back(a * 0.5);
    return r;
  };
  std::vector<Tensor> on, off;
  {
    toggles::Scoped wide(toggles::Toggle::wide_bf16_binary, true);
    on = all();
  }
  {
    toggles::Scoped wide(toggles::Toggle::wide_bf16_binary, false);
    off = all();
  }
  REQUIRE(on.size() == off.size());
  for (size_t i = 0; i < on.size(); ++i) {
    CAPTURE(i);
    REQUIRE(on[i].numel() == off[i].numel());
    CHECK(std::memcmp(on[i].contiguous().raw_data(), off[i].contiguous().raw_data(), size_t(on[i].numel()) * 2) == 0);
  }
}
