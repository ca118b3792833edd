// train::Trainer and its callbacks: a small MLP learns a separable problem; early stopping,
// checkpoint-best, ReduceLROnPlateau and the time-to-target stop against scripted metric
// sequences (the callbacks called directly with made-up records) and inside real runs; a user
// callback's call counts; bad arguments named.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/tensor_dataset.h"
#include "io/safetensors.h"
#include "mdl.h"
#include "nn/container.h"
#include "nn/layers.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "train/epoch_log.h"
#include "train/builtin_callbacks.h"
#include "train/csv_log.h"
#include "train/trainer.h"

using namespace mdl;
using train::EpochRecord;
using train::TrainContext;

namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("mdl_trainer_" + std::to_string(::getpid()) + "_" + name)).string();
}

// Two Gaussian blobs in the plane, centred at (-1.5, -1.5) and (1.5, 1.5), spread 0.5.
std::shared_ptr<data::TensorDataset> blobs(int64_t n, uint64_t seed) {
  Generator g(seed);
  Tensor labels = randint(0, 2, {n}, kI64, &g);
  Tensor centre = (labels.to(kF32) * 3.0 - 1.5).reshape({n, 1});
  Tensor x = randn({n, 2}, {}, &g) * 0.5 + centre;
  return std::make_shared<data::TensorDataset>(x, labels);
}

nn::ModulePtr mlp() {
  return std::make_shared<nn::Sequential>(std::initializer_list<nn::ModulePtr>{
      std::make_shared<nn::Linear>(2, 16), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(16, 2)});
}

struct Setup {
  std::shared_ptr<data::TensorDataset> train_set = blobs(256, 1), val_set = blobs(128, 2);
  nn::ModulePtr model;
  train::TrainerConfig config;
  explicit Setup(double lr = 0.05) {
    manual_seed(7);
    model = mlp();
    config.model = model;
    config.optimizer = std::make_shared<optim::AdamW>(model->parameters(), optim::AdamWOptions{.lr = lr});
    config.train = std::make_shared<data::DataLoader>(*train_set,
                                                      data::LoaderOptions{.batch_size = 32, .shuffle = true});
    config.validation = std::make_shared<data::DataLoader>(*val_set, data::LoaderOptions{.batch_size = 64});
  }
};

using Weights = std::vector<std::vector<double>>;

Weights parameter_values(nn::Module& m) {
  Weights v;
  for (const Tensor& p : m.parameters()) v.push_back(p.to(kF64).contiguous().to_vector<double>());
  return v;
}

EpochRecord record(int64_t epoch, double val_loss, double val_accuracy = NAN) {
  EpochRecord r;
  r.epoch = epoch, r.val_loss = val_loss, r.val_accuracy = val_accuracy;
  return r;
}

TrainContext context(nn::Module& model, optim::Optimizer* opt = nullptr) {
  TrainContext c;
  c.model = &model, c.optimizer = opt, c.has_validation = true, c.epochs = 10;
  return c;
}

struct Counting : train::Callback {
  int train_begin = 0, epoch_begin = 0, steps = 0, epoch_end = 0, train_end = 0;
  std::vector<int64_t> steps_seen;
  void on_train_begin(TrainContext&) override { ++train_begin; }
  void on_epoch_begin(TrainContext&) override { ++epoch_begin; }
  void on_step_end(TrainContext& c) override { ++steps, steps_seen.push_back(c.step); }
  void on_epoch_end(TrainContext&, const EpochRecord&) override { ++epoch_end; }
  void on_train_end(TrainContext&) override { ++train_end; }
};

}  // namespace

TEST_CASE("Trainer: a user's MLP learns two blobs; loss falls, accuracy reached, evaluate agrees") {
  Setup s;
  train::Trainer trainer(s.config);
  const auto history = trainer.fit(4);
  REQUIRE(history.size() == 4);
  for (size_t i = 0; i < history.size(); ++i) {
    CHECK(history[i].epoch == int64_t(i) + 1);
    CHECK(history[i].seconds > 0);
    CHECK(history[i].lr == doctest::Approx(0.05));
  }
  CHECK(history.back().train_loss < 0.5 * history.front().train_loss);
  CHECK(history.back().train_accuracy > 0.97);
  CHECK(history.back().val_accuracy > 0.97);
  const train::Validation v = trainer.evaluate(*s.config.validation);
  CHECK(v.accuracy == doctest::Approx(history.back().val_accuracy));
  CHECK(v.loss == doctest::Approx(history.back().val_loss));
  // A second fit numbers its epochs on.
  const auto more = trainer.fit(1);
  REQUIRE(more.size() == 1);
  CHECK(more[0].epoch == 5);
  CHECK(trainer.history().size() == 5);
}

