// The registry of differentiable ops sees every op: each source that records a node registers its
// ops (MDL_DIFFERENTIABLE_OPS), each such source was linked into this program and its registrations
// ran, and record() refuses a name nobody registered. With the gradcheck-coverage test this keeps
// every backward under a gradcheck case.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/function.h"
#include "autograd/op_registry.h"
#include "ops/native/factory.h"

using namespace mdl;
namespace fs = std::filesystem;

namespace {

// The repository root, from this file's path as the compiler saw it.
fs::path repo_root() {
  const fs::path here = fs::path(__FILE__).parent_path().parent_path().parent_path();
  return here.empty() ? fs::path(".") : here;
}

struct Source {
  std::string path;  // relative to the repository root
  std::string text;
};

// The library's sources (.cpp and .cu), except the registry's own files.
std::vector<Source> library_sources() {
  const fs::path root = repo_root();
  std::vector<Source> out;
  for (const char* folder : {"tensor", "io", "profiler", "kernels", "cpu", "cuda", "ops", "autograd", "nn", "optim",
                             "amp", "data", "dist", "switches", "train"}) {
    if (!fs::exists(root / folder)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(root / folder)) {
      const std::string ext = entry.path().extension().string();
      if (ext != ".cpp" && ext != ".cu") continue;
      const std::string rel = entry.path().lexically_relative(root).generic_string();
      if (rel == "autograd/op_registry.cpp" || rel == "autograd/function.cpp") continue;
      std::ifstream f(entry.path());
      std::stringstream text;
      text << f.rdbuf();
      out.push_back({rel, text.str()});
    }
  }
  return out;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

TEST_CASE("op registry: every source that records a node registers its ops") {
  const std::vector<Source> sources = library_sources();
  REQUIRE(sources.size() > 50);
  int recording = 0;
  for (const Source& s : sources) {
    if (s.text.find("record_fn(") == std::string::npos) continue;
    ++recording;
    CHECK_MESSAGE(s.text.find("MDL_DIFFERENTIABLE_OPS(") != std::string::npos, s.path,
                  " records nodes but registers no op: add MDL_DIFFERENTIABLE_OPS(...) beside the ops");
  }
  CHECK(recording >= 10);
}

TEST_CASE("op registry: every registering source ran its registrations in this program") {
  const std::vector<std::string> ran = autograd::differentiable_op_sources();
  for (const Source& s : library_sources()) {
    if (s.text.find("MDL_DIFFERENTIABLE_OPS(") == std::string::npos) continue;
    const bool linked = std::any_of(ran.begin(), ran.end(), [&](const std::string& f) { return ends_with(f, s.path); });
    CHECK_MESSAGE(linked, s.path, " registers ops, but its registrations did not run in the test program");
  }
}

TEST_CASE("op registry: the elementwise kinds marked differentiable are registered, the others are not") {
  CHECK(autograd::is_differentiable_op("add"));
  CHECK(autograd::is_differentiable_op("gelu_tanh"));
  CHECK(autograd::is_differentiable_op("conv2d"));
  CHECK_FALSE(autograd::is_differentiable_op("relu_backward"));
  CHECK_FALSE(autograd::is_differentiable_op("eq"));
}

TEST_CASE("op registry: record refuses a node whose op is not registered") {
  Tensor x = ones({2});
  x.requires_grad_();
  Tensor y = ones({2});
  CHECK_THROWS_WITH_AS(autograd::record_fn("not_an_op", {x}, {y}, {},
                                           [](const autograd::Grads& g, const autograd::FnNode&) { return g; }),
                       doctest::Contains("missing from the registry of differentiable ops"), Error);
}
