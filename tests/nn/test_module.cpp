// nn::Module's own bookkeeping: walking the module tree (a model held by a shared_ptr or not, a
// module registered under two names) and refusing a name already taken by a parameter, buffer or
// child.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "mdl.h"
#include "tests/support/tied_modules.h"

using namespace mdl;

TEST_CASE("module: named_modules walks a model that no shared_ptr owns") {
  nn::Sequential model;
  model.push_back(std::make_shared<nn::Linear>(4, 3));
  model.push_back(std::make_shared<nn::ReLU>());
  const auto mods = model.named_modules();
  REQUIRE(mods.size() == 3);
  CHECK(mods[0].first == "");
  CHECK(mods[0].second.get() == &model);
  CHECK(mods[1].first == "0");
  CHECK(mods[1].second->type_name() == "Linear");
  CHECK(mods[2].first == "1");

  auto owned = std::make_shared<nn::Sequential>();
  owned->push_back(std::make_shared<nn::ReLU>());
  const auto root = owned->named_modules()[0].second;
  CHECK(root == owned);
  CHECK(owned.use_count() == 2);  // the root's handle shares ownership when there is one
}

namespace {
// Registers its first entry as `first` ("parameter", "buffer" or "module"), then a second one of
// kind `second` under the same name.
struct NameClash : nn::Module {
  NameClash(const std::string& first, const std::string& second) : Module("NameClash") {
    add(first, "w");
    add(second, "w");
  }
  void add(const std::string& kind, const std::string& name) {
    if (kind == "parameter") register_parameter(name, ones({2}));
    if (kind == "buffer") register_buffer(name, zeros({3}));
    if (kind == "module") register_module(name, std::make_shared<nn::ReLU>());
  }
};
}  // namespace

TEST_CASE("module: a name already used by a parameter, buffer or child is refused") {
  const std::vector<std::string> kinds = {"parameter", "buffer", "module"};
  for (const std::string& first : kinds)
    for (const std::string& second : kinds) {
      CAPTURE(first);
      CAPTURE(second);
      CHECK_THROWS_WITH_AS(NameClash(first, second), doctest::Contains("'w'"), Error);
      const std::string holder = "a " + first + " of that name exists";
      CHECK_THROWS_WITH_AS(NameClash(first, second), doctest::Contains(holder.c_str()), Error);
    }
}

namespace {
using tied_test::Outer;

std::vector<std::string> names_of(const std::vector<std::pair<std::string, nn::ModulePtr>>& mods) {
  std::vector<std::string> out;
  for (const auto& [name, m] : mods) out.push_back(name);
  return out;
}
}  // namespace

TEST_CASE("module: named_modules lists a module registered twice once, unless asked for every name") {
  auto m = std::make_shared<Outer>();
  CHECK(names_of(m->named_modules()) == std::vector<std::string>{"", "s", "s.a", "l"});
  CHECK(names_of(m->named_modules(/*remove_duplicate=*/false)) == std::vector<std::string>{"", "s", "s.a", "s.b", "l"});
}