TEST_CASE("Trainer: a user callback is called at each fixed point the right number of times") {
  Setup s;
  auto counting = std::make_shared<Counting>();
  train::Trainer trainer(s.config);
  trainer.add(counting);
  trainer.fit(3);
  CHECK(counting->train_begin == 1);
  CHECK(counting->epoch_begin == 3);
  CHECK(counting->steps == 3 * 8);  // 256 samples in batches of 32
  CHECK(counting->epoch_end == 3);
  CHECK(counting->train_end == 1);
  CHECK(counting->steps_seen[7] == 8);
  CHECK(counting->steps_seen[8] == 1);
}

TEST_CASE("Trainer: a user loss function is what is minimised") {
  Setup s;
  int calls = 0;
  s.config.loss = [&](const Tensor& logits, const Tensor& y) {
    ++calls;
    return train::cross_entropy_loss(logits, y) * 2.0;
  };
  train::Trainer trainer(s.config);
  const auto h = trainer.fit(1);
  CHECK(calls >= 8);  // each training step, plus the validation batches
  // The validation loss is the user's too: twice cross-entropy.
  const train::Validation v = trainer.evaluate(*s.config.validation);
  train::TrainerConfig plain = s.config;
  plain.loss = train::cross_entropy_loss;
  train::Trainer same_model(plain);
  CHECK(same_model.evaluate(*s.config.validation).loss == doctest::Approx(v.loss / 2));
}

TEST_CASE("ProgressPrinter and CsvLogger: a line per epoch printed, a CSV row per epoch written") {
  Setup s;
  const std::string csv = temp_path("log.csv");
  std::FILE* out = std::tmpfile();
  REQUIRE(out);
  train::Trainer trainer(s.config);
  trainer.add(std::make_shared<train::ProgressPrinter>(out)).add(std::make_shared<train::CsvLogger>(csv));
  const auto h = trainer.fit(2);
  std::rewind(out);
  std::string printed;
  for (int ch; (ch = std::fgetc(out)) != EOF;) printed += char(ch);
  std::fclose(out);
  CHECK(printed.find("epoch 1/2 [") != std::string::npos);  // the progress line
  CHECK(printed.find("epoch 2/2: train loss") != std::string::npos);
  const train::CsvTable t = train::read_csv(csv);
  REQUIRE(t.rows.size() == 2);
  CHECK(std::stod(t.rows[1][size_t(t.column("val_loss"))]) == doctest::Approx(h[1].val_loss));
  CHECK(std::stod(t.rows[0][size_t(t.column("train_accuracy"))]) == doctest::Approx(h[0].train_accuracy));
  std::filesystem::remove(csv);
}

TEST_CASE("EpochLog: an epoch without a validation split says so, a diverged one prints its NaN loss") {
  std::FILE* out = std::tmpfile();
  REQUIRE(out);
  train::EpochLog log("", out, 2);
  train::EpochRecord r;
  r.epoch = 1;
  log.write(r);  // no test split: every validation field NaN
  r.epoch = 2, r.val_loss = NAN, r.val_accuracy = 0.1, r.val_macro_f1 = 0.02;
  log.write(r);
  std::rewind(out);
  std::string printed;
  for (int ch; (ch = std::fgetc(out)) != EOF;) printed += char(ch);
  std::fclose(out);
  CHECK(printed.find("epoch 1/2: train loss 0.0000 acc 0.00% | no validation split |") != std::string::npos);
  CHECK(printed.find("epoch 2/2: train loss 0.0000 acc 0.00% | val loss nan acc 10.00% macro-F1 0.0200 |") !=
        std::string::npos);
}

