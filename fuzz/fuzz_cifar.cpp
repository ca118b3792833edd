// CIFAR-10 reader (data/cifar): the bytes as test_batch.bin, opened and every sample (up to 16) read.
// Bad input must throw mdl::Error.
#include "data/cifar.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mdl;
  fuzz::write_temp("test_batch.bin", data, size);
  try {
    data::Cifar10Binary ds(fuzz::temp_dir(), /*train=*/false);
    for (int64_t i = 0; i < ds.size() && i < 16; ++i) data::Sample s = ds.get(i);
  } catch (const Error&) {}
  return 0;
}
