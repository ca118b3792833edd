// mdl-study's plan: which rows run for which model and device, the targets, the seed-major order a
// deadline relies on, the estimate a dry run prints, the STUDY_* settings and the command line.
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "tools/mdl_train/study_plan.h"
#include "tools/mdl_train/study_usage.h"

using namespace mdl::train;

namespace {

std::vector<std::string> names(const std::vector<StudyConfig>& configs) {
  std::vector<std::string> out;
  for (const StudyConfig& c : configs) out.push_back(c.name);
  return out;
}

StudyDataSet memory_set() { return {"fashion-mnist", "fashion-mnist", "in memory", false, 1000, 1000}; }
StudyDataSet png_set() { return {"png", "imagefolder:/x", "decoded", true, 0, 1000}; }

}  // namespace

TEST_CASE("study plan: the rows a model and a device get") {
  StudySettings s;
  s.rows = {"+amp", "+channels-last", "+cuda-graph", "+loader", "+separable"};
  CHECK(names(table_configs(s, memory_set(), "cnn", "cpu")) ==
        std::vector<std::string>{"baseline", "+amp", "+channels-last", "+separable"});
  CHECK(names(table_configs(s, memory_set(), "cnn", "cuda")) ==
        std::vector<std::string>{"baseline", "+loader", "+amp", "+channels-last", "+cuda-graph", "+separable"});
  // AMP with channels-last: a conv net's row, on a GPU only.
  s.rows = {"+amp+channels-last"};
  CHECK(names(table_configs(s, memory_set(), "resnet18", "cuda")) ==
        std::vector<std::string>{"baseline", "+amp+channels-last"});
  CHECK(names(table_configs(s, memory_set(), "resnet18", "cpu")) == std::vector<std::string>{"baseline"});
  CHECK(names(table_configs(s, memory_set(), "vit", "cuda")) == std::vector<std::string>{"baseline"});
  s.rows = {"+amp", "+channels-last", "+cuda-graph", "+loader", "+separable"};
  // No channels-last for the ViT, no SimpleCNN variant for ResNet-18.
  CHECK(names(table_configs(s, memory_set(), "vit", "cuda:1")) ==
        std::vector<std::string>{"baseline", "+loader", "+amp", "+cuda-graph"});
  CHECK(names(table_configs(s, memory_set(), "resnet18", "cuda")) ==
        std::vector<std::string>{"baseline", "+loader", "+amp", "+channels-last", "+cuda-graph"});
  // The decoded sets have their own list; empty means every row.
  s.decoded_rows = {"+cache-file"};
  CHECK(names(table_configs(s, png_set(), "cnn", "cpu")) == std::vector<std::string>{"baseline", "+cache-file"});
  s.rows.clear();
  CHECK(names(table_configs(s, memory_set(), "mlp", "cpu")).size() == 8);
  CHECK(names(table_configs(s, memory_set(), "cnn", "cuda")).size() == memory_configs().size());
}

TEST_CASE("study plan: each row applies its options, and all of them together") {
  auto applied = [](const std::string& row, const std::string& model, const std::string& device, bool pipeline) {
    TrainOptions o;
    o.model = model, o.device = device;
    for (const StudyConfig& c : pipeline ? pipeline_configs() : memory_configs())
      if (c.name == row) c.apply(o);
    return o;
  };
  CHECK(applied("+amp-bf16", "cnn", "cpu", false).amp == "bf16");
  CHECK(applied("+channels-last", "cnn", "cpu", false).channels_last);
  const TrainOptions amp_nhwc = applied("+amp+channels-last", "resnet18", "cuda", false);
  CHECK(amp_nhwc.amp == "f16");
  CHECK(amp_nhwc.channels_last);
  CHECK(applied("+cuda-graph", "cnn", "cuda", false).cuda_graph);
  CHECK(applied("+loader", "cnn", "cuda", true).pin_memory);
  CHECK(applied("+loader", "cnn", "cuda", true).workers == kGpuLoaderWorkers);
  const TrainOptions all_gpu = applied("all", "cnn", "cuda", false);
  CHECK(all_gpu.amp == "f16");
  CHECK(all_gpu.channels_last);
  CHECK(all_gpu.cuda_graph);
  CHECK(all_gpu.pin_memory);
  CHECK(all_gpu.grad_accum == 4);
  CHECK(all_gpu.model == "cnn-separable");
  // On the CPU, "all" leaves out what only a GPU has; on the ViT, what only a conv net has.
  const TrainOptions all_cpu = applied("all", "vit", "cpu", true);
  CHECK_FALSE(all_cpu.cuda_graph);
  CHECK_FALSE(all_cpu.pin_memory);
  CHECK_FALSE(all_cpu.channels_last);
  CHECK(all_cpu.cache == "memory");
}

