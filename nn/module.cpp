// Module: registration, dotted names, train/eval, device/dtype moves, state dicts, printing.
#include "nn/module.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "ops/autocast.h"
#include "tensor/grad_mode.h"
#include "io/safetensors.h"
#include "profiler/recorder.h"
#include "ops/native/native.h"
#include "ops/ops.h"

namespace mdl::nn {

namespace {
// Replaces t's storage and geometry with those of `moved`, in place, so every handle sees it.
void rebind(const Tensor& t, const Tensor& moved) {
  TensorImpl* i = t.impl();
  i->storage = moved.storage();
  i->shape = moved.shape();
  i->strides = moved.strides();
  i->offset = moved.offset();
  i->dtype = moved.dtype();
  i->grad.reset();
}
}  // namespace

Tensor Module::forward(const Tensor&) { MDL_FAIL(type_name_, ": this module has no single-input forward(x)"); }

// Parameters, buffers and children share one namespace, as in PyTorch: a state dict key names one
// tensor, and "a.b" names one thing.
void Module::check_new_name(const char* kind, const std::string& name) const {
  MDL_CHECK(!name.empty() && name.find('.') == std::string::npos, type_name_, ": invalid ", kind, " name '", name, "'");
  auto used_in = [&](const auto& entries) {
    return std::any_of(entries.begin(), entries.end(), [&](const auto& e) { return e.first == name; });
  };
  const char* holder = used_in(params_)     ? "parameter"
                       : used_in(buffers_)  ? "buffer"
                       : used_in(children_) ? "module"
                                            : "";
  MDL_CHECK(!*holder, type_name_, ": cannot register ", kind, " '", name, "': a ", holder, " of that name exists");
}

Tensor Module::register_parameter(const std::string& name, Tensor t, bool requires_grad) {
  check_new_name("parameter", name);
  if (t.defined() && requires_grad) t.requires_grad_(true);
  params_.emplace_back(name, t);
  return t;
}

Tensor Module::register_buffer(const std::string& name, Tensor t) {
  check_new_name("buffer", name);
  buffers_.emplace_back(name, t);
  return t;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> m) {
  MDL_CHECK(m, type_name_, ": child module '", name, "' is null");
  check_new_name("module", name);
  children_.emplace_back(name, std::move(m));
}

NamedTensors Module::named_parameters(bool recurse) const {
  NamedTensors out;
  for (auto& [n, p] : params_)
    if (p.defined()) out.emplace_back(n, p);
  if (recurse)
    for (auto& [cn, c] : children_)
      for (auto& [n, p] : c->named_parameters(true)) out.emplace_back(cn + "." + n, p);
  return out;
}

// Each parameter once, as PyTorch's parameters(): a module registered under two names (tied
// weights) would otherwise hand an optimizer the same tensor twice.
std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (const auto& named : named_parameters(recurse)) {  // not a structured binding: clang 14 cannot capture one
    const Tensor& p = named.second;
    if (std::none_of(out.begin(), out.end(), [&](const Tensor& q) { return q.is_same(p); })) out.push_back(p);
  }
  return out;
}

