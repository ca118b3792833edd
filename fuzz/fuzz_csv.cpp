// CSV reader (train::read_csv, which reads CsvLog files back): the bytes as a CSV file.
// Bad input must throw mdl::Error.
#include "fuzz/fuzz_util.h"
#include "tensor/error.h"
#include "train/csv_log.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mdl;
  const std::string path = fuzz::write_temp("log.csv", data, size);
  try {
    train::CsvTable t = train::read_csv(path);
    for (const auto& name : t.header) t.column(name);
  } catch (const Error&) {}
  return 0;
}
