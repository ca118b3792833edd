// The profiler's recording: kernels nest under scopes, backward nodes and modules on the thread
// that ran them; threads get their own well-formed tracks; shapes, FLOPs and bytes per kernel;
// the loader's waits; nothing is recorded outside a session; misuse throws.
#include <doctest/doctest.h>

#include <set>
#include <thread>

#include "amp/grad_scaler.h"
#include "data/loader.h"
#include "data/tensor_dataset.h"
#include "tests/support/profiler_test_util.h"
#include "kernels/core.h"
#include "switches/list/toggles.h"

using namespace mdl;
using namespace profiler_test;

TEST_CASE("profiler: nested scopes give properly nested events with self time") {
  Tensor a = randn({16, 16});
  profiler::Session prof;
  {
    profiler::Scope outer("outer");
    Tensor b = a + a;
    {
      profiler::Scope inner("inner");
      Tensor c = matmul(b, b);
    }
  }
  prof.stop();
  check_well_formed(prof);
  auto outer = find_all(prof, "outer", EventKind::Scope), inner = find_all(prof, "inner", EventKind::Scope);
  auto mm = find_all(prof, "matmul", EventKind::Kernel), add = find_all(prof, "binary", EventKind::Kernel);
  REQUIRE(outer.size() == 1);
  REQUIRE(inner.size() == 1);
  REQUIRE(mm.size() == 1);
  REQUIRE(add.size() == 1);
  const auto& ev = prof.events();
  CHECK(ev[outer[0]].parent == -1);
  CHECK(ev[inner[0]].parent == int32_t(outer[0]));
  CHECK(ev[mm[0]].parent == int32_t(inner[0]));
  CHECK(ev[add[0]].parent == int32_t(outer[0]));
  CHECK(ev[outer[0]].tid == 0);
  CHECK(prof.threads()[0].name == "main");
  CHECK(prof.self_ns(outer[0]) < ev[outer[0]].dur_ns());
}

TEST_CASE("profiler: each thread records on its own named track") {
  constexpr int kThreads = 4;
  profiler::Session prof;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([t] {
      profiler::set_thread_name("worker " + std::to_string(t));
      profiler::Scope work("work");
      Tensor x = full({64}, double(t));
      for (int i = 0; i < 3; ++i) x = x * x + x;
    });
  for (auto& th : threads) th.join();
  prof.stop();
  check_well_formed(prof);
  REQUIRE(prof.threads().size() == size_t(kThreads) + 1);
  auto work = find_all(prof, "work", EventKind::Scope);
  REQUIRE(work.size() == size_t(kThreads));
  std::set<uint32_t> tids;
  for (size_t w : work) {
    const Event& e = prof.events()[w];
    tids.insert(e.tid);
    CHECK(prof.threads()[e.tid].name.rfind("worker ", 0) == 0);
    // full's fill and 3 x (mul, add): every kernel of the thread sits inside its scope.
    int kernels = 0;
    for (const Event& k : prof.events())
      if (k.tid == e.tid && k.kind == EventKind::Kernel) {
        ++kernels;
        CHECK(k.parent == int32_t(w));
      }
    CHECK(kernels == 7);
  }
  CHECK(tids.size() == size_t(kThreads));
  CHECK(tids.count(0) == 0);  // tid 0 is the session's thread
}

TEST_CASE("profiler: backward nodes wrap the kernels of their backward") {
  Tensor x = randn({8, 5}).requires_grad_();
  Tensor w = randn({5, 3}).requires_grad_();
  Tensor loss = sum(relu(matmul(x, w)));
  profiler::Session prof;
  loss.backward();
  prof.stop();
  check_well_formed(prof);
  int backward_nodes = 0, matmuls_in_backward = 0;
  for (const Event& e : prof.events()) {
    if (e.kind == EventKind::Backward) {
      ++backward_nodes;
      const std::string n = e.name;
      CHECK((n == "AccumulateGrad" || n.ends_with("Backward")));
    }
    if (e.kind == EventKind::Kernel && std::string(e.name) == "matmul") {
      REQUIRE(e.parent >= 0);
      CHECK(prof.events()[size_t(e.parent)].kind == EventKind::Backward);
      ++matmuls_in_backward;
    }
  }
  CHECK(backward_nodes >= 5);       // sum, relu, matmul and two AccumulateGrad
  CHECK(matmuls_in_backward == 2);  // grad of x and grad of w
}

