// Optimizer base: groups, zero_grad, the step loop, and the state dict through safetensors.
#include "optim/optimizer.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <string_view>

#include "tensor/grad_mode.h"
#include "cuda/api.h"
#include "io/safetensors.h"
#include "tensor/error.h"
#include "ops/native/factory.h"
#include "ops/ops.h"
#include "kernels/optim.h"
#include "ops/autocast.h"
#include "optim/state_values.h"
#include "switches/list/toggles.h"

namespace mdl::optim {
namespace {

// The group options in state-dict order, by name.
constexpr const char* kOptionNames[] = {"lr", "weight_decay", "momentum", "dampening", "beta1", "beta2", "eps"};
template <class Group>  // ParamGroup or const ParamGroup
auto* option(Group& g, int k) {
  decltype(&g.lr) fields[] = {&g.lr, &g.weight_decay, &g.momentum, &g.dampening, &g.beta1, &g.beta2, &g.eps};
  return fields[k];
}
constexpr int kNumOptions = 7;

// The buffers of ParamState by name.
constexpr const char* kBufferNames[] = {"momentum_buffer", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
// The memory format a parameter lies in. Its gradient and state are laid out the same, so the
// update kernels walk all of them as one flat array.
MemoryFormat layout_of(const Tensor& p) {
  return p.is_contiguous() ? MemoryFormat::Contiguous : MemoryFormat::ChannelsLast;
}

Tensor* buffer(ParamState& s, int k) {
  Tensor* fields[] = {&s.momentum_buffer, &s.exp_avg, &s.exp_avg_sq, &s.max_exp_avg_sq};
  return fields[k];
}

// The values a group option may take (k in kOptionNames' order): every option is finite, the
// betas lie in [0, 1), dampening may be any finite number, the others are not negative.
bool is_beta(int k) { return std::string_view(kOptionNames[k]).substr(0, 4) == "beta"; }
bool option_valid(int k, double v) {
  if (!std::isfinite(v)) return false;
  if (is_beta(k)) return v >= 0 && v < 1;
  return std::string_view(kOptionNames[k]) == "dampening" || v >= 0;
}
const char* option_rule(int k) {
  if (is_beta(k)) return "expected a number in [0, 1)";
  return std::string_view(kOptionNames[k]) == "dampening" ? "expected a finite number"
                                                          : "expected a finite number >= 0";
}

// Whether name is "<prefix><i>.<field>" with i < count and field one of `extras` or `fields`.
template <size_t N>
bool indexed_entry(std::string_view name, std::string_view prefix, int64_t count, const char* const (&fields)[N],
                   std::initializer_list<std::string_view> extras) {
  if (name.substr(0, prefix.size()) != prefix) return false;
  name.remove_prefix(prefix.size());
  const size_t dot = name.find('.');
  if (dot == std::string_view::npos) return false;
  const int64_t i = parse_index(name.substr(0, dot));
  if (i < 0 || i >= count) return false;
  const std::string_view field = name.substr(dot + 1);
  for (std::string_view e : extras)
    if (field == e) return true;
  for (const char* f : fields)
    if (field == f) return true;
  return false;
}

// Whether every element is finite: x * 0 is 0 for a finite x and NaN for inf or NaN.
bool all_finite(const Tensor& t) { return std::isfinite(sum(t.to(kF32) * 0.0).item<float>()); }

}  // namespace

std::vector<ParamGroup> param_groups_no_decay(const NamedTensors& named_parameters, double weight_decay) {
  ParamGroup decay, no_decay;
  decay.weight_decay = weight_decay;
  no_decay.weight_decay = 0.0;
  for (const auto& named : named_parameters) {  // not a structured binding: clang 14 cannot capture one
    const std::string& name = named.first;
    const Tensor& p = named.second;
    auto seen = [&](const ParamGroup& g) {
      return std::any_of(g.params.begin(), g.params.end(), [&](const Tensor& q) { return q.is_same(p); });
    };
    if (seen(decay) || seen(no_decay)) continue;  // a tied parameter under a second name: once, as named first
    bool is_bias = name == "bias" || (name.size() >= 5 && name.compare(name.size() - 5, 5, ".bias") == 0);
    (is_bias || p.dim() <= 1 ? no_decay : decay).params.push_back(p);
  }
  return {decay, no_decay};
}

void Optimizer::init_groups(std::vector<ParamGroup> groups) {
  const bool any = std::any_of(groups.begin(), groups.end(), [](const ParamGroup& g) { return !g.params.empty(); });
  MDL_CHECK(any, name_, ": got an empty parameter list (nothing to optimize)");
  for (auto& g : groups) add_param_group(std::move(g));
}

// Checked when a group is added and again before every step: a scheduler or a direct edit of
// param_groups() may have written a negative, infinite or NaN value since.
void Optimizer::check_options(const ParamGroup& group, size_t index) const {
  for (int k = 0; k < kNumOptions; ++k) {
    const double v = *option(group, k);
    MDL_CHECK(option_valid(k, v), name_, ": invalid ", kOptionNames[k], " ", v, " in group ", index, " (",
              option_rule(k), ")");
  }
}

void Optimizer::add_param_group(ParamGroup group) {
  for (int k = 0; k < kNumOptions; ++k)
    if (std::isnan(*option(group, k))) *option(group, k) = *option(defaults_, k);
  check_options(group, groups_.size());
  for (const auto& p : group.params) {
    MDL_CHECK(p.defined(), name_, ": undefined parameter in group ", groups_.size());
    MDL_CHECK(p.is_floating_point(), name_, ": parameter of dtype ", p.dtype(), " is not floating");
    MDL_CHECK(p.is_contiguous() || p.is_contiguous(MemoryFormat::ChannelsLast), name_, ": parameter of shape ",
              p.shape(), " is neither contiguous nor channels-last");
    for (const auto& g : groups_)
      for (const auto& q : g.params)
        MDL_CHECK(!q.is_same(p), name_, ": a parameter of shape ", p.shape(), " appears in two groups");
    // Twice in one group, a parameter would be stepped twice per step, and on the GPU by two blocks
    // at once.
    const auto copies = std::count_if(group.params.begin(), group.params.end(),
                                      [&](const Tensor& q) { return q.is_same(p); });
    MDL_CHECK(copies == 1, name_, ": a parameter of shape ", p.shape(), " appears twice in group ", groups_.size());
  }
  groups_.push_back(std::move(group));
}

double Optimizer::lr() const {
  MDL_CHECK(!groups_.empty(), name_, ": no parameter groups");
  return groups_[0].lr;
}

void Optimizer::set_lr(double lr) {
  MDL_CHECK(std::isfinite(lr) && lr >= 0, name_, ": invalid lr ", lr, " (expected a finite number >= 0)");
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

kernels::DeviceStepState Optimizer::device_state(size_t g, const Tensor& param, const ParamState& state,
                                                 const Tensor& found_inf) const {
  const Tensor& lr = device_lr_[g].value;
  return {.step = state.step.data_ptr<int64_t>(),
          .found_inf = found_inf.defined() ? found_inf.data_ptr<float>() : nullptr,
          .lr = lr.defined() && lr.device() == param.device() ? lr.data_ptr<double>() : nullptr};
}

void Optimizer::sync_device_lr() {
  device_lr_.resize(groups_.size());
  for (size_t g = 0; g < groups_.size(); ++g) {
    DeviceLR& d = device_lr_[g];
    if (groups_[g].params.empty() || d.synced == groups_[g].lr) continue;
    // Inside a capture the write would be replayed with this value at every step.
    MDL_CHECK(!cuda::is_capturing(), name_, ": the lr of group ", g, " changed to ", groups_[g].lr,
              " inside a CUDA Graph capture; call sync_device_lr() before capture_begin()");
    const Device device = groups_[g].params[0].device();
    if (!d.value.defined() || d.value.device() != device) d.value = zeros({}, TensorOptions(kF64, device));
    d.value.fill_(groups_[g].lr);
    d.synced = groups_[g].lr;
  }
}

Tensor Optimizer::new_state_like(const Tensor& param) const {
  Tensor t = make_tensor(param.shape(), kF32, param.device(), layout_of(param));
  return t.zero_();
}

void Optimizer::step(double grad_scale) { step_impl(grad_scale, Tensor()); }

void Optimizer::step_if_finite(const Tensor& found_inf) {
  MDL_CHECK(found_inf.defined() && found_inf.dtype() == kF32 && found_inf.numel() == 1, name_,
            ".step_if_finite: found_inf must be one f32 value");
  step_impl(1.0, found_inf);
}

namespace {}  // namespace

int64_t ParamState::steps() const { return step.defined() ? step.item<int64_t>() : 0; }
int64_t Optimizer::step_count() const { return step_count_.defined() ? step_count_.item<int64_t>() : 0; }

void Optimizer::step_impl(double grad_scale, const Tensor& found_inf) {
  NoGradGuard no_grad;
  // Check every gradient before touching any parameter.
  struct Update {
    size_t group;
    Tensor param, grad;
    ParamState* state = nullptr;  // state_'s nodes stay where they are as it grows
    Tensor copy;                  // the autocast copy the update rewrites, if any
  };
  std::vector<Update> updates;
  for (size_t g = 0; g < groups_.size(); ++g)
    for (const auto& p : groups_[g].params) {
      Tensor gr = p.grad();
      if (!gr.defined()) continue;
      MDL_CHECK(gr.shape() == p.shape(), name_, ": grad of shape ", gr.shape(), " for parameter of shape ", p.shape());
      MDL_CHECK(gr.device() == p.device(), name_, ": grad on ", gr.device(), " for parameter on ", p.device());
      updates.push_back({g, p, gr, nullptr, Tensor()});
    }
  if (updates.empty()) return;
  for (size_t g = 0; g < groups_.size(); ++g) check_options(groups_[g], g);
  sync_device_lr();
  if (!step_count_.defined()) step_count_ = zeros({}, TensorOptions(kI64, updates[0].param.device()));
  // The step counters advance first, one launch per device, each kept where its kernels read it.
  std::vector<std::pair<Device, std::vector<Tensor>>> counters{{step_count_.device(), {step_count_}}};
  for (Update& u : updates) {
    u.state = &state_[u.param.impl()];
    ParamState& st = *u.state;
    if (!st.step.defined()) st.step = zeros({}, TensorOptions(kI64, u.param.device()));
    for (int k = 0; k < 4; ++k)  // a parameter laid out anew (Module::to(MemoryFormat)) takes its state along
      if (Tensor* b = buffer(st, k); b->defined() && !b->is_contiguous(layout_of(u.param)))
        *b = b->contiguous(layout_of(u.param));
    auto it = std::find_if(counters.begin(), counters.end(),
                           [&](const auto& c) { return c.first == u.param.device(); });
    if (it == counters.end()) {
      counters.emplace_back(u.param.device(), std::vector<Tensor>{});
      it = counters.end() - 1;
    }
    it->second.push_back(st.step);
  }
  std::vector<std::pair<Device, Tensor>> flags;  // found_inf on each device
  auto flag_on = [&](Device d) -> Tensor {
    if (!found_inf.defined()) return Tensor();
    for (const auto& [fd, f] : flags)
      if (fd == d) return f;
    return flags.emplace_back(d, found_inf.to(d)).second;
  };
  for (const auto& [d, steps] : counters) kernels::advance_steps(d, steps, flag_on(d));
  // Each grad in its parameter's dtype and layout; then the updates, those of one group, dtype and
  // device together when multi_tensor_step is on (updates are in group order).
  for (Update& u : updates) {
    if (u.grad.dtype() != u.param.dtype()) u.grad = u.grad.to(u.param.dtype());
    if (!u.grad.is_contiguous(layout_of(u.param))) u.grad = u.grad.contiguous(layout_of(u.param));
  }
  // The autocast copies this step rewrites (amp_weight_cache): one batch writes copies of one dtype.
  if (toggles::amp_weight_cache() && writes_weight_copies())
    for (Update& u : updates) u.copy = amp::fresh_weight_copy(u.param);
  const bool together = toggles::multi_tensor_step();
  for (size_t i = 0, j = 0; i < updates.size(); i = j) {
    const Update& u = updates[i];
    const Tensor* batch_copy = u.copy.defined() ? &u.copy : nullptr;
    for (j = i + 1; together && j < updates.size(); ++j) {
      const Update& v = updates[j];
      if (v.group != u.group || v.param.device() != u.param.device() || v.param.dtype() != u.param.dtype()) break;
      if (!v.copy.defined()) continue;
      if (batch_copy && v.copy.dtype() != batch_copy->dtype()) break;
      batch_copy = &v.copy;
    }
    const Tensor flag = flag_on(u.param.device());
    kernels::DeviceStepState device = device_state(u.group, u.param, *u.state, flag);
    if (j - i == 1 && !u.copy.defined()) {
      update(groups_[u.group], u.param, u.grad, *u.state, grad_scale, flag, device);
    } else {
      std::vector<ParamUpdate> batch;
      for (size_t k = i; k < j; ++k)
        batch.push_back({updates[k].param, updates[k].grad, updates[k].state, updates[k].copy});
      device.step = nullptr;
      update_many(groups_[u.group], batch, grad_scale, flag, device);
    }
    for (size_t k = i; k < j; ++k) {
      updates[k].param.bump_version();
      if (updates[k].copy.defined()) amp::weight_copy_rewritten(updates[k].param, updates[k].copy);
    }
  }
}

void Optimizer::update_many(const ParamGroup& group, const std::vector<ParamUpdate>& updates, double grad_scale,
                            const Tensor& found_inf, const kernels::DeviceStepState& device) {
  for (const ParamUpdate& u : updates) {
    kernels::DeviceStepState d = device;
    d.step = u.state->step.data_ptr<int64_t>();
    update(group, u.param, u.grad, *u.state, grad_scale, found_inf, d);
  }
}

NamedTensors Optimizer::state_dict() const {
  NamedTensors d;
  d.emplace_back("step", scalar_tensor(double(step_count()), kI64));
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    ParamGroup g = groups_[gi];
    std::string prefix = "param_groups." + std::to_string(gi) + ".";
    d.emplace_back(prefix + "num_params", scalar_tensor(double(g.params.size()), kI64));
    for (int k = 0; k < kNumOptions; ++k) d.emplace_back(prefix + kOptionNames[k], scalar_tensor(*option(g, k), kF64));
    if (!std::isnan(g.initial_lr)) d.emplace_back(prefix + "initial_lr", scalar_tensor(g.initial_lr, kF64));
  }
  int64_t index = 0;
  for (const auto& g : groups_)
    for (const auto& p : g.params) {
      auto it = state_.find(p.impl());
      std::string prefix = "state." + std::to_string(index++) + ".";
      if (it == state_.end()) continue;
      ParamState s = it->second;
      d.emplace_back(prefix + "step", scalar_tensor(double(s.steps()), kI64));
      for (int k = 0; k < 4; ++k)
        if (buffer(s, k)->defined()) d.emplace_back(prefix + kBufferNames[k], buffer(s, k)->clone());
    }
  return d;
}

void Optimizer::load_state_dict(const NamedTensors& dict) {
  const std::string where = std::string(name_) + ".load_state_dict: ";
  auto quoted = [&](const std::string& name) { return where + "\"" + name + "\""; };
  std::map<std::string, Tensor> by_name;
  for (const auto& [name, t] : dict) {
    MDL_CHECK(t.defined(), quoted(name), " is undefined");
    MDL_CHECK(by_name.emplace(name, t).second, quoted(name), " appears twice");
  }
  auto get = [&](const std::string& name) -> const Tensor& {
    auto it = by_name.find(name);
    MDL_CHECK(it != by_name.end(), where, "missing \"", name, "\"");
    return it->second;
  };
  std::vector<const Tensor*> params;
  for (const auto& g : groups_)
    for (const auto& p : g.params) params.push_back(&p);
  const int64_t total = int64_t(params.size());

  // Everything is read and checked into these first, so a refused state dict changes nothing.
  // Every name must be one this optimizer writes: "step", "param_groups.<g>.<option>",
  // "state.<i>.step" or "state.<i>.<buffer>", with g and i in range.
  for (const auto& [name, t] : by_name)
    MDL_CHECK(
        name == "step" ||
            indexed_entry(name, "param_groups.", int64_t(groups_.size()), kOptionNames, {"num_params", "initial_lr"}) ||
            indexed_entry(name, "state.", total, kBufferNames, {"step"}),
        quoted(name), " is not an entry of this optimizer's state (", groups_.size(), " groups, ", total,
        " parameters)");
  const int64_t step_count = count_value(get("step"), quoted("step"));
  std::vector<ParamGroup> groups = groups_;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const std::string prefix = "param_groups." + std::to_string(gi) + ".";
    const int64_t n = count_value(get(prefix + "num_params"), quoted(prefix + "num_params"));
    MDL_CHECK(n == int64_t(groups[gi].params.size()), where, "group ", gi, " has ", groups[gi].params.size(),
              " parameters, the state dict ", n);
    for (int k = 0; k < kNumOptions; ++k) {
      const std::string name = prefix + kOptionNames[k];
      const double v = finite_value(get(name), quoted(name));
      MDL_CHECK(option_valid(k, v), quoted(name), " is ", v, "; ", option_rule(k));
      *option(groups[gi], k) = v;
    }
    if (auto it = by_name.find(prefix + "initial_lr"); it != by_name.end()) {  // absent before any scheduler
      const double v = finite_value(it->second, quoted(it->first));
      MDL_CHECK(v >= 0, quoted(it->first), " is ", v, "; expected a finite number >= 0");
      groups[gi].initial_lr = v;
    }
  }
  std::unordered_map<const TensorImpl*, ParamState> state;
  for (int64_t i = 0; i < total; ++i) {
    const std::string prefix = "state." + std::to_string(i) + ".";
    const Tensor& param = *params[size_t(i)];
    auto step = by_name.find(prefix + "step");
    if (step == by_name.end()) {
      for (const char* b : kBufferNames)
        MDL_CHECK(!by_name.count(prefix + b), quoted(prefix + b), " comes without \"", prefix, "step\"");
      continue;
    }
    ParamState s;
    s.step = scalar_tensor(double(count_value(step->second, quoted(prefix + "step"))), kI64).to(param.device());
    for (int k = 0; k < 4; ++k) {
      auto b = by_name.find(prefix + kBufferNames[k]);
      if (b == by_name.end()) continue;
      const Tensor& t = b->second;
      MDL_CHECK(t.dtype() == kF32, quoted(b->first), " has dtype ", t.dtype(), "; optimizer state is f32");
      MDL_CHECK(t.shape() == param.shape(), quoted(b->first), " has shape ", t.shape(), " but parameter ", i,
                " has shape ", param.shape());
      MDL_CHECK(all_finite(t), quoted(b->first), " holds inf or NaN");
      *buffer(s, k) = new_state_like(param).copy_(t);
    }
    state.emplace(param.impl(), std::move(s));
  }
  step_count_ = params.empty() ? Tensor() : scalar_tensor(double(step_count), kI64).to(params[0]->device());
  groups_ = std::move(groups);
  state_ = std::move(state);
}

void Optimizer::save(const std::string& path) const { io::save_safetensors(path, state_dict()); }
void Optimizer::load(const std::string& path) { load_state_dict(io::load_safetensors(path)); }

}  // namespace mdl::optim
