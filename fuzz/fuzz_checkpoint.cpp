// Checkpoint resume (train/checkpoint): the first byte picks the file the rest becomes: 0, the
// weights file (no state file); 1, the state file beside a valid weights file. resume_checkpoint
// then loads both into a small model, AdamW and an enabled GradScaler. Bad input must throw mdl::Error.
#include <filesystem>

#include "fuzz/fuzz_util.h"
#include "io/safetensors.h"
#include "nn/container.h"
#include "nn/layers.h"
#include "optim/adam.h"
#include "train/checkpoint.h"

namespace {
mdl::nn::Sequential make_model() {
  return mdl::nn::Sequential{std::make_shared<mdl::nn::Linear>(4, 3), std::make_shared<mdl::nn::BatchNorm2d>(3)};
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mdl;
  static const std::string path = mdl::fuzz::temp_dir() + "/ckpt.safetensors";
  static const std::string valid_weights = [] {
    const std::string p = mdl::fuzz::temp_dir() + "/valid.safetensors";
    io::save_safetensors(p, make_model().state_dict());
    return p;
  }();
  mdl::fuzz::Bytes in{data, size};
  const bool state_file = in.u8() & 1;
  std::filesystem::remove(path + ".train.safetensors");
  if (state_file) {
    std::filesystem::copy_file(valid_weights, path, std::filesystem::copy_options::overwrite_existing);
    mdl::fuzz::write_temp("ckpt.safetensors.train.safetensors", in.p, in.n);
  } else {
    mdl::fuzz::write_temp("ckpt.safetensors", in.p, in.n);
  }
  nn::Sequential model = make_model();
  optim::AdamW opt(model.parameters());
  amp::GradScaler scaler;
  try {
    train::resume_checkpoint(path, model, opt, scaler);
  } catch (const Error&) {}
  return 0;
}