TEST_CASE("EarlyStopping: stops after `patience` epochs without improvement and restores the best weights") {
  nn::ModulePtr model = mlp();
  train::EarlyStopping stop({.monitor = "val_loss", .patience = 2, .restore_best_weights = true});
  TrainContext c = context(*model);
  stop.on_train_begin(c);
  const std::vector<double> losses = {1.0, 0.8, 0.9, 0.85, 0.5};
  std::vector<Weights> weights_at;
  int64_t epoch = 0;
  for (double loss : losses) {
    ++epoch;
    for (const Tensor& p : model->parameters()) p.detach().fill_(double(epoch));  // "training"
    weights_at.push_back(parameter_values(*model));
    stop.on_epoch_end(c, record(epoch, loss));
    if (c.stop) break;
  }
  CHECK(c.stop);
  CHECK(epoch == 4);  // best at 2, no better at 3 and 4
  CHECK(stop.stopped_epoch() == 4);
  CHECK(stop.best_epoch() == 2);
  CHECK(c.stop_reason.find("val_loss did not improve for 2 epochs") != std::string::npos);
  stop.on_train_end(c);
  CHECK(stop.restored());
  CHECK(parameter_values(*model) == weights_at[1]);
}

// Their counts go into TrainContext::callback_state at each epoch's end; a fit continuing a run
// (first_epoch past 1) starts from them, as the run before the resume stood; a fit from epoch 1
// does not; a malformed entry is an error naming it.
TEST_CASE("EarlyStopping and ReduceLROnPlateau: a resumed fit goes on from the state they kept") {
  nn::ModulePtr model = mlp();
  optim::SGD opt(model->parameters(), {.lr = 0.1});
  TrainContext before = context(*model, &opt);
  train::EarlyStopping stop({.monitor = "val_loss", .patience = 3});
  train::ReduceLROnPlateau plateau("val_loss", {.factor = 0.5, .patience = 2});
  stop.on_train_begin(before), plateau.on_train_begin(before);
  int64_t epoch = 0;
  for (double loss : {1.0, 0.5, 0.7, 0.6}) {  // best 0.5 at epoch 2, then two epochs without better
    stop.on_epoch_end(before, record(++epoch, loss));
    plateau.on_epoch_end(before, record(epoch, loss));
  }
  CHECK(*before.kept_state("early_stopping.val_loss.best") == "0.5");
  CHECK(*before.kept_state("early_stopping.val_loss.best_epoch") == "2");
  CHECK(*before.kept_state("early_stopping.val_loss.wait") == "2");
  CHECK(*before.kept_state("plateau.val_loss.bad_epochs") == "2");

  TrainContext after = context(*model, &opt);
  after.first_epoch = 5, after.callback_state = before.callback_state;
  train::EarlyStopping resumed_stop({.monitor = "val_loss", .patience = 3});
  train::ReduceLROnPlateau resumed_plateau("val_loss", {.factor = 0.5, .patience = 2});
  resumed_stop.on_train_begin(after), resumed_plateau.on_train_begin(after);
  CHECK(resumed_stop.best_epoch() == 2);
  resumed_stop.on_epoch_end(after, record(5, 0.55));  // the third epoch without better: both act
  resumed_plateau.on_epoch_end(after, record(5, 0.55));
  CHECK(after.stop);
  CHECK(resumed_stop.stopped_epoch() == 5);
  CHECK(resumed_plateau.reductions() == 1);
  CHECK(opt.lr() == 0.05);

  TrainContext fresh = context(*model, &opt);  // a fit from epoch 1 does not take them
  fresh.callback_state = before.callback_state;
  train::EarlyStopping new_run({.monitor = "val_loss", .patience = 3});
  new_run.on_train_begin(fresh);
  CHECK(new_run.best_epoch() == 0);

  after.stop = false;
  after.keep_state("early_stopping.val_loss.wait", "two");
  train::EarlyStopping bad({.monitor = "val_loss", .patience = 3});
  try {
    bad.on_train_begin(after);
    FAIL("a malformed kept state was taken");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("\"early_stopping.val_loss.wait\" as 'two'") != std::string::npos);
  }
}

