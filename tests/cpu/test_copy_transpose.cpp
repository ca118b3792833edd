// The CPU copy's tiled path for transposed matrices (cpu/copy.cpp): every element size,
// sizes that do not divide the tile, batches with strided leading dims, and the same result as the
// row-by-row copy (toggles::set_tiled_transpose(false)); shapes it must not take stay correct.
#include <doctest/doctest.h>

#include <vector>

#include "switches/list/toggles.h"
#include "ops/native/factory.h"
#include "ops/ops.h"

using namespace mdl;

namespace {

// t's elements in row-major order of its shape, read through its strides one by one.
std::vector<double> by_index(const Tensor& t) {
  const Tensor c = t.to(kF64);
  std::vector<double> out;
  const Shape& s = c.shape();
  std::vector<int64_t> idx(s.size(), 0);
  for (int64_t n = 0; n < c.numel(); ++n) {
    int64_t off = c.offset();
    for (size_t d = 0; d < s.size(); ++d) off += idx[d] * c.stride(int64_t(d));
    out.push_back(c.data_ptr<double>()[off - c.offset()]);
    for (int64_t d = int64_t(s.size()) - 1; d >= 0; --d) {
      if (++idx[size_t(d)] < s[size_t(d)]) break;
      idx[size_t(d)] = 0;
    }
  }
  return out;
}

}  // namespace

TEST_CASE("copy: transposed matrices in tiles equal the element-by-element copy, every element size") {
  for (DType dt : {kF32, kF64, kF16, kBF16, kI64, kI32, kU8, kBool}) {
    for (const Shape& s : {Shape{200, 333}, Shape{64, 1024}, Shape{3, 70, 150}, Shape{2, 2, 129, 65}}) {
      CAPTURE(dt);
      CAPTURE(shape_str(s));
      Generator g(3);
      const Tensor base = (rand(s, {}, &g) * 200.0).to(dt);
      const Tensor t = base.transpose(-1, -2);  // unit stride along the second-to-last dim
      const Tensor tiled = t.contiguous();
      toggles::set_tiled_transpose(false);
      const Tensor rows = t.contiguous();
      toggles::set_tiled_transpose(true);
      CHECK(tiled.is_contiguous());
      CHECK(tiled.to(kF64).to_vector<double>() == rows.to(kF64).to_vector<double>());
      CHECK(tiled.to(kF64).to_vector<double>() == by_index(t));
    }
  }
}

TEST_CASE("copy: batches with strided leading dims, and layouts the tiled path leaves alone") {
  Generator g(4);
  const Tensor x = rand({6, 40, 50}, {}, &g);
  const Tensor a = x.transpose(1, 2).narrow(0, 1, 4);  // leading dim offset and stride
  CHECK(a.contiguous().to_vector<float>() == [&] {
    std::vector<float> v;
    for (double d : by_index(a)) v.push_back(float(d));
    return v;
  }());
  const Tensor b = x.permute({2, 0, 1});  // last dim strided, second-to-last not unit: generic path
  const std::vector<double> want = by_index(b);
  CHECK(b.contiguous().to(kF64).to_vector<double>() == want);
  const Tensor small = rand({5, 7}, {}, &g).t();  // below the size threshold
  CHECK(small.contiguous().to(kF64).to_vector<double>() == by_index(small));
}
