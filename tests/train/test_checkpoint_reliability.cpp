// mdl-train's checkpoints as a crash and bad files leave them: a torn pair (a new model beside
// an old state file), a missing state file and malformed epochs are refused by --resume with an
// mdl::Error naming the files; a diverged run stops without overwriting the last good
// checkpoint; and a resumed run appends to its CSV log, which keeps one header.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "amp/grad_scaler.h"
#include "io/safetensors.h"
#include "mdl.h"
#include "tests/support/test_util.h"
#include "train/checkpoint.h"
#include "train/csv_log.h"
#include "tools/mdl_train/run_training.h"
#include "tests/support/data_test_util.h"

using namespace mdl;
using mdl::test::values;
namespace fs = std::filesystem;

namespace {

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string state_of(const std::string& checkpoint) { return checkpoint + ".train.safetensors"; }

std::vector<std::vector<double>> weights_of(nn::Module& model) {
  std::vector<std::vector<double>> w;
  for (const auto& [n, t] : model.state_dict()) w.push_back(values(t));
  return w;
}

// A small model with an optimizer that has stepped, as mdl-train's state after an epoch.
struct Run {
  std::shared_ptr<nn::Linear> model = std::make_shared<nn::Linear>(4, 3);
  optim::AdamW opt{model->parameters(), {.lr = 0.01}};
  amp::GradScaler scaler{{.enabled = false}};
  void step() {
    opt.zero_grad();
    sum(model->forward(randn({2, 4}))).backward();
    opt.step();
  }
  std::vector<std::vector<double>> weights() const { return weights_of(*model); }
  void save(const std::string& path, int64_t epoch) {
    train::save_checkpoint(path, *model, opt, scaler, epoch, {{"model", "linear"}});
  }
  int64_t resume(const std::string& path) { return train::resume_checkpoint(path, *model, opt, scaler); }
};

// The message of the mdl::Error that f throws; fails the test when it throws nothing or another type.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    FAIL((std::string("not an mdl::Error: ") + e.what()));
  }
  FAIL("no error");
  return "";
}

// Rewrites the state file's "epoch" entry, keeping its tensors and every other entry.
void set_state_epoch(const std::string& checkpoint, const std::string& epoch) {
  io::SafetensorsContents c = io::read_safetensors(state_of(checkpoint));
  for (auto& [k, v] : c.metadata)
    if (k == "epoch") v = epoch;
  io::save_safetensors(state_of(checkpoint), c.tensors, c.metadata);
}

}  // namespace

TEST_CASE("checkpoint: a saved pair resumes; a torn pair is refused, naming both files, and changes nothing") {
  data_test::TempDir dir("ckpt");
  const std::string ck = dir.file("model.safetensors");
  Run a;
  a.step();
  a.save(ck, 1);
  Run b;
  CHECK(b.resume(ck) == 1);
  CHECK(b.weights() == a.weights());
  CHECK(b.opt.step_count() == 1);

  // A crash after the model's rename and before the state file's: the new weights of epoch 2
  // beside the state of epoch 1.
  const std::string old_state = bytes_of(state_of(ck));
  a.step();
  a.save(ck, 2);
  std::ofstream(state_of(ck), std::ios::binary | std::ios::trunc) << old_state;
  Run c;
  const auto fresh = c.weights();
  const std::string message = error_of([&] { c.resume(ck); });
  CHECK(message.find(ck) != std::string::npos);
  CHECK(message.find(state_of(ck)) != std::string::npos);
  CHECK(message.find("do not belong together") != std::string::npos);
  CHECK(c.weights() == fresh);
  CHECK(c.opt.step_count() == 0);

  // The other way round: the old weights beside the new state file.
  a.save(ck, 2);
  Run old;
  old.save(dir.file("old.safetensors"), 2);
  fs::copy_file(dir.file("old.safetensors"), ck, fs::copy_options::overwrite_existing);
  CHECK(error_of([&] { c.resume(ck); }).find("do not belong together") != std::string::npos);
}