TEST_CASE("EarlyStopping: min_delta, max mode, and a real run with lr 0 stops on time") {
  nn::ModulePtr model = mlp();
  train::EarlyStopping stop({.monitor = "val_accuracy", .patience = 1, .min_delta = 0.05});
  TrainContext c = context(*model);
  stop.on_train_begin(c);
  stop.on_epoch_end(c, record(1, NAN, 0.50));
  stop.on_epoch_end(c, record(2, NAN, 0.60));  // +0.10: better
  CHECK(!c.stop);
  stop.on_epoch_end(c, record(3, NAN, 0.64));  // +0.04 < min_delta: not better
  CHECK(c.stop);
  CHECK(stop.stopped_epoch() == 3);

  Setup s(0.0);  // nothing changes: the first epoch is the best, then patience runs out
  auto early = std::make_shared<train::EarlyStopping>(train::EarlyStoppingOptions{.patience = 2});
  train::Trainer trainer(s.config);
  trainer.add(early);
  const auto h = trainer.fit(10);
  CHECK(h.size() == 3);
  CHECK(early->stopped_epoch() == 3);
  CHECK(trainer.stop_reason().find("EarlyStopping") != std::string::npos);
}

TEST_CASE("CheckpointBest: writes only on improvement, and the file loads back") {
  const std::string path = temp_path("best.safetensors");
  std::filesystem::remove(path);
  nn::ModulePtr model = mlp();
  train::CheckpointBest best(path, "val_accuracy");
  TrainContext c = context(*model);
  best.on_train_begin(c);
  const std::string abandoned = path + ".tmp.4194305";  // a killed writer's (no such process)
  std::ofstream(abandoned) << "half a file";
  const std::vector<double> accuracy = {0.5, 0.7, 0.6, 0.8, 0.8};
  std::vector<Weights> weights_at;
  for (size_t i = 0; i < accuracy.size(); ++i) {
    for (const Tensor& p : model->parameters()) p.detach().fill_(double(i + 1));
    weights_at.push_back(parameter_values(*model));
    best.on_epoch_end(c, record(int64_t(i) + 1, NAN, accuracy[i]));
    const io::SafetensorsContents saved = io::read_safetensors(path);
    std::string epoch;
    for (auto& [k, v] : saved.metadata)
      if (k == "epoch") epoch = v;
    CHECK(epoch == (i == 2 ? "2" : i == 4 ? "4" : std::to_string(i + 1)));
  }
  CHECK(best.saves() == 3);
  CHECK(best.best_epoch() == 4);
  CHECK_FALSE(std::filesystem::exists(abandoned));  // a save removes what killed writers left
  nn::ModulePtr loaded = mlp();
  loaded->load(path);
  CHECK(parameter_values(*loaded) == weights_at[3]);
  std::filesystem::remove(path);
}

// A resumed run (its first epoch past 1) goes on from the best its file holds for the same metric;
// a run from epoch 1 starts afresh and overwrites it.
TEST_CASE("CheckpointBest: a resumed run keeps a better file from before; a new run replaces it") {
  const std::string path = temp_path("best_resumed.safetensors");
  std::filesystem::remove(path);
  nn::ModulePtr model = mlp();
  {
    train::CheckpointBest first(path, "val_loss");
    TrainContext c = context(*model);
    first.on_train_begin(c);
    first.on_epoch_end(c, record(3, 0.25));
  }
  train::CheckpointBest resumed(path, "val_loss");
  TrainContext c = context(*model);
  c.first_epoch = 5;
  resumed.on_train_begin(c);
  CHECK(resumed.best_epoch() == 3);
  resumed.on_epoch_end(c, record(5, 0.5));  // worse than the file's 0.25
  CHECK(resumed.saves() == 0);
  resumed.on_epoch_end(c, record(6, 0.125));
  CHECK(resumed.saves() == 1);

  train::CheckpointBest other_metric(path, "val_accuracy");  // the file's value is val_loss's: not taken
  other_metric.on_train_begin(c);
  CHECK(other_metric.best_epoch() == 0);
  train::CheckpointBest fresh(path, "val_loss");
  TrainContext from_start = context(*model);
  fresh.on_train_begin(from_start);
  fresh.on_epoch_end(from_start, record(1, 0.9));
  CHECK(fresh.saves() == 1);
  std::filesystem::remove(path);
}

