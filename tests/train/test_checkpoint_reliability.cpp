// mdl-train's checkpoints as a crash and bad files leave them: a crash at each step of a save
// leaves a pair that --resume takes (the new weights beside the old state file are completed by
// the staged state file), and files killed writers left are removed; a torn pair no staged file
// completes, a missing state file and malformed epochs are refused by --resume with an mdl::Error
// naming the files; a diverged run stops without overwriting the last good checkpoint; a resumed
// run appends to its CSV log, which keeps one header and no row twice; and a resumed run with
// --plateau or --early-stop trains, lowers its lr and stops as the straight run does.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
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

// A process id no process has: above the largest the kernel hands out (2^22).
const std::string kGonePid = "4194305";

// Copies the folder's files into a new folder `to`: what a crash at that instant leaves.
void snapshot(const fs::path& from, const fs::path& to) {
  fs::create_directories(to);
  for (const auto& e : fs::directory_iterator(from))
    if (e.is_regular_file()) fs::copy_file(e.path(), to / e.path().filename());
}

std::vector<std::string> files_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

// The save of epoch 2 over a pair of epoch 1, stopped after each of its steps as a kill there would
// stop it (a copy of the folder at that point), with a half-written temporary file beside: each
// copy resumes, from epoch 1 before the weights' rename and from epoch 2 after it, weights and
// optimizer state of that epoch.
TEST_CASE("checkpoint: a crash at any step of a save leaves a pair that resumes, the previous or the new one") {
  data_test::TempDir dir("ckpt-crash");
  const std::string ck = dir.file("model.safetensors");
  Run a;
  a.step();
  a.save(ck, 1);
  const auto weights_1 = a.weights();
  a.step();
  const auto weights_2 = a.weights();
  std::vector<std::string> steps;
  train::detail::checkpoint_step_hook = [&](std::string_view step) {
    steps.emplace_back(step);
    snapshot(dir.path, dir.path / ("crash" + std::to_string(steps.size())));
  };
  a.save(ck, 2);
  train::detail::checkpoint_step_hook = nullptr;
  REQUIRE(steps == std::vector<std::string>{"weights staged", "state staged", "weights renamed", "state renamed"});

  for (size_t i = 0; i < steps.size(); ++i) {
    CAPTURE(steps[i]);
    const fs::path crashed = dir.path / ("crash" + std::to_string(i + 1));
    const std::string copy = (crashed / "model.safetensors").string();
    std::ofstream(copy + ".new." + kGonePid + ".tmp." + kGonePid, std::ios::binary) << "half a file";
    Run b;
    const int64_t epoch = b.resume(copy);
    CHECK(epoch == (i < 2 ? 1 : 2));
    CHECK(b.weights() == (i < 2 ? weights_1 : weights_2));
    CHECK(b.opt.step_count() == epoch);
    Run again;  // the resume completed the interrupted save on disk: the pair now matches alone
    CHECK(again.resume(copy) == epoch);
  }
}

// Files a save killed midway left (staged or temporary, of the weights or the state file) are
// removed by the next save once their writer is gone; a running writer's are kept.
TEST_CASE("checkpoint: a save removes the staged and temporary files of writers that are gone") {
  data_test::TempDir dir("ckpt-debris");
  const std::string ck = dir.file("model.safetensors");
  const std::string running = std::to_string(::getppid());
  const std::vector<std::string> gone = {"model.safetensors.new." + kGonePid,
                                         "model.safetensors.new." + kGonePid + ".tmp." + kGonePid,
                                         "model.safetensors.tmp." + kGonePid,
                                         "model.safetensors.train.safetensors.new." + kGonePid,
                                         "model.safetensors.train.safetensors.new." + kGonePid + ".tmp." + kGonePid,
                                         "model.safetensors.train.safetensors.tmp." + kGonePid};
  const std::vector<std::string> kept = {
      "model.safetensors.new." + running, "model.safetensors.train.safetensors.tmp." + running,
      "model.safetensors.new.12x", "model.safetensors.notes", "other.safetensors.new." + kGonePid};
  for (const auto& names : {gone, kept})
    for (const std::string& name : names) std::ofstream(dir.file(name)) << "debris";
  Run a;
  a.step();
  a.save(ck, 1);
  std::vector<std::string> expected = kept;
  expected.push_back("model.safetensors");
  expected.push_back("model.safetensors.train.safetensors");
  std::sort(expected.begin(), expected.end());
  CHECK(files_in(dir.path) == expected);
}

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

  // The new weights of epoch 2 beside the state of epoch 1, and no staged state file for them.
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