TEST_CASE("profiler: kernels carry shapes, dtypes, FLOPs and bytes") {
  Tensor a = randn({2, 3, 4}), b = randn({2, 4, 5});
  Tensor x = randn({2, 3, 8, 8}), w = randn({6, 3, 3, 3});
  profiler::Session prof({.record_shapes = true});
  Tensor c = matmul(a, b);
  Tensor y = nn::functional::conv2d(x, w, Tensor(), {1, 1}, {1, 1});
  prof.stop();
  auto mm = find_all(prof, "matmul", EventKind::Kernel);
  REQUIRE(mm.size() == 1);
  const Event& e = prof.events()[mm[0]];
  CHECK(e.shapes_str() == "f32[2, 3, 5], f32[2, 3, 4], f32[2, 4, 5]");
  CHECK(e.flops == 2 * 2 * 3 * 5 * 4);
  CHECK(e.bytes == 4 * (30 + 24 + 40));
  CHECK(e.device == Device::cpu());
  auto conv = find_all(prof, "conv2d", EventKind::Kernel);
  REQUIRE(conv.size() == 1);
  CHECK(prof.events()[conv[0]].flops == 2 * (2 * 6 * 8 * 8) * (3 * 3 * 3));
  for (size_t i : find_all(prof, "copy", EventKind::Kernel)) CHECK(prof.events()[i].flops == -1);
}

TEST_CASE("profiler: without record_shapes no shapes are kept, FLOPs still are") {
  Tensor a = randn({4, 4});
  profiler::Session prof;
  Tensor c = matmul(a, a);
  prof.stop();
  auto mm = find_all(prof, "matmul", EventKind::Kernel);
  REQUIRE(mm.size() == 1);
  CHECK(prof.events()[mm[0]].n_shapes == 0);
  CHECK(prof.events()[mm[0]].flops == 2 * 4 * 4 * 4);
}

TEST_CASE("profiler: modules are ranges named by type, unless record_modules is off") {
  CnnStep step(2);
  {
    profiler::Session prof;
    step.run();
    prof.stop();
    check_well_formed(prof);
    CHECK(find_all(prof, "Sequential", EventKind::Module).size() == 3);  // the model, features, classifier
    auto convs = find_all(prof, "Conv2d", EventKind::Module);
    REQUIRE(convs.size() == 2);
    for (size_t c : convs) {
      int conv_kernels = 0;
      for (const Event& e : prof.events())
        if (e.parent == int32_t(c) && e.kind == EventKind::Kernel && std::string(e.name) == "conv2d") ++conv_kernels;
      CHECK(conv_kernels == 1);
    }
  }
  profiler::Session quiet({.record_modules = false});
  step.run();
  quiet.stop();
  for (const Event& e : quiet.events()) CHECK(e.kind != EventKind::Module);
}

TEST_CASE("profiler: the loader's waits are data_wait phases") {
  data::TensorDataset ds(randn({10, 3}), arange(0, 10));
  data::DataLoader loader(ds, {.batch_size = 4});
  profiler::Session prof;
  int64_t batches = 0;
  for (auto& batch : loader) {
    (void)batch;
    ++batches;
  }
  prof.stop();
  CHECK(batches == 3);
  CHECK(find_all(prof, "data_wait", EventKind::Phase).size() == 3);
}

TEST_CASE("profiler: nothing is recorded outside a session") {
  Tensor a = randn({8, 8});
  CHECK_FALSE(profiler::detail::recording());
  {
    profiler::Session first;
    first.stop();
    CHECK(first.events().empty());
  }
  Tensor unseen = matmul(a, a) + a;  // between sessions
  CHECK_FALSE(profiler::detail::recording());
  profiler::Session second;
  Tensor seen = a * a;
  second.stop();
  REQUIRE(second.events().size() == 1);
  CHECK(std::string(second.events()[0].name) == "binary");
  Tensor after = matmul(a, a);  // after stop
  CHECK(second.events().size() == 1);
}

TEST_CASE("profiler: misuse throws a clear error") {
  profiler::Session prof;
  CHECK_THROWS_WITH_AS(profiler::Session(), doctest::Contains("already recording"), Error);
  CHECK_THROWS_WITH_AS(prof.events(), doctest::Contains("call stop()"), Error);
  CHECK_THROWS_WITH_AS(prof.table(), doctest::Contains("table() needs the session stopped"), Error);
  prof.stop();
  prof.stop();  // idempotent
  CHECK_THROWS_WITH_AS(prof.step(), doctest::Contains("step() after stop()"), Error);
  CHECK_THROWS_WITH_AS(prof.export_chrome_trace("/nonexistent-dir/trace.json"),
                       doctest::Contains("cannot open '/nonexistent-dir/trace.json'"), Error);
  CHECK_THROWS_WITH_AS(prof.self_ns(99), doctest::Contains("self_ns(99)"), Error);
  profiler::Session next;  // a new session may start once the first stopped
  next.stop();
}

