// TensorDataset: row selection and a content hash for the cache key.
#include "data/tensor_dataset.h"

#include <string_view>

#include "data/file_util.h"
#include "tensor/error.h"

namespace mdl::data {

TensorDataset::TensorDataset(Tensor x, Tensor y) : x_(x.detach().contiguous()), y_(y.detach().contiguous()) {
  MDL_CHECK(x_.dim() >= 1 && y_.dim() >= 1, "TensorDataset: x and y need a first (sample) dimension, got ",
            shape_str(x_.shape()), " and ", shape_str(y_.shape()));
  MDL_CHECK(x_.size(0) == y_.size(0), "TensorDataset: x has ", x_.size(0), " rows but y has ", y_.size(0), " (shapes ",
            shape_str(x_.shape()), " and ", shape_str(y_.shape()), ")");
  MDL_CHECK(x_.device().is_cpu() && y_.device().is_cpu(), "TensorDataset: x and y must be on the CPU");
}

Sample TensorDataset::get(int64_t index) const {
  check_index("TensorDataset::get", index, size());
  return {x_.select(0, index).clone(), y_.select(0, index).clone()};
}

std::string TensorDataset::identity() const {
  uint64_t h = fnv1a(std::string_view(static_cast<const char*>(x_.raw_data()), x_.nbytes()));
  h = fnv1a(std::string_view(static_cast<const char*>(y_.raw_data()), y_.nbytes()), h);
  return "TensorDataset(" + shape_str(x_.shape()) + dtype_name(x_.dtype()) + "," + shape_str(y_.shape()) +
         dtype_name(y_.dtype()) + "," + hex64(h) + ")";
}

}  // namespace mdl::data
