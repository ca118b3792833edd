// Module: the base of every layer and model. It owns named parameters, buffers and child
// modules, names them with dotted paths as PyTorch does ("features.0.weight"), switches
// train/eval, moves to a device or dtype, and saves/loads its state dict as safetensors.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace mdl::nn {

class Module : public std::enable_shared_from_this<Module> {
 public:
  explicit Module(std::string type_name = "Module") : type_name_(std::move(type_name)) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The forward of single-input modules (what Sequential chains). Others define their own.
  virtual Tensor forward(const Tensor& x);
  // forward(x), then shows the output to an active summary (nn/summary.h). Modules call their
  // children through it, (*conv1)(x), as PyTorch calls self.conv1(x).
  Tensor operator()(const Tensor& x);
  // For forwards with several inputs (attention): shows the output to an active summary.
  void note_output(const Tensor& y) const;
  // Hybrid precision: under autocast, operator() runs forward in f32 (amp/keep_f32.h).
  void set_keep_f32(bool on) { keep_f32_ = on; }
  bool keeps_f32() const { return keep_f32_; }

  const std::string& type_name() const { return type_name_; }
  // One line describing the layer's configuration, e.g. "in_features=784, out_features=10".
  virtual std::string extra_repr() const { return ""; }

  NamedTensors named_parameters(bool recurse = true) const;
  std::vector<Tensor> parameters(bool recurse = true) const;
  NamedTensors named_buffers(bool recurse = true) const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;
  // Every module below this one (itself first, then depth first), with dotted names. A module
  // registered under several names (tied) is listed once, under its first name, unless
  // remove_duplicate is false, as PyTorch's named_modules. Works on a module that no shared_ptr
  // owns (one on the stack): its own handle then shares no ownership.
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_modules(bool remove_duplicate = true);
  int64_t num_parameters(bool trainable_only = false) const;

  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  void to(Device d);
  void to(DType t);  // floating parameters and buffers only
  // Lays out the 4-D parameters and buffers (conv weights) in f. With ChannelsLast every conv gives
  // channels-last activations, whatever its input, as PyTorch's model.to(memory_format=...).
  void to(MemoryFormat f);
  void zero_grad();

  // State dict: parameters then buffers, dotted names. load_state_dict copies values in and
  // reports missing, unexpected, wrongly shaped or wrongly typed tensors by name.
  NamedTensors state_dict() const;
  void load_state_dict(const NamedTensors& state, bool strict = true);
  void save(const std::string& path) const;  // safetensors
  void load(const std::string& path, bool strict = true);

  // A printable tree of the module, like PyTorch's repr.
  std::string str(int indent = 0) const;

 protected:
  // Returns a handle sharing the registered tensor: to() and load_state_dict() update it in place.
  // A name must be new among the module's parameters, buffers and children (mdl::Error otherwise).
  Tensor register_parameter(const std::string& name, Tensor t, bool requires_grad = true);
  Tensor register_buffer(const std::string& name, Tensor t);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    add_child(name, m);
    return m;
  }
  void add_child(const std::string& name, std::shared_ptr<Module> m);
  // load_state_dict asks the module owning each entry (its name without the prefix) whether it
  // can use the value, before anything is copied; throws mdl::Error naming what is wrong.
  virtual void check_state_entry(const std::string& name, const Tensor& value) const;
  // f(x) inside what operator() puts around forward (the profiler range, the summary entry): for
  // a module's variant forward, such as BatchNorm2d::forward_relu.
  Tensor call_as_module(const Tensor& x, const std::function<Tensor(const Tensor&)>& f);

 private:
  Tensor forward_f32(const Tensor& x);
  void check_new_name(const char* kind, const std::string& name) const;
  void check_state_entries(const std::string& prefix, const std::map<std::string, const Tensor*>& values) const;

  std::string type_name_;
  bool training_ = true;
  bool keep_f32_ = false;
  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

using ModulePtr = std::shared_ptr<Module>;

// Every module's train/eval mode under a model, put back when the guard goes, however the scope
// ends: parents first, so each module's own mode wins over its parent's (a frozen submodule kept
// in eval mode stays so).
class TrainingModeGuard {
 public:
  explicit TrainingModeGuard(Module& model);
  ~TrainingModeGuard();
  TrainingModeGuard(const TrainingModeGuard&) = delete;
  TrainingModeGuard& operator=(const TrainingModeGuard&) = delete;

 private:
  void record(Module& m);
  std::vector<std::pair<Module*, bool>> modes_;
};

namespace detail {
// Sees every module output while installed (per thread); returns the previous observer.
struct ForwardObserver {
  virtual ~ForwardObserver() = default;
  virtual void on_output(const Module& m, const Tensor& y) = 0;
};
ForwardObserver* set_forward_observer(ForwardObserver* o);
bool forward_observed();  // an observer is installed on this thread
}  // namespace detail

}  // namespace mdl::nn
