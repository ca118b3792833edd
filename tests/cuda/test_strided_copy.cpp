// The GPU's strided elementwise path (cuda/elementwise.cuh, Geo in cuda/common.cuh) against the
// CPU: copies and casts of views whose dims cannot merge, with odd sizes and steps, up to the most
// dims a kernel takes; broadcast operands; views whose rows stay contiguous (the 16-byte inner-vector
// path), aligned or not; and tensors on both sides of 2^31 elements, where the kernels switch from
// 32-bit index division (kernels/fast_divmod.h) to 64-bit.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include "mdl.h"
#include "tests/support/test_util.h"

using namespace mdl;
using mdl::test::check_close;
using mdl::test::kExact;

namespace {

const Device kGpu = Device::cuda();

// 0, 0.5, 1, ... in shape s, as dtype t (exact in every dtype up to 256 values; wraps for u8).
Tensor ramp(const Shape& s, DType t) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return (arange(0, double(n), 1, TensorOptions(kF64)).reshape(s) * 0.5).to(t);
}

// Row r of a (R, C) f32 tensor x with x[r][c] = r + c (exact in f32 below 2^24).
Tensor expected_row(int64_t r, int64_t cols) { return arange(double(r), double(r + cols), 1, TensorOptions(kF32)); }

}  // namespace

TEST_CASE("cuda: strided copies with odd sizes and steps match the CPU in every dtype" * MDL_CUDA_ONLY) {
  for (DType t : {kF32, kF16, kBF16, kF64, kI32, kI64, kU8, kBool}) {
    // 8 dims of odd sizes, permuted so that no two merge, then stepped.
    const Tensor x = ramp({3, 5, 2, 7, 3, 2, 5, 3}, t);
    const Tensor v = x.permute({7, 0, 6, 1, 5, 2, 4, 3}).slice(2, 1, 5, 3).slice(0, 0, 3, 2);
    const Tensor g = x.to(kGpu).permute({7, 0, 6, 1, 5, 2, 4, 3}).slice(2, 1, 5, 3).slice(0, 0, 3, 2);
    check_close(g.contiguous().cpu(), v.contiguous(), kExact, std::string("8-dim view ") + dtype_name(t));
    check_close(g.to(kF32).cpu(), v.to(kF32), kExact, std::string("8-dim view cast ") + dtype_name(t));
    // Into a strided destination: every other column of a wider tensor.
    Tensor dst = zeros({13, 22}, TensorOptions(t, kGpu));
    const Tensor src = ramp({11, 13}, t);
    dst.slice(1, 0, 22, 2).copy_(src.to(kGpu).transpose(0, 1));
    Tensor want = zeros({13, 22}, TensorOptions(t));
    want.slice(1, 0, 22, 2).copy_(src.transpose(0, 1));
    check_close(dst.cpu(), want, kExact, std::string("into a stepped view ") + dtype_name(t));
  }
}

TEST_CASE("cuda: broadcast operands in copies and binary ops match the CPU" * MDL_CUDA_ONLY) {
  const Tensor a = ramp({1, 7, 1}, kF32), b = ramp({5, 1, 9}, kF32);
  check_close(a.to(kGpu).expand({5, 7, 9}).contiguous().cpu(), a.expand({5, 7, 9}).contiguous(), kExact, "expand");
  check_close((a.to(kGpu) + b.to(kGpu)).cpu(), a + b, kExact, "broadcast add");
  check_close((a.to(kGpu).to(kF16) * b.to(kGpu).transpose(0, 2)).cpu(), a.to(kF16) * b.transpose(0, 2), kExact,
              "broadcast mul of a transposed operand, f16");
}

TEST_CASE("cuda: views whose rows stay contiguous (16 bytes per thread) match the CPU, and misaligned ones too" *
          MDL_CUDA_ONLY) {
  // (B, T, H, D) -> (B, H, T, D), the attention heads' split: D a multiple of the vector (8 f16/bf16,
  // 4 f32), and D = 12 that is not one for f16.
  for (DType t : {kF32, kF16, kBF16})
    for (int64_t D : {12, 16, 64}) {
      const std::string what = std::string(dtype_name(t)) + " D=" + std::to_string(D);
      const Tensor x = ramp({2, 33, 3, D}, t);
      check_close(x.to(kGpu).permute({0, 2, 1, 3}).contiguous().cpu(), x.permute({0, 2, 1, 3}).contiguous(), kExact,
                  "heads split " + what);
      check_close(x.to(kGpu).permute({0, 2, 1, 3}).to(kF16).cpu(), x.permute({0, 2, 1, 3}).to(kF16), kExact,
                  "heads split cast to f16 " + what);
      // A bias over the last dim, broadcast over rows (stride 0), into a transposed view's rows.
      const Tensor b = ramp({D}, t);
      check_close((x.to(kGpu).permute({0, 2, 1, 3}) + b.to(kGpu)).cpu(), x.permute({0, 2, 1, 3}) + b, kExact,
                  "bias over rows " + what);
      // Rows that start one element in: misaligned for a vector, the strided path.
      const Tensor m = x.narrow(3, 1, D - 1);
      check_close(m.to(kGpu).permute({0, 2, 1, 3}).contiguous().cpu(), m.permute({0, 2, 1, 3}).contiguous(), kExact,
                  "misaligned rows " + what);
      Tensor gm = x.to(kGpu);
      check_close(gm.narrow(3, 1, D - 1).permute({0, 2, 1, 3}).contiguous().cpu(), m.permute({0, 2, 1, 3}).contiguous(),
                  kExact, "misaligned device rows " + what);
    }
}

TEST_CASE("cuda: strided copies on both sides of 2^31 elements" * MDL_CUDA_ONLY) {
  // (R, C) f32 tensors x[r][c] = r + c (8.6 GB each), made on the GPU by a broadcast add, then
  // transposed copies. 46340 x 46341 elements is below 2^31 - 1 (the 32-bit path), 65537 x 32771 above.
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{46340, 46341}, std::pair<int64_t, int64_t>{65537, 32771}}) {
    const std::string what = std::to_string(rows) + " x " + std::to_string(cols);
    const Tensor r = arange(0, double(rows), 1, TensorOptions(kF32)).reshape({rows, 1});
    const Tensor c = arange(0, double(cols), 1, TensorOptions(kF32)).reshape({1, cols});
    Tensor x = r.to(kGpu) + c.to(kGpu);
    REQUIRE(x.numel() == rows * cols);
    const Tensor xt = x.transpose(0, 1).contiguous();  // (C, R): the strided copy
    x = Tensor();
    for (int64_t col : {int64_t(0), cols / 2, cols - 2, cols - 1}) {
      // Row `col` of the transpose is column `col` of x: k + col for k < rows.
      check_close(xt.select(0, col).cpu(), expected_row(col, rows), kExact,
                  what + " transposed, row " + std::to_string(col));
    }
    // The last elements sit past 2^31 in the larger case.
    check_close(xt.reshape({-1}).narrow(0, rows * cols - 1000, 1000).cpu(),
                expected_row(cols - 1, rows).narrow(0, rows - 1000, 1000), kExact, what + ", its last elements");
  }
}