TEST_CASE("ReduceLROnPlateau: the lr falls once the metric has not improved for more than `patience` epochs") {
  nn::ModulePtr model = mlp();
  optim::SGD opt(model->parameters(), {.lr = 0.1});
  train::ReduceLROnPlateau plateau("val_loss", {.factor = 0.5, .patience = 1});
  TrainContext c = context(*model, &opt);
  plateau.on_train_begin(c);
  plateau.on_epoch_end(c, record(1, 1.0));
  plateau.on_epoch_end(c, record(2, 1.0));  // one bad epoch: within patience
  CHECK(opt.lr() == doctest::Approx(0.1));
  plateau.on_epoch_end(c, record(3, 1.0));  // two: reduced
  CHECK(opt.lr() == doctest::Approx(0.05));
  CHECK(plateau.reductions() == 1);
  plateau.on_epoch_end(c, record(4, 0.5));  // better: stays
  CHECK(opt.lr() == doctest::Approx(0.05));

  // In a real run whose optimizer moves nothing of the model's, val_loss stays where it is.
  Setup s;
  Tensor unused = zeros({1}).requires_grad_();
  s.config.optimizer = std::make_shared<optim::SGD>(std::vector<Tensor>{unused}, optim::SGDOptions{.lr = 0.01});
  auto in_run = std::make_shared<train::ReduceLROnPlateau>("val_loss", optim::ReduceLROnPlateauOptions{.patience = 1});
  train::Trainer trainer(s.config);
  trainer.add(in_run);
  const auto h = trainer.fit(4);
  CHECK(in_run->reductions() == 1);
  CHECK(trainer.optimizer().lr() == doctest::Approx(0.001));
  CHECK(h[2].lr == doctest::Approx(0.01));  // the record holds the lr the epoch trained with
  CHECK(h[3].lr == doctest::Approx(0.001));
}

TEST_CASE("TimeToTarget: stops at the epoch the target is reached and records its time") {
  nn::ModulePtr model = mlp();
  train::TimeToTarget target(0.75);
  TrainContext c = context(*model);
  target.on_train_begin(c);
  target.on_epoch_end(c, record(1, NAN, 0.6));
  CHECK(!target.reached());
  CHECK(std::isnan(target.seconds()));
  target.on_epoch_end(c, record(2, NAN, 0.75));
  CHECK(target.reached());
  CHECK(target.epoch() == 2);
  CHECK(c.stop);

  Setup s;
  auto to_target = std::make_shared<train::TimeToTarget>(0.9);
  train::Trainer trainer(s.config);
  trainer.add(to_target);
  const auto start = std::chrono::steady_clock::now();
  const auto h = trainer.fit(20);
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  REQUIRE(to_target->reached());
  CHECK(to_target->epoch() == int64_t(h.size()));
  CHECK(h.back().val_accuracy >= 0.9);
  for (size_t i = 0; i + 1 < h.size(); ++i) CHECK(h[i].val_accuracy < 0.9);
  CHECK(to_target->seconds() > 0);
  CHECK(to_target->seconds() <= total);
}

TEST_CASE("Trainer and callbacks: bad arguments are named") {
  Setup s;
  train::TrainerConfig no_opt = s.config;
  no_opt.optimizer = nullptr;
  CHECK_THROWS_WITH_AS(train::Trainer{no_opt}, doctest::Contains("no optimizer"), Error);
  train::TrainerConfig no_data = s.config;
  no_data.train = nullptr;
  CHECK_THROWS_WITH_AS(train::Trainer{no_data}, doctest::Contains("no training DataLoader"), Error);
  train::TrainerConfig bad_accum = s.config;
  bad_accum.grad_accum = 0;
  CHECK_THROWS_WITH_AS(train::Trainer{bad_accum}, doctest::Contains("grad_accum must be at least 1"), Error);
  train::Trainer trainer(s.config);
  CHECK_THROWS_WITH_AS(trainer.fit(-1), doctest::Contains("epochs must be >= 0, got -1"), Error);
  CHECK(trainer.fit(0).empty());
  CHECK_THROWS_WITH_AS(train::EarlyStopping({.monitor = "val_los"}), doctest::Contains("unknown metric 'val_los'"),
                       Error);
  CHECK_THROWS_WITH_AS(train::EarlyStopping({.patience = -1}), doctest::Contains("patience must be >= 0"), Error);
  CHECK_THROWS_WITH_AS(train::CheckpointBest("x.safetensors", "acc"), doctest::Contains("unknown metric 'acc'"), Error);
  CHECK_THROWS_WITH_AS(train::TimeToTarget(1.5), doctest::Contains("must be in (0, 1], got 1.5"), Error);
  CHECK_THROWS_WITH_AS(trainer.add(nullptr), doctest::Contains("a null callback"), Error);
  train::TrainerConfig no_val = s.config;
  no_val.validation = nullptr;
  train::Trainer without_validation(no_val);
  without_validation.add(std::make_shared<train::EarlyStopping>());
  CHECK_THROWS_WITH_AS(without_validation.fit(1),
                       doctest::Contains("monitors 'val_loss', but the run has no validation"), Error);
  train::TrainerConfig scheduled = s.config;
  scheduled.schedule = std::make_shared<optim::StepLR>(*scheduled.optimizer, 10);
  train::Trainer with_schedule(scheduled);
  CHECK_THROWS_WITH_AS(with_schedule.add(std::make_shared<train::ReduceLROnPlateau>()),
                       doctest::Contains("ReduceLROnPlateau with an LR schedule"), Error);
}

