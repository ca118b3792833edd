// CIFAR readers (data/cifar): the bytes as CIFAR-10's test_batch.bin and as CIFAR-100's test.bin,
// each opened and every sample (up to 16) and its label read. Bad input must throw mdl::Error.
#include "data/cifar.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mdl;
  fuzz::write_temp("test_batch.bin", data, size);
  fuzz::write_temp("test.bin", data, size);
  try {
    data::Cifar10Binary ds(fuzz::temp_dir(), /*train=*/false);
    for (int64_t i = 0; i < ds.size() && i < 16; ++i) data::Sample s = ds.get(i);
  } catch (const Error&) {}
  try {
    data::Cifar100Binary ds(fuzz::temp_dir(), /*train=*/false, data::Cifar100Labels::Coarse);
    for (int64_t i = 0; i < ds.size() && i < 16; ++i) data::Sample s = ds.get(i);
    for (int64_t i = 0; i < ds.size() && i < 16; ++i) (void)ds.label(i);
  } catch (const Error&) {}
  return 0;
}
