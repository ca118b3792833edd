// Checkpoint resume (train/checkpoint): the first byte picks the file the rest becomes: 0, the
// weights file (no state file); 1, the state file beside a valid weights file; 2, the same, but
// when the input parses as safetensors it is written back with the epoch, size and CRC-32 that
// match the weights, so the optimizer's and scaler's loaders are reached past the pair check.
// resume_checkpoint then loads both into a small model, AdamW and an enabled GradScaler. Bad
// input must throw mdl::Error.
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>

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
    io::save_safetensors(p, make_model().state_dict(), {{"epoch", "3"}});
    return p;
  }();
  // The metadata a state file beside valid_weights records.
  static const io::Metadata pair_meta = [] {
    std::ifstream f(valid_weights, std::ios::binary);
    const std::string bytes{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
    char crc[16];
    std::snprintf(crc, sizeof crc, "%08lx", crc32(0, reinterpret_cast<const Bytef*>(bytes.data()), uInt(bytes.size())));
    return io::Metadata{{"epoch", "3"}, {"model_bytes", std::to_string(bytes.size())}, {"model_crc32", crc}};
  }();
  mdl::fuzz::Bytes in{data, size};
  const int mode = in.u8() % 3;
  std::filesystem::remove(path + ".train.safetensors");
  if (mode >= 1) {
    std::filesystem::copy_file(valid_weights, path, std::filesystem::copy_options::overwrite_existing);
    mdl::fuzz::write_temp("ckpt.safetensors.train.safetensors", in.p, in.n);
    if (mode == 2) {
      io::SafetensorsContents state;
      try {
        state = io::read_safetensors(path + ".train.safetensors");
      } catch (const Error&) {
        return 0;
      }
      io::Metadata meta = pair_meta;
      for (const auto& [k, v] : state.metadata)
        if (k != "epoch" && k != "model_bytes" && k != "model_crc32") meta.emplace_back(k, v);
      io::save_safetensors(path + ".train.safetensors", state.tensors, meta);
    }
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
