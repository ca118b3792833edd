// The training tool's parts: option parsing (good and bad), the data and model the options make,
// metrics against hand-computed cases, the CSV log round trip, and the PNG chart writer.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <unistd.h>
#include <string>

#include <stb/stb_image.h>

#include "tests/support/data_test_util.h"
#include "io/safetensors.h"
#include "mdl.h"
#include "tests/support/test_util.h"
#include "train/csv_log.h"
#include "train/metrics.h"
#include "tools/mdl_train/options.h"
#include "tools/mdl_train/plot.h"
#include "tools/mdl_train/setup.h"
#include "tools/mdl_train/run_training.h"

using namespace mdl;
using train::kGpuLoaderPrefetch;
using train::kGpuLoaderWorkers;
using train::parse_train_options;
using train::TrainOptions;
using train::UsageError;

namespace {
std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("mdl_test_" + std::to_string(::getpid()) + "_" + name)).string();
}
std::string usage_error(const std::vector<std::string>& args) {
  try {
    parse_train_options(args);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("mdl-train options: defaults, both value forms, every switch") {
  auto o = parse_train_options(std::vector<std::string>{});
  CHECK(o.model == "cnn");
  CHECK(o.data == "fashion-mnist");
  CHECK(o.epochs == 5);
  CHECK(o.batch == 128);
  o = parse_train_options({"--model",
                           "resnet18",
                           "--epochs=3",
                           "--batch",
                           "64",
                           "--optimizer",
                           "sgd",
                           "--lr",
                           "0.1",
                           "--schedule",
                           "cosine",
                           "--weight-decay",
                           "5e-4",
                           "--l2=1e-4",
                           "--clip",
                           "1.5",
                           "--grad-accum",
                           "4",
                           "--amp",
                           "f16",
                           "--cache",
                           "file",
                           "--prefetch",
                           "4",
                           "--workers",
                           "2",
                           "--pin-memory",
                           "--device",
                           "cuda:1",
                           "--seed",
                           "42",
                           "--save",
                           "a.safetensors",
                           "--resume",
                           "b.safetensors",
                           "--log",
                           "l.csv",
                           "--no-progress",
                           "--data",
                           "imagefolder:/tmp/x",
                           "--subset",
                           "1000",
                           "--profile",
                           "10",
                           "--trace",
                           "t.json"});
  CHECK(o.model == "resnet18");
  CHECK(o.epochs == 3);
  CHECK(o.batch == 64);
  CHECK(o.optimizer == "sgd");
  CHECK(o.lr == doctest::Approx(0.1));
  CHECK(o.schedule == "cosine");
  CHECK(o.weight_decay == doctest::Approx(5e-4));
  CHECK(o.l2 == doctest::Approx(1e-4));
  CHECK(o.clip == doctest::Approx(1.5));
  CHECK(o.grad_accum == 4);
  CHECK(o.amp == "f16");
  CHECK(o.cache == "file");
  CHECK(o.prefetch == 4);
  CHECK(o.workers == 2);
  CHECK(o.pin_memory);
  CHECK(o.device == "cuda:1");
  CHECK(o.seed == 42);
  CHECK(o.save == "a.safetensors");
  CHECK(o.resume == "b.safetensors");
  CHECK(o.log == "l.csv");
  CHECK_FALSE(o.progress);
  CHECK(o.data == "imagefolder:/tmp/x");
  CHECK(o.subset == 1000);
  CHECK(o.profile == 10);
  CHECK(o.trace == "t.json");
  CHECK(parse_train_options({"--model", "mobilenet"}).model == "efficientnet");
  CHECK(parse_train_options({"--model", "efficientnetv2"}).model == "efficientnetv2");
  CHECK(train::usage().find("efficientnetv2") != std::string::npos);
  CHECK(parse_train_options({"--model", "cnn-separable"}).model == "cnn-separable");
  CHECK(parse_train_options({"-h"}).help);
  CHECK_FALSE(o.channels_last);
  CHECK(parse_train_options({"--channels-last"}).channels_last);
}

TEST_CASE("mdl-train options: a GPU run's loader defaults feed the device; given values and the CPU's stand") {
  const TrainOptions cpu = parse_train_options(std::vector<std::string>{});
  CHECK((cpu.workers == 0 && cpu.prefetch == 0 && !cpu.pin_memory));
  const TrainOptions gpu = parse_train_options({"--device", "cuda"});
  CHECK(gpu.workers >= 1);
  CHECK(gpu.workers <= kGpuLoaderWorkers);
  CHECK(gpu.prefetch == kGpuLoaderPrefetch);
  CHECK(gpu.pin_memory);
  // Each one given keeps its value, the others still take the GPU's defaults.
  const TrainOptions mixed = parse_train_options({"--device=cuda:1", "--workers", "0", "--prefetch", "2"});
  CHECK(mixed.workers == 0);
  CHECK(mixed.prefetch == 2);
  CHECK(mixed.pin_memory);
  const TrainOptions pinned = parse_train_options({"--pin-memory", "--device", "cuda"});
  CHECK(pinned.prefetch == kGpuLoaderPrefetch);
  CHECK(pinned.pin_memory);
  CHECK_FALSE(parse_train_options({"--device", "cuda", "--no-pin-memory"}).pin_memory);
}

TEST_CASE("mdl-train options: --copy-stream hands the loader the GPU; without one it is refused") {
  CHECK_FALSE(parse_train_options({}).copy_stream);
  CHECK(usage_error({"--copy-stream"}).find("--copy-stream copies batches to a GPU; it needs --device cuda") !=
        std::string::npos);
  const train::TrainOptions o = parse_train_options({"--copy-stream", "--device", "cuda"});
  CHECK(o.copy_stream);
  train::DataBundle d;
  CHECK(train::make_loader_options(o, d).device == Device::cuda(0));
  CHECK(train::make_loader_options(parse_train_options({"--device", "cuda"}), d).device.is_cpu());
}

TEST_CASE("mdl-train options: bad options are named") {
  CHECK(usage_error({"--modle", "cnn"}).find("unknown option '--modle'") != std::string::npos);
  CHECK(usage_error({"--model", "alexnet"}).find("--model must be one of") != std::string::npos);
  CHECK(usage_error({"--epochs"}).find("--epochs needs a value") != std::string::npos);
  CHECK(usage_error({"--epochs", "three"}).find("--epochs expects a number, got 'three'") != std::string::npos);
  CHECK(usage_error({"--epochs", "0"}).find("--epochs must be in [1, ") != std::string::npos);
  CHECK(usage_error({"--batch", "12x"}).find("--batch expects a number") != std::string::npos);
  CHECK(usage_error({"--lr", "-1"}).find("--lr must be in [0, ") != std::string::npos);
  CHECK(usage_error({"--amp", "f8"}).find("--amp must be one of none, f16, bf16") != std::string::npos);
  CHECK(usage_error({"--cache", "disk"}).find("--cache") != std::string::npos);
  CHECK(usage_error({"--device", "tpu"}).find("--device must be cpu, cuda or cuda:N") != std::string::npos);
  CHECK(usage_error({"--data", "imagefolder"}).find("needs a path") != std::string::npos);
  CHECK(usage_error({"--profile", "0"}).find("--profile must be in [1, ") != std::string::npos);
  CHECK(usage_error({"--pin-memory=yes"}).find("--pin-memory takes no value") != std::string::npos);
  CHECK(usage_error({"--batch", "2", "--grad-accum", "4"}).find("larger than --batch") != std::string::npos);
  CHECK(usage_error({"--model", "gpt"}).find("--model gpt needs --data text:PATH") != std::string::npos);
  CHECK(usage_error({"--data", "text:/tmp/a.txt"}).find("needs --model gpt") != std::string::npos);
  CHECK(usage_error({"--evaluate", "a.safetensors", "--resume", "b"})
            .find("--evaluate trains nothing; it takes no "
                  "--resume") != std::string::npos);
  CHECK(usage_error({"--evaluate", "a", "--save", "b"}).find("it takes no --save") != std::string::npos);
  CHECK(usage_error({"--evaluate", "a", "--profile", "4"}).find("it takes no --profile") != std::string::npos);
  CHECK(train::usage().find("--grad-accum") != std::string::npos);
  CHECK(train::usage().find("--evaluate FILE") != std::string::npos);
}

TEST_CASE("mdl-train options: the callback options --early-stop, --save-best, --plateau, --target-accuracy") {
  auto o = parse_train_options(std::vector<std::string>{});
  CHECK(o.early_stop == 0);
  CHECK(o.save_best.empty());
  CHECK(o.plateau == 0);
  CHECK(o.target_accuracy == 0);
  o = parse_train_options(
      {"--early-stop", "3", "--save-best=best.safetensors", "--plateau", "2", "--target-accuracy", "0.9"});
  CHECK(o.early_stop == 3);
  CHECK(o.save_best == "best.safetensors");
  CHECK(o.plateau == 2);
  CHECK(o.target_accuracy == 0.9);
  CHECK(usage_error({"--early-stop", "0"}).find("--early-stop must be in [1, ") != std::string::npos);
  CHECK(usage_error({"--early-stop", "two"}).find("--early-stop expects a number, got 'two'") != std::string::npos);
  CHECK(usage_error({"--plateau", "-1"}).find("--plateau must be in [1, ") != std::string::npos);
  CHECK(usage_error({"--target-accuracy", "1.5"}).find("--target-accuracy must be in (0, 1], got 1.5") !=
        std::string::npos);
  CHECK(usage_error({"--target-accuracy", "0"}).find("--target-accuracy must be in (0, 1], got 0") !=
        std::string::npos);
  CHECK(usage_error({"--target-accuracy", "nan"}).find("--target-accuracy must be a finite number") !=
        std::string::npos);
  CHECK(usage_error({"--save-best="}).find("--save-best needs a file name") != std::string::npos);
  CHECK(usage_error({"--save-best", "a", "--save", "a"}).find("--save and --save-best name the same file") !=
        std::string::npos);
  CHECK(usage_error({"--plateau", "2", "--schedule", "cosine"}).find("--plateau and --schedule cosine") !=
        std::string::npos);
  CHECK(usage_error({"--evaluate", "a", "--early-stop", "2"}).find("it takes no --early-stop") != std::string::npos);
  for (const char* opt : {"--early-stop", "--save-best", "--plateau", "--target-accuracy"})
    CHECK(train::usage().find(opt) != std::string::npos);
}

TEST_CASE("mdl-train options: an option that would be ignored, or an empty file name, is refused") {
  using Args = std::vector<std::string>;
  const std::pair<Args, const char*> cases[] = {
      {{"--trace", "t.json"}, "--trace goes with --profile N"},
      {{"--warmup-steps", "10"}, "--warmup-steps goes with --schedule warmup"},
      {{"--schedule", "cosine", "--warmup-steps", "10"}, "--warmup-steps goes with --schedule warmup"},
      {{"--bucket-mb", "4"}, "--bucket-mb goes with --dist"},
      {{"--dist-timeout", "60"}, "--dist-timeout goes with --dist"},
      {{"--momentum", "0.5"}, "--momentum goes with --optimizer sgd"},
      {{"--optimizer", "adam", "--momentum", "0.5"}, "--momentum goes with --optimizer sgd"},
      {{"--cache-dir", "/tmp/c"}, "--cache-dir goes with --cache file"},
      {{"--cache", "memory", "--cache-dir", "/tmp/c"}, "--cache-dir goes with --cache file"},
      {{"--model", "gpt", "--data", "text:/tmp/a.txt", "--val-subset", "10"}, "--val-subset picks held-out samples"},
      {{"--evaluate", "a", "--dump-order", "o.bin"}, "--evaluate trains nothing; it takes no --dump-order"},
  };
  for (const auto& [args, says] : cases) {
    CAPTURE(args[0]);
    CHECK(usage_error(args).find(says) != std::string::npos);
  }
  for (const char* opt :
       {"--save", "--resume", "--log", "--evaluate", "--trace", "--dump-order", "--cache-dir", "--save-best"}) {
    CAPTURE(opt);
    CHECK(usage_error({std::string(opt) + "="}).find(std::string(opt) + " needs a file name") != std::string::npos);
    CHECK(usage_error({opt, ""}).find(std::string(opt) + " needs a file name") != std::string::npos);
  }
  // With the option each goes with, each is taken.
  CHECK(parse_train_options({"--profile", "4", "--trace", "t.json"}).trace == "t.json");
  CHECK(parse_train_options({"--schedule", "warmup", "--warmup-steps", "10"}).warmup_steps == 10);
  CHECK(parse_train_options({"--optimizer", "sgd", "--momentum", "0.5"}).momentum == 0.5);
  CHECK(parse_train_options({"--cache", "file", "--cache-dir", "/tmp/c"}).cache_dir == "/tmp/c");
  CHECK(parse_train_options({"--val-subset", "10"}).val_subset == 10);
}

TEST_CASE("mdl-train options: two outputs naming one file are refused") {
  using Args = std::vector<std::string>;
  const std::pair<Args, const char*> cases[] = {
      {{"--log", "c.st", "--save", "c.st"}, "--log and --save name the same file 'c.st'"},
      {{"--save", "c.st", "--dump-order", "c.st"}, "--save and --dump-order name the same file 'c.st'"},
      {{"--save", "c.st", "--save-best", "c.st.train.safetensors"},
       "--save's training state and --save-best name the same file 'c.st.train.safetensors'"},
      {{"--log", "./run.csv", "--dump-order", "run.csv"}, "--log and --dump-order name the same file"},
      {{"--profile", "4", "--log", "mdl-trace.json"}, "--log and --trace name the same file 'mdl-trace.json'"},
      {{"--profile", "4", "--trace", "x", "--roofline", "x"}, "--trace and --roofline name the same file 'x'"},
      {{"--save-best", "b.st", "--log", "b.st"}, "--log and --save-best name the same file"},
  };
  for (const auto& [args, says] : cases) {
    CAPTURE(says);
    CHECK(usage_error(args).find(says) != std::string::npos);
  }
  // Resuming from the file the run saves to reads it before writing it: allowed.
  CHECK(parse_train_options({"--resume", "c.st", "--save", "c.st", "--log", "c.csv"}).save == "c.st");
}

TEST_CASE("mdl-train output: a redirected stdout gets every line; the bar only when both streams are terminals") {
  const TrainOptions o = parse_train_options(std::vector<std::string>{});
  CHECK(train::draws_progress_bar(o, true, true));
  CHECK_FALSE(train::draws_progress_bar(o, false, true));  // mdl-train > run.log at a terminal
  CHECK_FALSE(train::draws_progress_bar(o, true, false));
  CHECK_FALSE(train::draws_progress_bar(parse_train_options({"--no-progress"}), true, true));
  CHECK(train::usage().find("mdl-train > run.log") != std::string::npos);
}

TEST_CASE("mdl-train options: --classes lists, CIFAR-100 data kinds") {
  CHECK(parse_train_options(std::vector<std::string>{}).classes.empty());
  CHECK(parse_train_options({"--classes", "0,3,5"}).classes == std::vector<std::string>{"0", "3", "5"});
  CHECK(parse_train_options({"--classes=cat,dog"}).classes == std::vector<std::string>{"cat", "dog"});
  CHECK(parse_train_options({"--classes", "7"}).classes == std::vector<std::string>{"7"});
  CHECK(parse_train_options({"--data", "cifar100:/tmp/c"}).data == "cifar100:/tmp/c");
  CHECK(parse_train_options({"--data", "cifar100-coarse:/tmp/c"}).data == "cifar100-coarse:/tmp/c");
  CHECK(usage_error({"--classes="}).find("--classes needs at least one class") != std::string::npos);
  CHECK(usage_error({"--classes"}).find("--classes needs a value") != std::string::npos);
  CHECK(usage_error({"--classes", "0,,3"}).find("--classes has an empty class in '0,,3'") != std::string::npos);
  CHECK(usage_error({"--classes", "1,"}).find("--classes has an empty class") != std::string::npos);
  CHECK(usage_error({"--classes", "cat,dog,cat"}).find("--classes names class 'cat' twice") != std::string::npos);
  CHECK(usage_error({"--model", "gpt", "--data", "text:/tmp/a.txt", "--classes", "1"})
            .find("--classes picks classes of image data") != std::string::npos);
  CHECK(usage_error({"--data", "cifar100"}).find("cifar100 needs a path") != std::string::npos);
  CHECK(usage_error({"--data", "cifar1000:/x"}).find("--data must be one of") != std::string::npos);
  for (const char* text : {"--classes LIST", "cifar100:PATH", "cifar100-coarse:PATH"})
    CHECK(train::usage().find(text) != std::string::npos);
}

TEST_CASE("mdl-train data: --classes keeps and relabels classes in both splits; the model's outputs follow") {
  data_test::TempDir dir("train_classes");
  data_test::make_image_folder(dir.path / "train", 4, 3, 8, 8, 1);
  data_test::make_image_folder(dir.path / "test", 4, 2, 8, 8, 1);
  train::TrainOptions o;
  o.data = "imagefolder:" + dir.path.string();
  o.classes = {"class_3", "1"};  // a name, then an index
  train::DataBundle d = train::make_data(o);
  CHECK(d.classes == 2);
  CHECK(d.class_names == std::vector<std::string>{"class_3", "class_1"});
  REQUIRE(d.train->size() == 6);
  REQUIRE(d.test->size() == 4);
  CHECK(d.train->get(0).y.item<int64_t>() == 1);  // class_1's images come first, labelled 1
  CHECK(d.train->get(5).y.item<int64_t>() == 0);
  CHECK(d.train->get(5).x.to_vector<uint8_t>()[0] == data_test::pixel(3, 2, 0, 0, 0));
  CHECK(d.test->get(3).y.item<int64_t>() == 0);
  train::TrainOptions all_classes;
  all_classes.data = o.data;
  CHECK(d.train->identity() != train::make_data(all_classes).train->identity());
  o.model = "mlp";
  CHECK(train::make_model(o, d)->forward(train::example_input(d)).shape() == Shape{1, 2});
  o.model = "efficientnetv2";
  auto v2 = train::make_model(o, d);
  v2->eval();  // 8x8 images end as 1x1 maps: one value per channel, too few for batch statistics
  CHECK(v2->forward(train::example_input(d)).shape() == Shape{1, 2});
  o.subset = 2;  // --subset takes the first samples of the chosen classes
  CHECK(train::make_data(o).train->size() == 2);
  o.subset = 0;
  // A whole run: training, validation and the confusion matrix over the two classes.
  o.model = "mlp", o.epochs = 1, o.batch = 2, o.progress = false;
  train::TrainReport r = train::run_training(o, nullptr);
  REQUIRE(r.epochs.size() == 1);
  CHECK(r.parameters == 3 * 8 * 8 * 256 + 256 + 256 * 128 + 128 + 128 * 2 + 2);
  CHECK(std::isfinite(r.epochs[0].val_loss));

  o.classes = {"class_9"};
  CHECK_THROWS_WITH_AS(train::make_data(o), doctest::Contains("'class_9' is not a class of ImageFolder"), UsageError);
  o.classes = {"4"};
  CHECK_THROWS_WITH_AS(train::make_data(o), doctest::Contains("class 4 is not in ImageFolder"), UsageError);
  o.classes = {"-1"};
  CHECK_THROWS_WITH_AS(train::make_data(o), doctest::Contains("class -1 is not in"), UsageError);
  o.classes = {"class_2", "2"};
  CHECK_THROWS_WITH_AS(train::make_data(o), doctest::Contains("--classes names class 2 (class_2) twice"), UsageError);
}

TEST_CASE("mdl-train data: cifar100 and cifar100-coarse read train.bin and test.bin") {
  data_test::TempDir dir("train_cifar100");
  auto records = [](std::vector<uint8_t> coarse_fine) {
    std::vector<uint8_t> b;
    for (size_t r = 0; r < coarse_fine.size(); r += 2) {
      b.push_back(coarse_fine[r]), b.push_back(coarse_fine[r + 1]);
      b.insert(b.end(), 3072, uint8_t(r));
    }
    return b;
  };
  data_test::write_bytes(dir.file("train.bin"), records({0, 30, 1, 1, 0, 55, 14, 2}));
  data_test::write_bytes(dir.file("test.bin"), records({0, 55, 14, 2}));
  train::TrainOptions o;
  o.data = "cifar100:" + dir.path.string();
  train::DataBundle fine = train::make_data(o);
  CHECK(fine.classes == 100);
  CHECK(fine.channels == 3);
  CHECK(fine.image_size == 32);
  CHECK(fine.class_names[30] == "dolphin");
  CHECK(fine.train->size() == 4);
  CHECK(fine.test->size() == 2);
  o.data = "cifar100-coarse:" + dir.path.string();
  train::DataBundle coarse = train::make_data(o);
  CHECK(coarse.classes == 20);
  CHECK(coarse.class_names[0] == "aquatic_mammals");
  CHECK(coarse.train->get(3).y.item<int64_t>() == 14);
  o.classes = {"people", "aquatic_mammals"};
  train::DataBundle two = train::make_data(o);
  CHECK(two.classes == 2);
  CHECK(two.train->size() == 3);
  CHECK(two.train->get(2).y.item<int64_t>() == 0);  // record 3: people
  CHECK(two.test->size() == 2);
  o.classes = {"fish"};  // a superclass with samples in train.bin, none in test.bin
  CHECK_THROWS_WITH_AS(train::make_data(o), doctest::Contains("class 1 has no samples"), Error);
}

TEST_CASE("metrics: confusion matrix, accuracy, per-class and macro F1 by hand") {
  // targets  0 0 0 1 1 2 2 2
  // predicted 0 0 1 1 2 2 2 0
  train::ConfusionMatrix cm(3);
  cm.add(from_vector<float>({3, 1, 0,   // -> 0
                             3, 1, 0,   // -> 0
                             1, 3, 0,   // -> 1
                             0, 3, 1,   // -> 1
                             0, 1, 3,   // -> 2
                             0, 0, 9,   // -> 2
                             0, 1, 2,   // -> 2
                             5, 1, 0},  // -> 0
                            {8, 3}),
         from_vector<int64_t>({0, 0, 0, 1, 1, 2, 2, 2}, {8}));
  CHECK(cm.total() == 8);
  CHECK(cm.count(0, 0) == 2);
  CHECK(cm.count(0, 1) == 1);
  CHECK(cm.count(1, 1) == 1);
  CHECK(cm.count(1, 2) == 1);
  CHECK(cm.count(2, 2) == 2);
  CHECK(cm.count(2, 0) == 1);
  CHECK(cm.accuracy() == doctest::Approx(5.0 / 8));
  // class 0: P = 2/3, R = 2/3 -> F1 2/3; class 1: P = 1/2, R = 1/2 -> 1/2; class 2: P = 2/3, R = 2/3 -> 2/3
  CHECK(cm.precision(0) == doctest::Approx(2.0 / 3));
  CHECK(cm.recall(1) == doctest::Approx(0.5));
  CHECK(cm.f1(2) == doctest::Approx(2.0 / 3));
  CHECK(cm.macro_f1() == doctest::Approx((2.0 / 3 + 0.5 + 2.0 / 3) / 3));
  // A class never predicted and never present scores 0 in the macro mean (scikit-learn's zero_division=0).
  train::ConfusionMatrix four(4);
  four.add(from_vector<int64_t>({0, 1, 1}, {3}), from_vector<int64_t>({0, 1, 0}, {3}));
  CHECK(four.f1(3) == 0.0);
  CHECK(four.f1(0) == doctest::Approx(2.0 / 3));  // P 1/2, R 1
  CHECK(four.f1(1) == doctest::Approx(2.0 / 3));  // P 1, R 1/2
  CHECK(four.macro_f1() == doctest::Approx((2.0 / 3 + 2.0 / 3) / 4));
  CHECK(cm.str({"shirt", "bag", "boot"}).find("shirt |") != std::string::npos);
  CHECK(train::ConfusionMatrix(2).accuracy() == 0.0);
}

TEST_CASE("metrics: bad input names the problem") {
  train::ConfusionMatrix cm(3);
  CHECK_THROWS_WITH_AS(cm.add(3, 0), doctest::Contains("target 3 is outside [0, 3)"), Error);
  CHECK_THROWS_WITH_AS(cm.add(randn({4, 5}), zeros({4}, kI64)), doctest::Contains("have 5 classes, expected 3"), Error);
  CHECK_THROWS_WITH_AS(cm.add(randn({4, 3}), zeros({5}, kI64)), doctest::Contains("4 predictions for 5 targets"),
                       Error);
  CHECK_THROWS_WITH_AS(cm.add(randn({4, 3}), zeros({4})), doctest::Contains("targets must be 1-D integers"), Error);
  CHECK_THROWS_AS(train::ConfusionMatrix(0), Error);
}

TEST_CASE("csv log: header, rows, quoting, round trip; errors name the file") {
  const std::string path = temp_path("log.csv");
  {
    train::CsvLog log(path, {"epoch", "loss", "note"});
    log.row({int64_t(1), 0.25, std::string("plain")});
    log.row({int64_t(2), 1.0 / 3, std::string("has, comma and \"quotes\"")});
    CHECK_THROWS_WITH_AS(log.row({int64_t(3)}), doctest::Contains("a row of 1 fields for 3 columns"), Error);
  }
  auto t = train::read_csv(path);
  REQUIRE(t.header == std::vector<std::string>{"epoch", "loss", "note"});
  REQUIRE(t.rows.size() == 2);
  CHECK(t.rows[0][0] == "1");
  CHECK(std::stod(t.rows[1][1]) == doctest::Approx(1.0 / 3).epsilon(1e-8));
  CHECK(t.rows[1][2] == "has, comma and \"quotes\"");
  CHECK(t.column("loss") == 1);
  CHECK(t.column("nope") == -1);
  std::remove(path.c_str());
  CHECK_THROWS_WITH_AS(train::CsvLog("/nonexistent-dir/x.csv", {"a"}), doctest::Contains("/nonexistent-dir/x.csv"),
                       Error);
  CHECK_THROWS_WITH_AS(train::read_csv("/nonexistent-dir/x.csv"), doctest::Contains("cannot open"), Error);
}

TEST_CASE("plots: line and bar charts are PNGs of the asked size with the series drawn") {
  const std::string lines = temp_path("lines.png"), bars = temp_path("bars.png");
  train::line_chart(lines, {{"baseline", {1, 2, 3}, {0.9, 0.5, 0.3}}, {"amp", {1, 2, 3}, {0.8, 0.45, NAN}}},
                    {.title = "Training loss", .x_label = "epoch", .y_label = "loss", .width = 640, .height = 400});
  int w = 0, h = 0, c = 0;
  unsigned char* px = stbi_load(lines.c_str(), &w, &h, &c, 3);
  REQUIRE(px != nullptr);
  CHECK(w == 640);
  CHECK(h == 400);
  // The first series' colour (0, 114, 178) appears: the curve was drawn, not only the axes.
  bool blue = false;
  for (int i = 0; i < w * h; ++i) blue |= px[3 * i] == 0 && px[3 * i + 1] == 114 && px[3 * i + 2] == 178;
  CHECK(blue);
  stbi_image_free(px);
  train::bar_chart(bars, {"f32", "amp"}, {120.5, 80.25}, {.title = "Time per epoch (s)"});
  CHECK(stbi_info(bars.c_str(), &w, &h, &c) == 1);
  CHECK(w == 800);
  CHECK(h == 500);
  std::remove(lines.c_str());
  std::remove(bars.c_str());
  CHECK_THROWS_WITH_AS(train::bar_chart(bars, {"a"}, {1, 2}, {}), doctest::Contains("1 labels for 2 values"), Error);
  CHECK_THROWS_WITH_AS(train::line_chart("/nonexistent-dir/p.png", {}, {}), doctest::Contains("/nonexistent-dir/p.png"),
                       Error);
  CHECK_THROWS_AS(train::line_chart(lines, {{"bad", {1, 2}, {1}}}, {}), Error);
}

TEST_CASE("run_training: a short MLP run logs, checkpoints, resumes and profiles") {
  const std::string log = temp_path("run.csv"), ckpt = temp_path("run.safetensors"), trace = temp_path("trace.json");
  train::TrainOptions o;
  o.model = "mlp", o.epochs = 1, o.batch = 64, o.subset = 1024, o.lr = 2e-3, o.log = log, o.save = ckpt;
  o.progress = false, o.grad_accum = 2, o.l2 = 1e-4, o.clip = 5.0, o.schedule = "cosine";
  train::TrainReport r = train::run_training(o, nullptr);
  REQUIRE(r.epochs.size() == 1);
  CHECK(r.parameters == 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);
  CHECK(r.epochs[0].val_accuracy > 0.6);  // 16 steps on 1,024 images already beat chance by far
  CHECK(r.epochs[0].val_macro_f1 > 0.5);
  CHECK(r.epochs[0].lr < 1e-6);  // the cosine schedule ran its course over the 16 steps
  auto t = train::read_csv(log);
  REQUIRE(t.rows.size() == 1);
  CHECK(std::stod(t.rows[0][size_t(t.column("val_accuracy"))]) == doctest::Approx(r.epochs[0].val_accuracy));

  // Resuming after epoch 1 with --epochs 2 runs only the second epoch, from the saved state.
  o.resume = ckpt, o.epochs = 2, o.save = "", o.log = "";
  train::TrainReport resumed = train::run_training(o, nullptr);
  REQUIRE(resumed.epochs.size() == 1);
  CHECK(resumed.epochs[0].epoch == 2);

  // --evaluate: the epoch-1 weights give the epoch-1 validation again, and nothing trains.
  train::TrainOptions e;
  e.model = "mlp", e.batch = 64, e.progress = false, e.evaluate = ckpt;
  train::TrainReport ev = train::run_training(e, nullptr);
  CHECK(ev.evaluated);
  CHECK(ev.epochs.empty());
  CHECK(ev.evaluation.samples == 10000);
  CHECK(ev.evaluation.result.accuracy == r.epochs[0].val_accuracy);
  CHECK(ev.evaluation.result.loss == doctest::Approx(r.epochs[0].val_loss).epsilon(1e-6));
  CHECK(ev.evaluation.images_per_second() > 0);
  e.model = "cnn";  // the weights of another model are refused, naming the entries
  CHECK_THROWS_WITH_AS(train::run_training(e, nullptr), doctest::Contains("load_state_dict"), Error);
  e.model = "mlp", e.evaluate = temp_path("missing.safetensors");
  const std::string missing = "the weights file '" + e.evaluate + "' does not exist";
  CHECK_THROWS_WITH_AS(train::run_training(e, nullptr), doctest::Contains(missing.c_str()), Error);

  // --profile: 4 steps after warm-up, a table with the phases and a trace file.
  train::TrainOptions p;
  p.model = "mlp", p.epochs = 1, p.batch = 64, p.subset = 640, p.progress = false, p.profile = 4, p.trace = trace;
  train::TrainReport prof = train::run_training(p, nullptr);
  CHECK(prof.profile_table.find("forward") != std::string::npos);
  CHECK(prof.profile_table.find("backward") != std::string::npos);
  CHECK(std::filesystem::file_size(trace) > 100);
  p.profile = 100;  // more steps than the epoch has
  CHECK_THROWS_WITH_AS(
      train::run_training(p, nullptr),
      doctest::Contains("recording 100 steps needs at least 103 steps in the first epoch (3 to warm up); it has 10"),
      Error);
  for (const auto& f : {log, ckpt, ckpt + ".train.safetensors", trace}) std::remove(f.c_str());
}

TEST_CASE("run_training: an output file that cannot be created fails before anything runs") {
  // A regular file where the folder should be: nothing can be created under it.
  const std::string file = temp_path("not_a_folder"), order = temp_path("order.bin");
  std::FILE* f = std::fopen(file.c_str(), "w");
  REQUIRE(f);
  std::fclose(f);
  std::filesystem::remove(order);
  train::TrainOptions o;
  o.model = "mlp", o.epochs = 1, o.batch = 64, o.subset = 256, o.val_subset = 256, o.progress = false;
  o.dump_order = order;  // written before the first epoch: its absence shows nothing ran
  auto message = [&] {
    try {
      train::run_training(o, nullptr);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  o.save = file + "/x.st";
  CHECK(message().find("cannot create the --save file '" + o.save + "'") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(order));
  o.save = "", o.save_best = file + "/best.st";
  CHECK(message().find("cannot create the --save-best file") != std::string::npos);
  o.save_best = "", o.profile = 2, o.trace = file + "/t.json";
  CHECK(message().find("cannot create the --trace file '" + o.trace + "'") != std::string::npos);
  o.trace = std::filesystem::temp_directory_path().string();
  CHECK(message().find("is a folder") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(order));
  // The tool adds its own name to a failure: the message does not start with it.
  o.profile = 0, o.trace = "", o.dump_order = file + "/o.bin";
  const std::string dump = message();
  CHECK(dump.rfind("cannot write --dump-order file", 0) == 0);
  for (const auto& p : {file, order}) std::filesystem::remove(p);
}

TEST_CASE("run_training: --val-subset validates and evaluates on the first N held-out samples") {
  const std::string ckpt = temp_path("val_subset.safetensors");
  train::TrainOptions o = train::parse_train_options(
      std::vector<std::string>{"--model", "mlp", "--epochs", "1", "--batch", "64", "--subset", "256", "--val-subset",
                               "300", "--no-progress", "--save", ckpt});
  CHECK(o.val_subset == 300);
  const train::TrainReport r = train::run_training(o, nullptr);
  REQUIRE(r.epochs.size() == 1);
  const double correct = r.epochs[0].val_accuracy * 300;  // a count of the 300 samples
  CHECK(correct == doctest::Approx(std::round(correct)).epsilon(1e-9));
  // --evaluate takes the same 300 and finds the same accuracy.
  train::TrainOptions e;
  e.model = "mlp", e.batch = 64, e.progress = false, e.evaluate = ckpt, e.val_subset = 300;
  const train::TrainReport ev = train::run_training(e, nullptr);
  CHECK(ev.evaluation.samples == 300);
  CHECK(ev.evaluation.result.accuracy == r.epochs[0].val_accuracy);
  CHECK_THROWS_WITH_AS(train::parse_train_options(std::vector<std::string>{"--val-subset", "-1"}),
                       doctest::Contains("--val-subset"), Error);
  for (const auto& f : {ckpt, ckpt + ".train.safetensors"}) std::remove(f.c_str());
}

TEST_CASE("run_training: --early-stop, --save-best, --plateau and --target-accuracy act on the validation") {
  const std::string best = temp_path("best.safetensors");
  std::filesystem::remove(best);
  // lr 0: the validation loss never improves after epoch 1, so patience 1 stops the run at epoch 2;
  // --plateau 1 needs two epochs without improvement, and the best weights are epoch 1's.
  train::TrainOptions o;
  o.model = "mlp", o.epochs = 5, o.batch = 64, o.subset = 256, o.val_subset = 500, o.lr = 0, o.progress = false;
  o.early_stop = 1, o.save_best = best, o.plateau = 1, o.target_accuracy = 0.99;
  train::TrainReport r = train::run_training(o, nullptr);
  CHECK(r.epochs.size() == 2);
  CHECK(r.stop_reason.find("EarlyStopping: val_loss did not improve for 1 epochs") != std::string::npos);
  CHECK(r.target_epoch == 0);
  CHECK(std::isnan(r.target_seconds));
  REQUIRE(std::filesystem::exists(best));
  const io::SafetensorsContents saved = io::read_safetensors(best);
  std::string epoch;
  for (auto& [k, v] : saved.metadata)
    if (k == "epoch") epoch = v;
  CHECK(epoch == "1");

  // A reachable target stops the run at the epoch that reached it.
  train::TrainOptions t;
  t.model = "mlp", t.epochs = 5, t.batch = 64, t.subset = 1024, t.lr = 2e-3, t.progress = false;
  t.target_accuracy = 0.3;
  train::TrainReport reached = train::run_training(t, nullptr);
  REQUIRE(reached.epochs.size() == 1);
  CHECK(reached.target_epoch == 1);
  CHECK(reached.target_seconds > 0);
  CHECK(reached.target_seconds <= reached.total_seconds);
  CHECK(reached.stop_reason.find("val_accuracy reached 0.3 at epoch 1") != std::string::npos);
  std::filesystem::remove(best);
}

TEST_CASE(
    "run_training: --channels-last trains SimpleCNN bit for bit as the contiguous run, and saves the same files") {
  // On the CPU a channels-last conv computes the same sums as the contiguous one, so the weights,
  // the optimizer state and the checkpoint bytes (saved in (N, C, H, W) order) must all be equal.
  const std::string dir = temp_path("channels_last");
  std::filesystem::create_directories(dir);
  train::TrainOptions o;
  o.model = "cnn", o.batch = 64, o.subset = 256, o.epochs = 1, o.progress = false, o.optimizer = "sgd";
  // Each of the four runs evaluates the whole test split, where a sanitizer's conv kernels spend
  // minutes on 10,000 images; there the first 300 stand in (a full batch of 256 and a partial one).
  std::optional<data_test::FashionMnistHead> head;
  if (test::kSanitized) head.emplace(256, 300), o.data = "fashion-mnist:" + head->root();
  o.save = dir + "/nchw.safetensors";
  const train::TrainReport nchw = train::run_training(o, nullptr);
  o.channels_last = true, o.save = dir + "/nhwc.safetensors";
  const train::TrainReport nhwc = train::run_training(o, nullptr);
  REQUIRE(nhwc.epochs.size() == 1);
  CHECK(nhwc.epochs[0].train_loss == nchw.epochs[0].train_loss);
  CHECK(nhwc.epochs[0].val_loss == nchw.epochs[0].val_loss);
  for (const std::string suffix : {"", ".train.safetensors"}) {
    const io::SafetensorsContents a = io::read_safetensors(dir + "/nchw.safetensors" + suffix);
    const io::SafetensorsContents b = io::read_safetensors(dir + "/nhwc.safetensors" + suffix);
    REQUIRE(a.tensors.size() == b.tensors.size());
    for (size_t i = 0; i < a.tensors.size(); ++i) {
      CAPTURE(a.tensors[i].first);
      const Tensor &x = a.tensors[i].second, &y = b.tensors[i].second;
      REQUIRE(x.shape() == y.shape());
      CHECK(std::memcmp(x.raw_data(), y.raw_data(), size_t(x.numel()) * dtype_size(x.dtype())) == 0);
    }
  }
  // Resumed under channels-last from the contiguous run's files: the second epoch is the same too.
  o.epochs = 2, o.resume = dir + "/nchw.safetensors", o.save = "";
  const train::TrainReport resumed_nhwc = train::run_training(o, nullptr);
  o.channels_last = false;
  const train::TrainReport resumed_nchw = train::run_training(o, nullptr);
  REQUIRE(resumed_nhwc.epochs.size() == 1);
  CHECK(resumed_nhwc.epochs[0].train_loss == resumed_nchw.epochs[0].train_loss);
  std::filesystem::remove_all(dir);
}

TEST_CASE("run_training: a run checkpointed and resumed ends bit for bit where an uninterrupted run ends") {
  // Three epochs straight through, against one epoch, then a resumed run for the other two. The
  // schedule (restarts every epoch), accumulation, clipping and the L2 penalty all carry state
  // or depend on the step, so any state the checkpoint forgot shows in the weights.
  const std::string dir = temp_path("resume");
  std::filesystem::create_directories(dir);
  train::TrainOptions o;
  o.model = "mlp", o.batch = 64, o.subset = 384, o.lr = 2e-3, o.progress = false, o.grad_accum = 2, o.l2 = 1e-4;
  o.clip = 0.5, o.schedule = "restarts", o.weight_decay = 0.01;
  // Six epochs evaluate the test split: under a sanitizer, its first 300 images (a full and a partial batch).
  std::optional<data_test::FashionMnistHead> head;
  if (test::kSanitized) head.emplace(384, 300), o.data = "fashion-mnist:" + head->root();
  o.epochs = 3, o.save = dir + "/straight.safetensors";
  const train::TrainReport straight = train::run_training(o, nullptr);
  o.epochs = 1, o.save = dir + "/first.safetensors";
  train::run_training(o, nullptr);
  o.epochs = 3, o.resume = o.save, o.save = dir + "/resumed.safetensors";
  const train::TrainReport resumed = train::run_training(o, nullptr);
  REQUIRE(resumed.epochs.size() == 2);
  CHECK(resumed.epochs[1].train_loss == straight.epochs[2].train_loss);
  CHECK(resumed.epochs[1].val_loss == straight.epochs[2].val_loss);
  for (const std::string suffix : {"", ".train.safetensors"}) {
    const io::SafetensorsContents a = io::read_safetensors(dir + "/straight.safetensors" + suffix);
    const io::SafetensorsContents b = io::read_safetensors(dir + "/resumed.safetensors" + suffix);
    REQUIRE(a.tensors.size() == b.tensors.size());
    CHECK(a.tensors.size() >= 6);  // the MLP's 3 weights and 3 biases; the state file has more
    for (size_t i = 0; i < a.tensors.size(); ++i) {
      const auto& [name, x] = a.tensors[i];
      CAPTURE(name);
      REQUIRE(b.tensors[i].first == name);
      const Tensor& y = b.tensors[i].second;
      REQUIRE(x.dtype() == y.dtype());
      REQUIRE(x.shape() == y.shape());
      CHECK(std::memcmp(x.raw_data(), y.raw_data(), size_t(x.numel()) * dtype_size(x.dtype())) == 0);
    }
  }
  std::filesystem::remove_all(dir);
}
