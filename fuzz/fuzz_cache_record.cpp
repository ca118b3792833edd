// File cache records (data::deserialize_sample): any bytes give a sample or mdl::Error; a sample
// serializes back to the same bytes.
#include <cstdlib>

#include "data/cache.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mdl;
  data::Sample s;
  try {
    s = data::deserialize_sample(data, size, "fuzz");
  } catch (const Error&) {
    return 0;
  }
  const std::string again = data::serialize_sample(s);
  if (again.size() != size || std::memcmp(again.data(), data, size) != 0) std::abort();
  return 0;
}
