// Helpers for the profiler tests: a table row, a file's text, finding events, checking that a session's events nest
// properly, and one small SimpleCNN training step with its phases marked.
#pragma once
#include <doctest/doctest.h>

#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "mdl.h"
#include "nn/models/models.h"
#include "profiler/session.h"

namespace profiler_test {

using mdl::profiler::Event;
using mdl::profiler::EventKind;
using mdl::profiler::Session;

// The line of a profiler table whose first column is `name`, split on whitespace.
inline std::vector<std::string> table_row(const std::string& table, const std::string& name) {
  std::istringstream lines(table);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string s; words >> s;) w.push_back(s);
    if (!w.empty() && w[0] == name) return w;
  }
  return {};
}

inline std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

inline std::vector<size_t> find_all(const Session& s, const std::string& name, EventKind kind) {
  std::vector<size_t> out;
  for (size_t i = 0; i < s.events().size(); ++i)
    if (s.events()[i].name == name && s.events()[i].kind == kind) out.push_back(i);
  return out;
}

// Every event lies inside its parent on the same thread, children of one parent do not
// overlap, and self time is the duration minus the children's.
inline void check_well_formed(const Session& s) {
  const auto& ev = s.events();
  std::vector<int64_t> children_ns(ev.size(), 0);
  std::vector<int64_t> last_child_end(ev.size(), -1);
  for (size_t i = 0; i < ev.size(); ++i) {
    const Event& e = ev[i];
    REQUIRE(e.end_ns >= e.start_ns);
    REQUIRE(e.tid < s.threads().size());
    if (e.parent < 0) continue;
    const Event& p = ev[size_t(e.parent)];
    CHECK(p.tid == e.tid);
    CHECK(p.start_ns <= e.start_ns);
    CHECK(e.end_ns <= p.end_ns);
    CHECK(last_child_end[size_t(e.parent)] <= e.start_ns);  // events are in start order per thread
    last_child_end[size_t(e.parent)] = e.end_ns;
    children_ns[size_t(e.parent)] += e.dur_ns();
  }
  for (size_t i = 0; i < ev.size(); ++i) {
    CHECK(children_ns[i] <= ev[i].dur_ns());
    CHECK(s.self_ns(i) == ev[i].dur_ns() - children_ns[i]);
  }
}

// One SimpleCNN step on a batch of n 28x28 images, with the phases a training loop marks.
struct CnnStep {
  std::shared_ptr<mdl::nn::Sequential> model = mdl::nn::models::SimpleCNN(1, 10, 28);
  mdl::optim::SGD opt{model->parameters(), {.lr = 0.01}};
  mdl::Tensor x, y;
  explicit CnnStep(int64_t n) : x(mdl::randn({n, 1, 28, 28})), y(mdl::randint(0, 10, {n})) {}
  void run() {
    using mdl::profiler::Phase;
    opt.zero_grad();
    mdl::Tensor loss;
    {
      Phase p(mdl::profiler::kForward);
      loss = mdl::nn::functional::cross_entropy((*model)(x), y);
    }
    {
      Phase p(mdl::profiler::kBackward);
      loss.backward();
    }
    {
      Phase p(mdl::profiler::kOptimizer);
      opt.step();
    }
  }
};

}  // namespace profiler_test