NamedTensors Module::named_buffers(bool recurse) const {
  NamedTensors out;
  for (auto& [n, b] : buffers_)
    if (b.defined()) out.emplace_back(n, b);
  if (recurse)
    for (auto& [cn, c] : children_)
      for (auto& [n, b] : c->named_buffers(true)) out.emplace_back(cn + "." + n, b);
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_children() const { return children_; }

namespace {
// Pre-order: m under `name`, then its children; with `seen`, a module already listed is skipped.
void collect_modules(const std::string& name, const std::shared_ptr<Module>& m, std::set<const Module*>* seen,
                     std::vector<std::pair<std::string, std::shared_ptr<Module>>>& out) {
  if (seen && !seen->insert(m.get()).second) return;
  out.emplace_back(name, m);
  for (auto& [cn, c] : m->named_children()) collect_modules(name.empty() ? cn : name + "." + cn, c, seen, out);
}
}  // namespace

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_modules(bool remove_duplicate) {
  std::shared_ptr<Module> self = weak_from_this().lock();
  if (!self) self = std::shared_ptr<Module>(std::shared_ptr<Module>(), this);  // not owned: a plain handle
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> out;
  std::set<const Module*> seen;
  collect_modules("", self, remove_duplicate ? &seen : nullptr, out);
  return out;
}

int64_t Module::num_parameters(bool trainable_only) const {
  int64_t n = 0;
  for (const Tensor& p : parameters())  // a tied tensor counted once
    if (!trainable_only || p.requires_grad()) n += p.numel();
  return n;
}

TrainingModeGuard::TrainingModeGuard(Module& model) { record(model); }

TrainingModeGuard::~TrainingModeGuard() {
  for (auto& [m, training] : modes_) m->train(training);
}

void TrainingModeGuard::record(Module& m) {
  modes_.emplace_back(&m, m.is_training());
  for (auto& [name, child] : m.named_children()) record(*child);
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, c] : children_) c->train(on);
}

void Module::to(Device d) {
  NoGradGuard no_grad;
  for (auto& [n, p] : named_parameters())
    if (p.device() != d) rebind(p, native::to_device(p, d));
  for (auto& [n, b] : named_buffers())
    if (b.device() != d) rebind(b, native::to_device(b, d));
}

void Module::to(DType t) {
  MDL_CHECK(is_floating(t), type_name_, ".to: expected a floating dtype, got ", t);
  NoGradGuard no_grad;
  for (auto& [n, p] : named_parameters())
    if (is_floating(p.dtype()) && p.dtype() != t) rebind(p, native::to_dtype(p, t));
  for (auto& [n, b] : named_buffers())
    if (is_floating(b.dtype()) && b.dtype() != t) rebind(b, native::to_dtype(b, t));
}

void Module::to(MemoryFormat f) {
  NoGradGuard no_grad;
  for (auto& [n, p] : named_parameters())
    if (p.dim() == 4 && p.memory_format() != f) rebind(p, native::clone(p, f));
  for (auto& [n, b] : named_buffers())
    if (b.dim() == 4 && b.memory_format() != f) rebind(b, native::clone(b, f));
}

void Module::zero_grad() {
  for (auto& [n, p] : named_parameters()) p.zero_grad();
}

NamedTensors Module::state_dict() const {
  NamedTensors out = named_parameters();
  for (auto& nb : named_buffers()) out.push_back(nb);
  return out;
}

// Dtypes must match, except that a floating tensor takes any floating value, rounded to its own
// dtype as PyTorch's copy_ does (an f32 checkpoint into a model moved to f16).
void Module::load_state_dict(const NamedTensors& state, bool strict) {
  const NamedTensors mine = state_dict();
  std::map<std::string, const Tensor*> dst_of;
  for (const auto& [name, t] : mine) dst_of.emplace(name, &t);
  // Every entry is checked before any is copied: a refused state dict leaves the model as it was.
  std::set<std::string> seen;
  std::vector<std::string> unexpected, missing;
  std::vector<std::pair<const Tensor*, const Tensor*>> copies;  // (model's tensor, value)
  for (const auto& [name, value] : state) {
    auto it = dst_of.find(name);
    if (it == dst_of.end()) {
      unexpected.push_back(name);
      continue;
    }
    MDL_CHECK(seen.insert(name).second, "load_state_dict: '", name, "' appears twice");
    const Tensor& dst = *it->second;
    MDL_CHECK(value.defined(), "load_state_dict: '", name, "' is undefined");
    MDL_CHECK(value.shape() == dst.shape(), "load_state_dict: '", name, "' has shape ", shape_str(value.shape()),
              " in the checkpoint but ", shape_str(dst.shape()), " in the model");
    MDL_CHECK(value.dtype() == dst.dtype() || (is_floating(value.dtype()) && is_floating(dst.dtype())),
              "load_state_dict: '", name, "' has dtype ", value.dtype(), " in the checkpoint but ", dst.dtype(),
              " in the model");
    copies.emplace_back(&dst, &value);
  }
  std::map<std::string, const Tensor*> value_of;
  for (const auto& [name, value] : state)
    if (dst_of.count(name)) value_of.emplace(name, &value);
  check_state_entries("", value_of);
  for (const auto& [name, t] : mine)
    if (!seen.count(name)) missing.push_back(name);
  if (strict && (!missing.empty() || !unexpected.empty())) {
    std::ostringstream s;
    s << "load_state_dict: " << type_name_ << ":";
    if (!missing.empty()) {
      s << " missing";
      for (auto& n : missing) s << " '" << n << "'";
    }
    if (!unexpected.empty()) {
      s << " unexpected";
      for (auto& n : unexpected) s << " '" << n << "'";
    }
    throw Error(s.str());
  }
  NoGradGuard no_grad;
  for (const auto& [dst, value] : copies) {
    native::copy_(*dst, *value);
    dst->bump_version();
  }
}

