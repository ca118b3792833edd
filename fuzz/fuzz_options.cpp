// mdl-train's options (tools/mdl_train/options.cpp): the bytes split at NUL into an argument list and parsed.
// A bad argument must throw UsageError (an mdl::Error).
#include <string>
#include <vector>

#include "tools/mdl_train/options.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args(1);
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0) args.emplace_back();
    else args.back() += char(data[i]);
  }
  try {
    mdl::train::parse_train_options(args);
  } catch (const mdl::train::UsageError&) {}
  return 0;
}
