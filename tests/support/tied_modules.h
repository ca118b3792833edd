// A model with a module registered under two names (PyTorch's `self.b = self.a`), for the tests
// of named_modules and summary: Outer holds s (Shared: a and b, one Linear(4, 4)) and l (Linear(4, 2)).
#pragma once
#include <memory>

#include "mdl.h"

namespace tied_test {

struct Shared : mdl::nn::Module {
  std::shared_ptr<mdl::nn::Linear> a;
  Shared() : Module("Shared") {
    a = register_module("a", std::make_shared<mdl::nn::Linear>(4, 4));
    register_module("b", a);
  }
  mdl::Tensor forward(const mdl::Tensor& x) override { return (*a)(x); }
};

struct Outer : mdl::nn::Module {
  std::shared_ptr<Shared> s = register_module("s", std::make_shared<Shared>());
  std::shared_ptr<mdl::nn::Linear> l = register_module("l", std::make_shared<mdl::nn::Linear>(4, 2));
  Outer() : Module("Outer") {}
  mdl::Tensor forward(const mdl::Tensor& x) override { return (*l)((*s)(x)); }
};

}  // namespace tied_test
