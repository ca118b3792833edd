// safetensors reader (io/safetensors) and Module::load_state_dict: the bytes as a checkpoint file,
// read, then loaded into a small model strictly and leniently. Bad input must throw mdl::Error.
#include "fuzz/fuzz_util.h"
#include "io/safetensors.h"
#include "nn/container.h"
#include "nn/layers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mdl;
  static const std::string path = fuzz::temp_dir() + "/model.safetensors";
  fuzz::write_temp("model.safetensors", data, size);
  io::SafetensorsContents contents;
  try {
    contents = io::read_safetensors(path);
  } catch (const Error&) {
    return 0;
  }
  nn::Sequential model{std::make_shared<nn::Linear>(4, 3), std::make_shared<nn::BatchNorm2d>(3)};
  for (bool strict : {true, false}) {
    try {
      model.load_state_dict(contents.tensors, strict);
    } catch (const Error&) {}
  }
  return 0;
}
