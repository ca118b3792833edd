// Helpers every dataset uses: label tensors, index checks, the per-thread bytes-read counter.
#include "data/dataset.h"

#include "tensor/error.h"

namespace mdl::data {

Tensor label_tensor(int64_t label) {
  Tensor t = make_tensor({}, kI64, Device::cpu());
  *t.data_ptr<int64_t>() = label;
  return t;
}

void check_index(const char* who, int64_t index, int64_t size) {
  MDL_CHECK(index >= 0 && index < size, who, ": index ", index, " out of range for a dataset of ", size, " samples");
}

int64_t& thread_bytes_read() {
  thread_local int64_t bytes = 0;
  return bytes;
}

}  // namespace mdl::data
