// Loads a weights file into the model and times one validation pass over the held-out split.
#include "tools/mdl_train/evaluate_weights.h"

#include <chrono>
#include <filesystem>

#include "io/safetensors.h"
#include "tensor/error.h"

namespace mdl::train {

Evaluation evaluate_weights(const std::string& path, nn::Module& model, data::DataLoader& loader, int64_t samples,
                            Device device, const amp::AmpConfig& amp, int64_t classes,
                            const std::vector<std::string>& names) {
  MDL_CHECK(std::filesystem::is_regular_file(path), "--evaluate: the weights file '", path, "' does not exist");
  model.load_state_dict(io::read_safetensors(path).tensors);
  Evaluation e;
  const auto start = std::chrono::steady_clock::now();
  e.result = validate(model, loader, device, amp, classes, names);
  e.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  e.samples = samples;
  return e;
}

}  // namespace mdl::train
