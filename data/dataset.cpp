// Helpers every dataset uses: label tensors, index checks, the per-thread bytes-read counter.
#include "data/dataset.h"

#include "tensor/error.h"

namespace mdl::data {

Tensor label_tensor(int64_t label) {
  Tensor t = make_tensor({}, kI64, Device::cpu());
  *t.data_ptr<int64_t>() = label;
  return t;
}

int64_t Dataset::label(int64_t index) const {
  const Tensor y = get(index).y;
  MDL_CHECK(y.defined() && y.numel() == 1 && is_integral(y.dtype()) && y.dtype() != kBool, "Dataset::label: sample ",
            index, " of ", identity(), " has no class label (its target is ",
            y.defined() ? dtype_name(y.dtype()) + std::string(" ") + shape_str(y.shape()) : std::string("undefined"),
            ", not one integer)");
  return y.to(kI64).item<int64_t>();
}

void check_index(const char* who, int64_t index, int64_t size) {
  MDL_CHECK(index >= 0 && index < size, who, ": index ", index, " out of range for a dataset of ", size, " samples");
}

int64_t& thread_bytes_read() {
  thread_local int64_t bytes = 0;
  return bytes;
}

}  // namespace mdl::data
