// A crafted complete cache file (data::FileCache opening an existing "<hash of key>.mdlcache"): the
// first byte gives the dataset size (0 to 7), the rest is the file. A valid file is reused and every
// index looked up; an invalid one is removed and rebuilt. Errors must be mdl::Error.
#include "data/cache.h"
#include "data/file_util.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mdl;
  static const std::string key = "fuzz";  // make_seeds.py hashes the same key
  fuzz::Bytes in{data, size};
  const int64_t n = in.u8() % 8;
  fuzz::write_temp(data::hex64(data::fnv1a(key)) + ".mdlcache", in.p, in.n);
  try {
    data::FileCache cache(fuzz::temp_dir(), key, n);
    for (int64_t i = 0; i < n && cache.reused(); ++i) {
      try {
        cache.lookup(i);
      } catch (const Error&) {}
    }
  } catch (const Error&) {}
  return 0;
}