TEST_CASE("study plan: targets for every model and for one") {
  const Targets t = parse_targets("STUDY_TARGET", "90,vit=85");
  CHECK(t.for_model("cnn") == 90);
  CHECK(t.for_model("vit") == 85);
  CHECK(t.str() == "90%, vit 85%");
  CHECK(parse_targets("T", "80").for_model("resnet18") == 80);
  CHECK_THROWS_WITH_AS(parse_targets("STUDY_TARGET", "vit=85"), doctest::Contains("a target for every model"),
                       UsageError);
  CHECK_THROWS_WITH_AS(parse_targets("STUDY_TARGET", "101"), doctest::Contains("at most 100"), UsageError);
  CHECK_THROWS_WITH_AS(parse_targets("STUDY_TARGET", "9O"), doctest::Contains("STUDY_TARGET"), UsageError);
  CHECK_THROWS_WITH_AS(parse_targets("STUDY_TARGET", "90,=5"), doctest::Contains("names no model"), UsageError);
}

TEST_CASE("study plan: seed-major order, so a deadline leaves every model a seed") {
  StudySettings s;
  s.devices = {"cpu"}, s.seeds = 2, s.memory_models = {"mlp", "cnn"}, s.decoded_models = {"mlp"};
  s.rows = {"+amp"}, s.decoded_rows = {"+cache-memory"};
  const std::vector<PlannedRun> runs = plan_runs(s, {memory_set(), png_set()});
  REQUIRE(runs.size() == 12);  // 2 seeds x (mlp 2 rows + cnn 2 rows + png mlp 2 rows)
  for (size_t i = 0; i < runs.size(); ++i) CHECK(runs[i].seed == (i < 6 ? 0 : 1));
  CHECK(runs[0].model == "mlp");
  CHECK(runs[0].config.name == "baseline");
  CHECK(runs[2].model == "cnn");
  CHECK(runs[4].set == 1);
  CHECK(runs[5].config.name == "+cache-memory");
}

TEST_CASE(
    "study plan: the estimate grows with epochs and decoding; a summary's epoch times and epochs to target replace the assumptions") {
  StudySettings s;
  s.epochs = 2;
  const PlannedRun base{"cuda", 0, "cnn", memory_configs()[0], 0};
  bool measured = true;
  const double two = estimate_run_seconds(base, memory_set(), s, {}, &measured);
  CHECK_FALSE(measured);
  s.epochs = 4;
  const double four = estimate_run_seconds(base, memory_set(), s, {}, &measured);
  CHECK(four > two);
  // Decoding in the training thread costs time a loader thread takes off it.
  const PlannedRun decoded{"cuda", 1, "cnn", pipeline_configs()[0], 0};
  const PlannedRun prefetched{"cuda", 1, "cnn", pipeline_configs()[1], 0};
  CHECK(estimate_run_seconds(decoded, png_set(), s, {}, nullptr) >
        estimate_run_seconds(prefetched, png_set(), s, {}, nullptr));
  const MeasuredEpochs m{{measured_key("cuda:0", "fashion-mnist", "cnn", "baseline"), 10.0}};
  const double from_run = estimate_run_seconds(base, memory_set(), s, m, &measured);
  CHECK(measured);
  CHECK(from_run > 40);  // 4 epochs of 10 s
  CHECK(from_run < 50);
  // A summary's epochs to the target shorten runs that stop there, for that target only.
  s.stop_at_target = true, s.memory_target = parse_targets("T", "90");
  const EpochsToTarget two_epochs{{target_key("fashion-mnist", "cnn", "baseline", 90), 2}};
  const double stopped = estimate_run_seconds(base, memory_set(), s, m, nullptr, two_epochs);
  CHECK(stopped > 20);
  CHECK(stopped < 25);
  s.memory_target = parse_targets("T", "92");
  CHECK(estimate_run_seconds(base, memory_set(), s, m, nullptr, two_epochs) == doctest::Approx(from_run));
  s.memory_target = parse_targets("T", "90"), s.stop_at_target = false;
  CHECK(estimate_run_seconds(base, memory_set(), s, m, nullptr, two_epochs) == doctest::Approx(from_run));
}

