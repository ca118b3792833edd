// Optimizer base: groups, zero_grad, the step loop, and the state dict through safetensors.
#include "optim/optimizer.h"

#include <map>

#include "tensor/grad_mode.h"
#include "io/safetensors.h"
#include "tensor/error.h"
#include "ops/factory.h"

namespace mdl::optim {
namespace {

// The group options in state-dict order, by name.
constexpr const char* kOptionNames[] = {"lr", "weight_decay", "momentum", "dampening", "beta1", "beta2", "eps"};
double* option(ParamGroup& g, int k) {
  double* fields[] = {&g.lr, &g.weight_decay, &g.momentum, &g.dampening, &g.beta1, &g.beta2, &g.eps};
  return fields[k];
}
constexpr int kNumOptions = 7;

// The buffers of ParamState by name.
constexpr const char* kBufferNames[] = {"momentum_buffer", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
Tensor* buffer(ParamState& s, int k) {
  Tensor* fields[] = {&s.momentum_buffer, &s.exp_avg, &s.exp_avg_sq, &s.max_exp_avg_sq};
  return fields[k];
}

double scalar_of(const Tensor& t) { return t.to(kF64).item<double>(); }

}  // namespace

std::vector<ParamGroup> param_groups_no_decay(const NamedTensors& named_parameters, double weight_decay) {
  ParamGroup decay, no_decay;
  decay.weight_decay = weight_decay;
  no_decay.weight_decay = 0.0;
  for (const auto& [name, p] : named_parameters) {
    bool is_bias = name == "bias" || (name.size() >= 5 && name.compare(name.size() - 5, 5, ".bias") == 0);
    (is_bias || p.dim() <= 1 ? no_decay : decay).params.push_back(p);
  }
  return {decay, no_decay};
}

void Optimizer::init_groups(std::vector<ParamGroup> groups) {
  for (auto& g : groups) add_param_group(std::move(g));
}

void Optimizer::add_param_group(ParamGroup group) {
  for (int k = 0; k < kNumOptions; ++k)
    if (std::isnan(*option(group, k))) *option(group, k) = *option(defaults_, k);
  MDL_CHECK(group.lr >= 0, name_, ": invalid learning rate ", group.lr);
  MDL_CHECK(group.weight_decay >= 0, name_, ": invalid weight_decay ", group.weight_decay);
  for (const auto& p : group.params) {
    MDL_CHECK(p.defined(), name_, ": undefined parameter in group ", groups_.size());
    MDL_CHECK(p.is_floating_point(), name_, ": parameter of dtype ", p.dtype(), " is not floating");
    MDL_CHECK(p.is_contiguous(), name_, ": parameter of shape ", p.shape(), " is not contiguous");
    for (const auto& g : groups_)
      for (const auto& q : g.params)
        MDL_CHECK(!q.is_same(p), name_, ": a parameter of shape ", p.shape(), " appears in two groups");
  }
  groups_.push_back(std::move(group));
}

double Optimizer::lr() const {
  MDL_CHECK(!groups_.empty(), name_, ": no parameter groups");
  return groups_[0].lr;
}

void Optimizer::set_lr(double lr) {
  for (auto& g : groups_) g.lr = lr;
}

const ParamState* Optimizer::state(const Tensor& param) const {
  auto it = state_.find(param.impl());
  return it == state_.end() ? nullptr : &it->second;
}

void Optimizer::zero_grad(bool set_to_none) {
  for (auto& g : groups_)
    for (auto& p : g.params) {
      if (set_to_none) p.zero_grad();
      else if (Tensor gr = p.grad(); gr.defined()) gr.zero_();
    }
}

Tensor Optimizer::new_state_like(const Tensor& param) const {
  return zeros(param.shape(), TensorOptions(kF32, param.device()));
}

void Optimizer::step(double grad_scale) {
  NoGradGuard no_grad;
  // Check every gradient before touching any parameter.
  for (const auto& g : groups_)
    for (const auto& p : g.params) {
      Tensor gr = p.grad();
      if (!gr.defined()) continue;
      MDL_CHECK(gr.shape() == p.shape(), name_, ": grad of shape ", gr.shape(), " for parameter of shape ", p.shape());
      MDL_CHECK(gr.device() == p.device(), name_, ": grad on ", gr.device(), " for parameter on ", p.device());
    }
  ++step_count_;
  for (const auto& g : groups_)
    for (const auto& p : g.params) {
      Tensor gr = p.grad();
      if (!gr.defined()) continue;
      if (gr.dtype() != p.dtype()) gr = gr.to(p.dtype());
      if (!gr.is_contiguous()) gr = gr.contiguous();
      update(g, p, gr, state_[p.impl()], grad_scale);
      p.bump_version();
    }
}

NamedTensors Optimizer::state_dict() const {
  NamedTensors d;
  d.emplace_back("step", scalar_tensor(double(step_count_), kI64));
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    ParamGroup g = groups_[gi];
    std::string prefix = "param_groups." + std::to_string(gi) + ".";
    d.emplace_back(prefix + "num_params", scalar_tensor(double(g.params.size()), kI64));
    for (int k = 0; k < kNumOptions; ++k) d.emplace_back(prefix + kOptionNames[k], scalar_tensor(*option(g, k), kF64));
  }
  int64_t index = 0;
  for (const auto& g : groups_)
    for (const auto& p : g.params) {
      auto it = state_.find(p.impl());
      std::string prefix = "state." + std::to_string(index++) + ".";
      if (it == state_.end()) continue;
      ParamState s = it->second;
      d.emplace_back(prefix + "step", scalar_tensor(double(s.step), kI64));
      for (int k = 0; k < 4; ++k)
        if (buffer(s, k)->defined()) d.emplace_back(prefix + kBufferNames[k], buffer(s, k)->clone());
    }
  return d;
}

void Optimizer::load_state_dict(const NamedTensors& dict) {
  std::map<std::string, Tensor> by_name(dict.begin(), dict.end());
  auto get = [&](const std::string& name) -> const Tensor& {
    auto it = by_name.find(name);
    MDL_CHECK(it != by_name.end(), name_, ".load_state_dict: missing \"", name, "\"");
    return it->second;
  };
  // Check the layout first, so a failed load leaves the optimizer as it was.
  int64_t total = 0;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    int64_t n = int64_t(scalar_of(get("param_groups." + std::to_string(gi) + ".num_params")));
    MDL_CHECK(n == int64_t(groups_[gi].params.size()), name_, ".load_state_dict: group ", gi, " has ",
              groups_[gi].params.size(), " parameters, the state dict ", n);
    total += n;
  }
  MDL_CHECK(!by_name.count("param_groups." + std::to_string(groups_.size()) + ".num_params"), name_,
            ".load_state_dict: the state dict has more than the optimizer's ", groups_.size(), " groups");
  std::vector<const Tensor*> params;
  for (const auto& g : groups_)
    for (const auto& p : g.params) params.push_back(&p);
  for (const auto& [name, t] : dict) {
    if (name.rfind("state.", 0) != 0) continue;
    size_t dot = name.find('.', 6);
    int64_t i = std::stoll(name.substr(6, dot - 6));
    MDL_CHECK(i >= 0 && i < total, name_, ".load_state_dict: \"", name, "\" names parameter ", i,
              " but the optimizer has ", total, " parameters");
    std::string field = name.substr(dot + 1);
    if (field != "step")
      MDL_CHECK(t.shape() == params[i]->shape(), name_, ".load_state_dict: \"", name, "\" has shape ", t.shape(),
                " but parameter ", i, " has shape ", params[i]->shape());
  }
  step_count_ = int64_t(scalar_of(get("step")));
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    std::string prefix = "param_groups." + std::to_string(gi) + ".";
    for (int k = 0; k < kNumOptions; ++k) *option(groups_[gi], k) = scalar_of(get(prefix + kOptionNames[k]));
  }
  state_.clear();
  for (int64_t i = 0; i < total; ++i) {
    std::string prefix = "state." + std::to_string(i) + ".";
    auto it = by_name.find(prefix + "step");
    if (it == by_name.end()) continue;
    ParamState& s = state_[params[i]->impl()];
    s.step = int64_t(scalar_of(it->second));
    for (int k = 0; k < 4; ++k)
      if (auto b = by_name.find(prefix + kBufferNames[k]); b != by_name.end())
        *buffer(s, k) = b->second.to(params[i]->device(), kF32).contiguous().clone();
  }
}

void Optimizer::save(const std::string& path) const { io::save_safetensors(path, state_dict()); }
void Optimizer::load(const std::string& path) { load_state_dict(io::load_safetensors(path)); }

}  // namespace mdl::optim
