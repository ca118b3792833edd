// Stacking samples into a batch with checks on every sample's shape and dtype.
#include "data/collate.h"

#include <cstring>

#include "data/pinned.h"
#include "tensor/error.h"

namespace mdl::data {

namespace {

Tensor stack_field(const std::vector<Sample>& samples, const std::vector<int64_t>& indices, bool pinned, bool is_x) {
  auto field = [&](size_t i) -> const Tensor& { return is_x ? samples[i].x : samples[i].y; };
  const char* name = is_x ? "x" : "y";
  const Tensor& first = field(0);
  MDL_CHECK(first.defined(), "DataLoader: sample ", indices[0], " has no ", name, " tensor");
  Shape shape = first.shape();
  shape.insert(shape.begin(), int64_t(samples.size()));  // (B, ...)
  Tensor out = pinned ? empty_pinned(shape, first.dtype()) : make_tensor(shape, first.dtype(), Device::cpu());
  const size_t row = first.nbytes();
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  for (size_t i = 0; i < samples.size(); ++i) {
    const Tensor& t = field(i);
    MDL_CHECK(t.defined() && t.shape() == first.shape() && t.dtype() == first.dtype(),
              "DataLoader: cannot batch sample ", indices[i], ": its ", name, " is ",
              t.defined() ? dtype_name(t.dtype()) : "undefined", " ", t.defined() ? shape_str(t.shape()) : "",
              " but sample ", indices[0], "'s is ", dtype_name(first.dtype()), " ", shape_str(first.shape()),
              " (resize or crop images to one size)");
    MDL_CHECK(t.device().is_cpu(), "DataLoader: sample ", indices[i], "'s ", name, " is on ", t.device(),
              ", not the CPU");
    const Tensor c = t.contiguous();
    std::memcpy(dst + i * row, c.raw_data(), row);
  }
  return out;
}

}  // namespace

Batch collate(const std::vector<Sample>& samples, const std::vector<int64_t>& indices, bool pinned) {
  MDL_CHECK(!samples.empty() && samples.size() == indices.size(), "collate: expected a nonempty list of samples");
  return {stack_field(samples, indices, pinned, true), stack_field(samples, indices, pinned, false)};
}

}  // namespace mdl::data