TEST_CASE("profiler: causal attention counts only the scores a query may see") {
  // q (2, 8, 4), k (2, 5, 4), v (2, 5, 3): causal rows 0..4 see i + 1 keys, rows 5..7 all 5: 30 pairs of 40.
  Tensor q = randn({2, 8, 4}).requires_grad_(), k = randn({2, 5, 4}), v = randn({2, 5, 3});
  for (bool causal : {false, true}) {
    CAPTURE(causal);
    profiler::Session prof;
    sum(nn::functional::scaled_dot_product_attention(q, k, v, Tensor(), causal)).backward();
    prof.stop();
    const int64_t pairs = 2 * (causal ? 30 : 40);
    auto fwd = find_all(prof, "scaled_dot_product_attention", EventKind::Kernel);
    auto bwd = find_all(prof, "scaled_dot_product_attention_backward", EventKind::Kernel);
    REQUIRE(fwd.size() == 1);
    REQUIRE(bwd.size() == 1);
    CHECK(prof.events()[fwd[0]].flops == 2 * pairs * (4 + 3));
    CHECK(prof.events()[bwd[0]].flops == 2 * pairs * (3 * 4 + 2 * 3));
  }
}

TEST_CASE("profiler: a product's ceiling dtype is its operands', not its output's") {
  Tensor a = randn({1, 4, 8}).to(kBF16), b = randn({1, 8, 3}).to(kBF16), out = empty({1, 4, 3});
  profiler::Session prof;
  kernels::bmm(Device::cpu(), out, a, b);  // bf16 operands, f32 sums: the bf16 rate applies
  prof.stop();
  auto mm = find_all(prof, "matmul", EventKind::Kernel);
  REQUIRE(mm.size() == 1);
  CHECK(prof.events()[mm[0]].dtype == kBF16);
}

TEST_CASE("profiler: an optimizer step counts the bytes of every tensor, those it updates read and written") {
  manual_seed(0);
  nn::Linear layer(3, 2);  // weight (2, 3), bias (2): param, grad and two moments each, and a step counter
  sum(layer(randn({4, 3}))).backward();
  // param, exp_avg and exp_avg_sq read and written, grad read: 7 passes of 4-byte floats; the
  // multi-tensor step's i64 counter read
  for (bool many : {true, false}) {
    CAPTURE(many);
    toggles::Scoped multi(toggles::Toggle::multi_tensor_step, many);
    optim::Adam opt(layer.parameters(), {.lr = 0.1});
    profiler::Session prof;
    opt.step();
    prof.stop();
    auto steps = find_all(prof, many ? "adam_step_many" : "adam_step", EventKind::Kernel);
    int64_t bytes = 0;
    for (size_t i : steps) bytes += prof.events()[i].bytes;
    CHECK(bytes == 7 * 4 * (6 + 2) + (many ? 2 * 8 : 0));
  }
}

TEST_CASE("profiler: GradScaler's unscale counts the gradients read and written") {
  manual_seed(0);
  nn::Linear layer(3, 2);
  optim::SGD opt(layer.parameters(), {.lr = 0.1});
  amp::GradScaler scaler;
  scaler.scale(sum(layer(randn({4, 3})))).backward();
  profiler::Session prof;
  scaler.unscale_(opt);
  prof.stop();
  int64_t bytes = 0;
  for (const char* name : {"amp_unscale_check_many", "amp_unscale_check"})
    for (size_t i : find_all(prof, name, EventKind::Kernel)) bytes += prof.events()[i].bytes;
  CHECK(bytes == 2 * 4 * (6 + 2) + 4 + 4);  // the gradients twice, found_inf and the scale once
}

TEST_CASE("profiler: a row's mean is over every call, nested ones too; grouping by shape needs shapes") {
  profiler::Session prof;
  {
    profiler::Scope outer("work");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    profiler::Scope inner("work");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  prof.stop();
  auto work = find_all(prof, "work", EventKind::Scope);
  REQUIRE(work.size() == 2);
  const double mean_us = double(prof.events()[work[0]].dur_ns() + prof.events()[work[1]].dur_ns()) / 2e3;
  const std::vector<std::string> row = table_row(prof.table(), "work");
  REQUIRE(row.size() >= 9);
  CHECK(std::stod(row[8]) == doctest::Approx(mean_us).epsilon(0.001));  // Name Kind Device Calls Total% .. Mean
  CHECK_THROWS_WITH_AS(prof.table({.group_by_shape = true}), doctest::Contains("record_shapes"), Error);
}
