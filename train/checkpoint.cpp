// Checkpoints: the weights file, and the training-state file whose tensors are named
// "optimizer.*" and "scaler.*".
#include "train/checkpoint.h"

#include <filesystem>

#include "io/safetensors.h"

namespace mdl::train {
namespace {

std::string state_path(const std::string& checkpoint) { return checkpoint + ".train.safetensors"; }

}  // namespace

void save_checkpoint(const std::string& path, nn::Module& model, const optim::Optimizer& opt,
                     const amp::GradScaler& scaler, const TrainOptions& o, int64_t epoch) {
  const io::Metadata meta = {{"epoch", std::to_string(epoch)}, {"model", o.model}, {"data", o.data}};
  io::save_safetensors(path, model.state_dict(), meta);
  NamedTensors state;
  for (auto& [n, t] : opt.state_dict()) state.emplace_back("optimizer." + n, t);
  for (auto& [n, t] : scaler.state_dict()) state.emplace_back("scaler." + n, t);
  io::save_safetensors(state_path(path), state, meta);
}

int64_t resume_checkpoint(const std::string& path, nn::Module& model, optim::Optimizer& opt, amp::GradScaler& scaler) {
  model.load_state_dict(io::load_safetensors(path));
  if (!std::filesystem::exists(state_path(path))) return 0;
  auto contents = io::read_safetensors(state_path(path));
  NamedTensors optimizer_state, scaler_state;
  for (auto& [n, t] : contents.tensors) {
    if (n.rfind("optimizer.", 0) == 0) optimizer_state.emplace_back(n.substr(10), t);
    if (n.rfind("scaler.", 0) == 0) scaler_state.emplace_back(n.substr(7), t);
  }
  opt.load_state_dict(optimizer_state);
  if (!scaler_state.empty() && scaler.is_enabled()) scaler.load_state_dict(scaler_state);
  for (auto& [k, v] : contents.metadata)
    if (k == "epoch") return std::stoll(v);
  return 0;
}

}  // namespace mdl::train