// A checkpoint of another optimizer is refused by name; and where the model's part loads but the
// optimizer's is refused, the model keeps its own weights.
TEST_CASE("checkpoint: another optimizer's state is refused, and a refused part leaves the model as it was") {
  data_test::TempDir dir("ckpt-opt");
  const std::string ck = dir.file("model.safetensors");
  Run a;
  a.step();
  a.save(ck, 1);
  auto model = std::make_shared<nn::Linear>(4, 3);
  optim::SGD sgd(model->parameters(), {.lr = 0.05, .momentum = 0.9});
  amp::GradScaler off({.enabled = false});
  const auto weights = [&] { return weights_of(*model); };
  const auto fresh = weights();
  const std::string message = error_of([&] { train::resume_checkpoint(ck, *model, sgd, off); });
  CHECK(message.find("holds the state of a AdamW optimizer; this run's optimizer is SGD") != std::string::npos);
  CHECK(weights() == fresh);

  // The same optimizer kind over one parameter where the file holds two: the model's part loads,
  // the optimizer's is refused, and the weights go back.
  optim::AdamW last_only({model->bias}, {.lr = 0.01});
  const std::string refused = error_of([&] { train::resume_checkpoint(ck, *model, last_only, off); });
  CAPTURE(refused);
  CHECK(refused.find("is not an entry of this optimizer's state (1 groups, 1 parameters)") != std::string::npos);
  CHECK(weights() == fresh);
}

// The schedule's position and the default generator (dropout's draws) come back with the rest, so
// a resumed run continues as the straight one would; a schedule the file does not record is refused.
TEST_CASE("checkpoint: the LR schedule's position and the generator's state resume") {
  data_test::TempDir dir("ckpt-schedule");
  const std::string ck = dir.file("model.safetensors");
  Run a;
  optim::CosineAnnealingLR cosine(a.opt, 20);
  for (int i = 0; i < 7; ++i) cosine.step();
  a.step();
  manual_seed(5);
  (void)randn({3});  // the generator past its seed
  const uint64_t offset = default_generator().offset();
  train::save_checkpoint(ck, *a.model, a.opt, a.scaler, 1, {}, &cosine);
  const std::vector<float> next = randn({4}).to_vector<float>();  // what the straight run draws next

  manual_seed(99);  // a new process seeds afresh and builds its model
  Run b;
  optim::CosineAnnealingLR resumed(b.opt, 20);
  CHECK(train::resume_checkpoint(ck, *b.model, b.opt, b.scaler, &resumed) == 1);
  CHECK(resumed.last_epoch() == 7);
  CHECK(b.opt.lr() == a.opt.lr());
  CHECK(default_generator().seed() == 5);
  CHECK(default_generator().offset() == offset);
  CHECK(randn({4}).to_vector<float>() == next);

  a.save(ck, 1);  // no schedule given (or a file from before): none recorded
  Run c;
  optim::CosineAnnealingLR unrecorded(c.opt, 20);
  CHECK(error_of([&] {
          train::resume_checkpoint(ck, *c.model, c.opt, c.scaler, &unrecorded);
        }).find("records no \"schedule_epoch\"") != std::string::npos);
  CHECK(train::resume_checkpoint(ck, *c.model, c.opt, c.scaler, &unrecorded, /*steps_per_epoch=*/6) == 1);
  CHECK(unrecorded.last_epoch() == 6);  // one step per batch of the epoch done
}

TEST_CASE("checkpoint: --resume without the state file is an error naming it") {
  data_test::TempDir dir("ckpt");
  const std::string ck = dir.file("model.safetensors");
  Run a;
  a.step();
  a.save(ck, 3);
  fs::remove(state_of(ck));
  Run b;
  const auto fresh = b.weights();
  const std::string message = error_of([&] { b.resume(ck); });
  CHECK(message.find(state_of(ck)) != std::string::npos);
  CHECK(b.weights() == fresh);
  fs::remove(ck);
  CHECK(error_of([&] { b.resume(ck); }).find(ck) != std::string::npos);
}

