// Text datasets (data/text): the first byte gives the context length (1 to 16), the rest is the
// text file. A file that opens gives samples whose tokens decode back to the text, and strict UTF-8
// decoding agrees with io/json's valid_utf8. Bad input must throw mdl::Error.
#include <cstdlib>

#include "data/text.h"
#include "fuzz/fuzz_util.h"
#include "io/json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mdl;
  fuzz::Bytes in{data, size};
  const int64_t context = 1 + in.u8() % 16;
  const std::string text(reinterpret_cast<const char*>(in.p), in.n);
  bool decoded = true;
  try {
    data::utf8_decode(text, "fuzz");
  } catch (const Error&) {
    decoded = false;
  }
  if (decoded != io::json::valid_utf8(text)) std::abort();
  fuzz::write_temp("text.txt", in.p, in.n);
  try {
    data::TextDataset ds(fuzz::temp_dir() + "/text.txt", context);
    if (ds.decode(ds.tokens()) != text) std::abort();
    for (int64_t i = 0; i < ds.size() && i < 8; ++i) data::Sample s = ds.get(i);
  } catch (const Error&) {}
  return 0;
}
