// IDX reader (data/idx): an images file and a labels file cut from one input (two bytes give the
// labels file's length, it comes first, the images file is the rest), opened as an IdxDataset;
// every sample (up to 64) is then read. Bad input must throw mdl::Error.
#include "data/idx.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mdl;
  fuzz::Bytes in{data, size};
  const fuzz::Bytes labels = in.take(in.u16());
  const std::string labels_path = fuzz::write_temp("labels-idx1-ubyte", labels.p, labels.n);
  const std::string images_path = fuzz::write_temp("images-idx3-ubyte", in.p, in.n);
  try {
    data::read_idx(images_path);
  } catch (const Error&) {}
  try {
    data::IdxDataset ds(images_path, labels_path);
    for (int64_t i = 0; i < ds.size() && i < 64; ++i) {
      data::Sample s = ds.get(i);
      ds.label(i);
    }
  } catch (const Error&) {}
  return 0;
}