TEST_CASE("checkpoint: a malformed or out-of-range epoch is an mdl::Error naming the file and the value") {
  data_test::TempDir dir("ckpt");
  const std::string ck = dir.file("model.safetensors");
  Run a;
  a.step();
  for (const std::string bad : {"abc", "", "-1", "0", "2x", " 2", "+2", "99999999999999999999", "3000000000"}) {
    CAPTURE(bad);
    a.save(ck, 2);
    set_state_epoch(ck, bad);
    Run b;
    const std::string message = error_of([&] { b.resume(ck); });
    CHECK(message.find(state_of(ck)) != std::string::npos);
    CHECK(message.find("'" + bad + "'") != std::string::npos);
  }
  a.save(ck, 2);
  set_state_epoch(ck, "3");  // a well-formed epoch that the model file does not share
  Run b;
  CHECK(error_of([&] { b.resume(ck); }).find("epoch") != std::string::npos);
}

TEST_CASE("run_training: a diverged run stops naming the epoch and step, and keeps the last good checkpoint") {
  data_test::TempDir dir("ckpt");
  const std::string ck = dir.file("model.safetensors");
  train::TrainOptions o;
  o.model = "mlp", o.epochs = 1, o.batch = 64, o.subset = 256, o.save = ck, o.progress = false;
  train::run_training(o, nullptr);
  const std::string model_bytes = bytes_of(ck), state_bytes = bytes_of(state_of(ck));
  REQUIRE(!model_bytes.empty());

  o.lr = 1e30;  // the first steps throw the weights past f32's range
  o.epochs = 2;
  const std::string message = error_of([&] { train::run_training(o, nullptr); });
  CHECK(message.find("diverged") != std::string::npos);
  CHECK(message.find("epoch 1") != std::string::npos);
  CHECK(message.find("step ") != std::string::npos);
  CHECK(message.find(ck) != std::string::npos);
  CHECK(bytes_of(ck) == model_bytes);
  CHECK(bytes_of(state_of(ck)) == state_bytes);
}

TEST_CASE("run_training: a resumed run appends to its CSV log") {
  data_test::TempDir dir("ckpt");
  const std::string ck = dir.file("model.safetensors"), log = dir.file("run.csv");
  train::TrainOptions o;
  o.model = "mlp", o.epochs = 1, o.batch = 64, o.subset = 256, o.save = ck, o.log = log, o.progress = false;
  o.val_subset = 500;
  train::run_training(o, nullptr);
  o.resume = ck, o.epochs = 2;
  train::run_training(o, nullptr);
  const train::CsvTable t = train::read_csv(log);
  REQUIRE(t.rows.size() == 2);
  CHECK(t.rows[0][size_t(t.column("epoch"))] == "1");
  CHECK(t.rows[1][size_t(t.column("epoch"))] == "2");

  // A log with other columns is not appended to.
  std::ofstream(log, std::ios::trunc) << "step,loss\n1,0.5\n";
  o.epochs = 3;
  CHECK(error_of([&] { train::run_training(o, nullptr); }).find(log) != std::string::npos);
  CHECK(bytes_of(log) == "step,loss\n1,0.5\n");
}

TEST_CASE("CsvLog: appending keeps the rows and writes no second header") {
  data_test::TempDir dir("ckpt");
  const std::string path = dir.file("a.csv");
  train::CsvLog(path, {"epoch", "loss"}).row({int64_t(1), 0.5});
  train::CsvLog(path, {"epoch", "loss"}, /*append=*/true).row({int64_t(2), 0.25});
  const train::CsvTable t = train::read_csv(path);
  CHECK(t.header == std::vector<std::string>{"epoch", "loss"});
  REQUIRE(t.rows.size() == 2);
  CHECK(t.rows[1][0] == "2");
  train::CsvLog(dir.file("new.csv"), {"epoch"}, /*append=*/true).row({int64_t(1)});  // a new file gets its header
  CHECK(train::read_csv(dir.file("new.csv")).header == std::vector<std::string>{"epoch"});
}