TEST_CASE("study settings: STUDY_ROWS names only rows that exist") {
  ::setenv("STUDY_ROWS", "+amp,+warp-drive", 1);
  CHECK_THROWS_WITH_AS(study_settings_from_env(), doctest::Contains("names no row '+warp-drive'"), UsageError);
  ::setenv("STUDY_ROWS", "+amp", 1);
  ::setenv("STUDY_DECODED_ROWS", "+cache-file,+cosine", 1);  // +cosine is a row of the in-memory sets only
  CHECK_THROWS_WITH_AS(study_settings_from_env(), doctest::Contains("STUDY_DECODED_ROWS names no row '+cosine'"),
                       UsageError);
  ::setenv("STUDY_DECODED_ROWS", "+cache-file", 1);
  ::setenv("STUDY_DEADLINE", "-4", 1);
  CHECK_THROWS_WITH_AS(study_settings_from_env(), doctest::Contains("STUDY_DEADLINE"), UsageError);
  ::unsetenv("STUDY_DEADLINE");
  const StudySettings s = study_settings_from_env();
  CHECK(s.rows == std::vector<std::string>{"+amp"});
  CHECK(s.decoded_rows == std::vector<std::string>{"+cache-file"});
  ::unsetenv("STUDY_ROWS");
  ::unsetenv("STUDY_DECODED_ROWS");
}

TEST_CASE("study settings: STUDY_ROWS is checked against the kinds of data set STUDY_DATA uses") {
  // A row of the in-memory sets alone: on fashion-mnist it is taken; the decoded sets, where STUDY_ROWS
  // would otherwise apply too, run their baseline.
  ::setenv("STUDY_DATA", "fashion-mnist", 1);
  ::setenv("STUDY_ROWS", "+cosine", 1);
  CHECK(study_settings_from_env().rows == std::vector<std::string>{"+cosine"});
  ::unsetenv("STUDY_DATA");  // fashion-mnist and png
  StudySettings s = study_settings_from_env();
  CHECK(s.rows == std::vector<std::string>{"+cosine"});
  CHECK(s.decoded_rows == std::vector<std::string>{"baseline"});
  CHECK(names(table_configs(s, png_set(), "cnn", "cpu")) == std::vector<std::string>{"baseline"});
  // Each kind takes the names that are its rows.
  ::setenv("STUDY_ROWS", "+prefetch,+amp", 1);
  s = study_settings_from_env();
  CHECK(s.rows == std::vector<std::string>{"+amp"});
  CHECK(s.decoded_rows == std::vector<std::string>{"+prefetch", "+amp"});
  // A decoded row with only fashion-mnist in use is no row of it, and the error names STUDY_ROWS.
  ::setenv("STUDY_DATA", "fashion-mnist", 1);
  CHECK_THROWS_WITH_AS(study_settings_from_env(), doctest::Contains("STUDY_ROWS names no row '+prefetch'"), UsageError);
  // STUDY_DECODED_ROWS is checked only where a decoded set runs.
  ::setenv("STUDY_ROWS", "+amp", 1);
  ::setenv("STUDY_DECODED_ROWS", "+cosine", 1);
  CHECK(study_settings_from_env().rows == std::vector<std::string>{"+amp"});
  ::setenv("STUDY_DATA", "png", 1);  // and STUDY_ROWS applies to no set in use
  CHECK_THROWS_WITH_AS(study_settings_from_env(), doctest::Contains("STUDY_DECODED_ROWS names no row '+cosine'"),
                       UsageError);
  for (const char* v : {"STUDY_DATA", "STUDY_ROWS", "STUDY_DECODED_ROWS"}) ::unsetenv(v);
}

