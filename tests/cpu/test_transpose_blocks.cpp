// The register-block transposes (cpu/transpose_blocks.h) of every instruction set this CPU runs,
// each element size they take, cached and streamed stores, against an element-by-element copy: block
// edges on both sides, strided rows on both sides, sizes below one block. Then the copy through them
// (vector_transpose on) against the element-by-element tiles (off): panel edges, batches with strided
// leading dims, a streamed destination and one that is not aligned for streaming.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cpu/cpu_features.h"
#include "cpu/transpose_blocks.h"
#include "ops/native/factory.h"
#include "ops/ops.h"
#include "switches/list/toggles.h"

using namespace mdl;

namespace {

std::vector<const cpu::TransposeBlocks*> kernels_here() {
  std::vector<const cpu::TransposeBlocks*> k;
  if (cpu::has_avx2_fma()) k.push_back(&cpu::transpose_blocks_avx2());
  if (cpu::has_avx512f()) k.push_back(&cpu::transpose_blocks_avx512());
  return k;
}

struct Aligned {
  void* p;
  explicit Aligned(size_t bytes) : p(std::aligned_alloc(64, (bytes + 63) / 64 * 64)) {}
  ~Aligned() { std::free(p); }
  char* get() const { return static_cast<char*>(p); }
};

// Each element a distinct byte pattern, so a value in the wrong place cannot match.
void fill_pattern(char* p, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) p[i] = char((i * 131 + i / 251) & 0xff);
}

// Runs k on R x C of `bytes`-byte elements, dst rows ldd apart (pad elements after each row must
// stay untouched), src columns lds apart, and compares every element with the plain copy.
void check_kernel(const cpu::TransposeBlocks& k, int bytes, int64_t R, int64_t C, int64_t ldd, int64_t lds,
                  bool stream) {
  const size_t E = size_t(bytes);
  Aligned src(size_t(lds * C) * E), dst(size_t(ldd * R) * E), want(size_t(ldd * R) * E);
  fill_pattern(src.get(), size_t(lds * C) * E);
  std::memset(dst.get(), 0x5a, size_t(ldd * R) * E);
  std::memset(want.get(), 0x5a, size_t(ldd * R) * E);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c)
      std::memcpy(want.get() + (r * ldd + c) * bytes, src.get() + (r + c * lds) * bytes, E);
  k.run(dst.get(), src.get(), R, C, ldd, lds, bytes, stream);
  CHECK(std::memcmp(dst.get(), want.get(), size_t(ldd * R) * E) == 0);
}

}  // namespace

TEST_CASE("transpose blocks: every kernel here, every size it takes, equals the element-by-element copy") {
  const std::vector<const cpu::TransposeBlocks*> ks = kernels_here();
  if (cpu::has_avx2_fma()) CHECK(cpu::transpose_blocks() == ks.back());
  for (const cpu::TransposeBlocks* k : ks) {
    for (int bytes : {2, 4}) {
      if (!((k->sizes >> (bytes == 2 ? 1 : 2)) & 1)) continue;
      for (int64_t R : {1, 8, 15, 16, 17, 40, 64}) {
        for (int64_t C : {1, 15, 16, 31, 32, 33, 70}) {
          CAPTURE(k->isa);
          CAPTURE(bytes);
          CAPTURE(R);
          CAPTURE(C);
          check_kernel(*k, bytes, R, C, C, R, false);
          check_kernel(*k, bytes, R, C, C + 5, R + 3, false);  // both sides strided
          const int64_t line = 64 / bytes, ldd = (C + line - 1) / line * line;
          REQUIRE(cpu::transpose_can_stream(Aligned(64).get(), ldd, bytes));
          check_kernel(*k, bytes, R, C, ldd, R + 1, true);
        }
      }
    }
  }
}

TEST_CASE("transpose blocks: streaming needs an aligned destination whose rows are whole lines") {
  alignas(64) char buf[128];
  CHECK(cpu::transpose_can_stream(buf, 16, 4));
  CHECK(cpu::transpose_can_stream(buf, 32, 2));
  CHECK_FALSE(cpu::transpose_can_stream(buf, 24, 4));
  CHECK_FALSE(cpu::transpose_can_stream(buf + 4, 16, 4));
  CHECK_FALSE(cpu::transpose_can_stream(buf, 16, 2));
}

TEST_CASE("copy: transposes in register blocks equal the element-by-element tiles") {
  auto both = [](const Tensor& t) {
    toggles::set_vector_transpose(false);
    const Tensor tiles = t.contiguous();
    toggles::set_vector_transpose(true);
    const Tensor blocks = t.contiguous();
    CHECK(blocks.is_contiguous());
    CHECK(blocks.to(kF64).to_vector<double>() == tiles.to(kF64).to_vector<double>());
  };
  Generator g(7);
  for (DType dt : {kF32, kF16, kBF16, kI32, kF64, kU8}) {
    // Below a panel, across panel edges (512 rows), batched with a strided leading dim.
    for (const Shape& s : {Shape{70, 33}, Shape{300, 1100}, Shape{3, 48, 530}}) {
      CAPTURE(dt);
      CAPTURE(shape_str(s));
      const Tensor base = (rand(s, {}, &g) * (dt == kU8 ? 200.0 : 30000.0)).to(dt);
      both(base.transpose(-1, -2));
    }
    CAPTURE(dt);
    both((rand({6, 40, 50}, {}, &g) * 100.0).to(dt).transpose(1, 2).narrow(0, 1, 4));
  }
  // 2048 x 1024 f32 is 8 MiB: streamed out.
  const Tensor big = rand({1024, 2048}, {}, &g);
  both(big.t());
  // The same into a destination one element past a line: stored through the cache.
  Tensor wide = zeros({2048 * 1024 + 1});
  Tensor into = wide.narrow(0, 1, 2048 * 1024).view({2048, 1024});
  into.copy_(big.t());
  CHECK(into.to_vector<float>() == big.t().contiguous().to_vector<float>());
}