// A kill after an epoch's CSV row and before its checkpoint leaves a row past the checkpoint's
// epoch (and a kill inside a row, a row cut short): the resumed run drops them and logs each
// epoch once.
TEST_CASE("run_training: a resumed run logs each epoch once, dropping rows past its checkpoint") {
  data_test::TempDir dir("ckpt-csv");
  const std::string ck = dir.file("model.safetensors"), log = dir.file("run.csv");
  train::TrainOptions o;
  o.model = "mlp", o.epochs = 2, o.batch = 64, o.subset = 256, o.val_subset = 256, o.save = ck, o.log = log;
  o.progress = false;
  train::run_training(o, nullptr);
  const std::string pair_after_2[] = {bytes_of(ck), bytes_of(state_of(ck))};
  o.resume = ck, o.epochs = 3;
  train::run_training(o, nullptr);
  std::ofstream(ck, std::ios::binary | std::ios::trunc) << pair_after_2[0];  // the checkpoint of epoch 3 never came
  std::ofstream(state_of(ck), std::ios::binary | std::ios::trunc) << pair_after_2[1];
  std::ofstream(log, std::ios::app) << "4,0.5,0.";  // and a row cut short
  o.epochs = 4;
  train::run_training(o, nullptr);
  const train::CsvTable t = train::read_csv(log);
  std::vector<std::string> epochs;
  for (const auto& row : t.rows) epochs.push_back(row[size_t(t.column("epoch"))]);
  CHECK(epochs == std::vector<std::string>{"1", "2", "3", "4"});
}

// ReduceLROnPlateau's and EarlyStopping's counts travel in the checkpoint: a run saved after
// epoch k and resumed trains each later epoch with the straight run's lr, to the same losses,
// and stops at the same epoch. The splits include the epoch at whose end the lr is lowered.
TEST_CASE("run_training: --plateau and --early-stop resume as the straight run, bit for bit") {
  data_test::TempDir dir("ckpt-plateau");
  train::TrainOptions o;
  o.model = "mlp", o.optimizer = "adamw", o.lr = 0.01, o.subset = 512, o.val_subset = 256, o.seed = 5;
  o.batch = 64, o.threads = 1, o.progress = false, o.epochs = 8;
  auto same_epochs = [](const train::EpochRecord& x, const train::EpochRecord& y) {
    CAPTURE(x.epoch);
    CHECK(x.epoch == y.epoch);
    CHECK(x.lr == y.lr);
    CHECK(x.train_loss == y.train_loss);
    CHECK(x.train_accuracy == y.train_accuracy);
    CHECK(x.val_loss == y.val_loss);
    CHECK(x.val_accuracy == y.val_accuracy);
    CHECK(x.val_macro_f1 == y.val_macro_f1);
  };
  for (const bool plateau : {true, false}) {
    CAPTURE(plateau);
    o.plateau = plateau ? 1 : 0, o.early_stop = plateau ? 0 : 2;
    o.save.clear(), o.resume.clear(), o.epochs = 8;
    const train::TrainReport straight = train::run_training(o, nullptr);
    if (plateau) {  // the case covers a lowered lr, and the run goes on past it
      REQUIRE(straight.epochs.size() == 8);
      REQUIRE(straight.epochs.back().lr < straight.epochs.front().lr);
    } else {  // the case covers a stop, some epochs after the best
      REQUIRE(straight.epochs.size() < 8);
      REQUIRE(!straight.stop_reason.empty());
    }
    for (int64_t split = 4; split < int64_t(straight.epochs.size()); ++split) {
      CAPTURE(split);
      const std::string ck = dir.file("split" + std::to_string(split) + (plateau ? "p" : "e") + ".safetensors");
      o.save = ck, o.resume.clear(), o.epochs = split;
      train::run_training(o, nullptr);
      o.resume = ck, o.epochs = 8;
      const train::TrainReport resumed = train::run_training(o, nullptr);
      REQUIRE(resumed.epochs.size() == straight.epochs.size() - size_t(split));
      for (size_t i = 0; i < resumed.epochs.size(); ++i)
        same_epochs(resumed.epochs[i], straight.epochs[size_t(split) + i]);
      CHECK(resumed.stop_reason == straight.stop_reason);
    }
  }
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