void Module::check_state_entry(const std::string&, const Tensor&) const {}

void Module::check_state_entries(const std::string& prefix, const std::map<std::string, const Tensor*>& values) const {
  for (const auto* own : {&params_, &buffers_})
    for (const auto& [name, t] : *own)
      if (auto it = values.find(prefix + name); it != values.end()) {
        try {
          check_state_entry(name, *it->second);
        } catch (const Error& e) {
          throw Error("load_state_dict: '" + prefix + name + "': " + e.what());
        }
      }
  for (const auto& [name, child] : children_) child->check_state_entries(prefix + name + ".", values);
}

void Module::save(const std::string& path) const { io::save_safetensors(path, state_dict()); }
void Module::load(const std::string& path, bool strict) { load_state_dict(io::load_safetensors(path), strict); }

namespace {
thread_local detail::ForwardObserver* t_observer = nullptr;
}

detail::ForwardObserver* detail::set_forward_observer(ForwardObserver* o) { return std::exchange(t_observer, o); }
bool detail::forward_observed() { return t_observer != nullptr; }

// A module kept in f32 (amp/keep_f32.h) runs with autocast off and its 16-bit input cast to f32.
Tensor Module::forward_f32(const Tensor& x) {
  amp::AutocastGuard off(kF16, /*enabled=*/false);
  const bool low = x.defined() && (x.dtype() == kF16 || x.dtype() == kBF16);
  return forward(low ? to_dtype(x, kF32) : x);
}

Tensor Module::operator()(const Tensor& x) {
  return call_as_module(
      x, [this](const Tensor& in) { return keep_f32_ && amp::is_autocast_enabled() ? forward_f32(in) : forward(in); });
}

Tensor Module::call_as_module(const Tensor& x, const std::function<Tensor(const Tensor&)>& f) {
  profiler::detail::ScopedRange range;  // the kernels of this call nest under the module's type
  if (profiler::detail::recording()) range.open(profiler::detail::intern(type_name_), profiler::EventKind::Module);
  Tensor y = f(x);
  if (t_observer) t_observer->on_output(*this, y);
  return y;
}

void Module::note_output(const Tensor& y) const {
  if (t_observer) t_observer->on_output(*this, y);
}

std::string Module::str(int indent) const {
  std::ostringstream s;
  s << type_name_ << "(" << extra_repr();
  if (!children_.empty()) {
    s << "\n";
    for (auto& [n, c] : children_)
      s << std::string(size_t(indent + 2), ' ') << "(" << n << "): " << c->str(indent + 2) << "\n";
    s << std::string(size_t(indent), ' ');
  }
  s << ")";
  return s.str();
}

}  // namespace mdl::nn