TEST_CASE("study settings: counts in their ranges and known models, checked before any run") {
  const std::pair<const char*, const char*> bad[] = {
      {"STUDY_EPOCHS", "0"},
      {"STUDY_SEEDS", "0"},
      {"STUDY_EPOCHS", "99999999999999999999"},
      {"STUDY_SEEDS", "1000000"},
      {"STUDY_SUBSET", "12x"},
      {"STUDY_DEADLINE", " 5"},
      {"STUDY_MODELS", "cnn,foo"},
      {"STUDY_DECODED_MODELS", "gpt"},
      {"STUDY_MODELS", ","},
  };
  const char* says[] = {"STUDY_EPOCHS must be in [1, 1000000], got 0",
                        "STUDY_SEEDS must be in [1, 10000], got 0",
                        "STUDY_EPOCHS must be in [1, 1000000], got 99999999999999999999 (out of range)",
                        "STUDY_SEEDS must be in [1, 10000], got 1000000",
                        "STUDY_SUBSET must be a whole number, got '12x'",
                        "STUDY_DEADLINE must be a whole number",
                        "STUDY_MODELS names no model 'foo'; the models are mlp, cnn",
                        "STUDY_DECODED_MODELS names gpt, which needs text data",
                        "STUDY_MODELS names no model"};
  for (size_t i = 0; i < std::size(bad); ++i) {
    CAPTURE(bad[i].first);
    CAPTURE(bad[i].second);
    ::setenv(bad[i].first, bad[i].second, 1);
    CHECK_THROWS_WITH_AS(study_settings_from_env(), doctest::Contains(says[i]), UsageError);
    ::unsetenv(bad[i].first);
  }
  ::setenv("STUDY_EPOCHS", "1", 1);
  ::setenv("STUDY_SEEDS", "2", 1);
  ::setenv("STUDY_MODELS", "mlp,mobilenet", 1);
  const StudySettings s = study_settings_from_env();
  CHECK(s.epochs == 1);
  CHECK(s.seeds == 2);
  CHECK(s.memory_models == std::vector<std::string>{"mlp", "mobilenet"});
  for (const char* v : {"STUDY_EPOCHS", "STUDY_SEEDS", "STUDY_MODELS"}) ::unsetenv(v);
}

TEST_CASE("mdl-study command line: --help lists the settings; any other argument is refused") {
  CHECK_FALSE(study_wants_help({}));
  CHECK(study_wants_help({"--help"}));
  CHECK(study_wants_help({"-h"}));
  CHECK_THROWS_WITH_AS(study_wants_help({"--dry-run"}),
                       doctest::Contains("takes no argument but --help, got '--dry-run'"), UsageError);
  CHECK_THROWS_WITH_AS(study_wants_help({"--help", "x"}), doctest::Contains("got 'x'"), UsageError);
  for (const char* v :
       {"STUDY_DATA",           "STUDY_EPOCHS",       "STUDY_SUBSET",        "STUDY_MODELS",  "STUDY_DECODED_MODELS",
        "STUDY_ROWS",           "STUDY_DECODED_ROWS", "STUDY_SEEDS",         "STUDY_TARGET",  "STUDY_DECODED_TARGET",
        "STUDY_STOP_AT_TARGET", "STUDY_DEADLINE",     "STUDY_OUT",           "STUDY_DEVICES", "STUDY_COMPARE",
        "STUDY_DUMP_ORDER",     "STUDY_DRY_RUN",      "STUDY_ESTIMATE_FROM", "STUDY_COMMIT",  "STUDY_GPU_NAME",
        "STUDY_FASHION_MNIST"}) {
    CAPTURE(v);
    CHECK(study_usage().find(v) != std::string::npos);
  }
}