TEST_CASE("Trainer: a loss gone non-finite ends fit with TrainingDiverged before any callback sees the epoch") {
  Setup s(1e30);  // an lr that sends the weights to inf within the first steps
  auto counting = std::make_shared<Counting>();
  const std::string ckpt = temp_path("diverged.safetensors");
  train::Trainer trainer(s.config);
  trainer.add(counting).add(std::make_shared<train::SaveCheckpoint>(ckpt));
  CHECK_THROWS_WITH_AS(trainer.fit(3), doctest::Contains("training diverged in epoch 1"), train::TrainingDiverged);
  CHECK(counting->train_begin == 1);
  CHECK(counting->epoch_end == 0);
  CHECK(counting->train_end == 1);  // the run's end is still called
  CHECK(counting->steps < 8);       // a lone process stops at the first non-finite loss, not at the epoch's end
  CHECK(trainer.history().empty());
  CHECK_FALSE(std::filesystem::exists(ckpt));
}

// EarlyStopping keeps the best weights in memory; a run that diverges later still ends with them,
// as Keras's on_train_end after TerminateOnNaN.
TEST_CASE("Trainer: a run that diverges after its best epoch ends with EarlyStopping's best weights") {
  struct Blowup : train::Callback {  // from the third epoch on, an lr that sends the weights to inf
    void on_epoch_begin(TrainContext& c) override {
      if (c.epoch == 3) c.optimizer->set_lr(1e30);
    }
  };
  Setup s;
  auto stop = std::make_shared<train::EarlyStopping>(
      train::EarlyStoppingOptions{.monitor = "val_loss", .patience = 5, .restore_best_weights = true});
  train::Trainer trainer(s.config);
  trainer.add(stop).add(std::make_shared<Blowup>());
  CHECK_THROWS_AS(trainer.fit(4), train::TrainingDiverged);
  CHECK(trainer.history().size() == 2);
  CHECK(stop->restored());
  for (const auto& p : parameter_values(*s.model))
    for (double v : p) CHECK(std::isfinite(v));
}

// evaluate() puts every module's mode back as it found it.
TEST_CASE("Trainer: evaluate leaves the model in the mode it found it in") {
  Setup s;
  train::Trainer trainer(s.config);
  s.model->eval();
  trainer.evaluate(*s.config.validation);
  CHECK_FALSE(s.model->is_training());
  s.model->train();
  auto first = s.model->named_children().front().second;
  first->eval();  // a frozen submodule keeps its own mode
  trainer.evaluate(*s.config.validation);
  CHECK(s.model->is_training());
  CHECK_FALSE(first->is_training());
}

TEST_CASE("Trainer: stop_now ends the run at once, the epoch unrecorded; needs_step_totals is asked every step") {
  struct StopAtThree : train::Callback {
    int asked = 0, epoch_end = 0;
    bool needs_step_totals(const TrainContext&) override { return ++asked, false; }
    void on_step_end(TrainContext& c) override {
      if (c.step == 3) c.stop_now("enough");
    }
    void on_epoch_end(TrainContext&, const EpochRecord&) override { ++epoch_end; }
  };
  Setup s;
  auto stop = std::make_shared<StopAtThree>();
  train::Trainer trainer(s.config);
  trainer.add(stop);
  CHECK(trainer.fit(2).empty());
  CHECK(stop->asked == 3);
  CHECK(stop->epoch_end == 0);
  CHECK(trainer.stop_reason() == "enough");
  // resume_after numbers the next fit's epochs on from a checkpoint's.
  Setup again;
  train::Trainer resumed(again.config);
  resumed.resume_after(5);
  const auto history = resumed.fit(1);
  REQUIRE(history.size() == 1);
  CHECK(history[0].epoch == 6);
}
