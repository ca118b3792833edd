// JSON reader (io/json): any bytes parse or throw mdl::Error; a parsed document dumps to text that
// parses back to the same dump, and dump never writes a string that valid_utf8 refuses.
#include <cstdlib>

#include "io/json.h"
#include "tensor/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace json = mdl::io::json;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  json::Value v;
  try {
    v = json::parse(text, "fuzz", json::Limits{32, 4096});
  } catch (const mdl::Error&) {
    return 0;
  }
  const std::string once = json::dump(v);
  if (!json::valid_utf8(once) || json::dump(json::parse(once, "fuzz-dump")) != once) std::abort();
  return 0;
}
