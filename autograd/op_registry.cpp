// The registry's storage. Registrations run during static initialization, before any thread runs
// an op; afterwards the registry is only read.
#include "autograd/op_registry.h"

#include <set>

namespace mdl::autograd {

namespace {

struct Registry {
  std::set<std::string, std::less<>> names;
  std::set<std::string> sources;
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

DifferentiableOps::DifferentiableOps(const char* file, std::initializer_list<const char*> names) {
  Registry& r = registry();
  r.sources.insert(file);
  for (const char* name : names)
    if (name) r.names.insert(name);
}

bool is_differentiable_op(std::string_view name) {
  const auto& names = registry().names;
  return names.find(name) != names.end();
}

std::vector<std::string> differentiable_ops() {
  const auto& names = registry().names;
  return {names.begin(), names.end()};
}

std::vector<std::string> differentiable_op_sources() {
  const auto& sources = registry().sources;
  return {sources.begin(), sources.end()};
}

}  // namespace mdl::autograd
