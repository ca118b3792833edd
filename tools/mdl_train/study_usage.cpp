// study_usage and study_wants_help: mdl-study's whole command line.
#include "tools/mdl_train/study_usage.h"

#include "tools/mdl_train/options.h"

namespace mdl::train {

std::string study_usage() {
  return R"(usage: mdl-study [--help]
  Runs the optimization study: a baseline training run, then the same run with one optimization
  after another, then all together, each over several seeds; writes STUDY_OUT/study.md, the
  per-run CSV logs, PNG charts and STUDY_OUT/study/summary.csv. It takes no other arguments:
  the environment steers it.
  STUDY_DATA            data sets, comma-separated: fashion-mnist, png, imagefolder:PATH,
                        cifar10:PATH (default fashion-mnist,png; png is Fashion-MNIST exported once
                        as PNG files, decoded and augmented every epoch)
  STUDY_FASHION_MNIST   the Fashion-MNIST IDX files' folder, for both fashion-mnist and png
  STUDY_EPOCHS          epochs per run (default 3, at least 1)
  STUDY_SUBSET          training samples (default 20000; 0 = all; for png, the samples exported)
  STUDY_MODELS          zoo models on fashion-mnist (default cnn)
  STUDY_DECODED_MODELS  zoo models on the decoded sets (default mlp,cnn)
  STUDY_ROWS            the rows to run besides the baseline (default all); on the decoded sets too,
                        where they are rows of theirs, unless STUDY_DECODED_ROWS is set
  STUDY_DECODED_ROWS    the rows to run besides the baseline on the decoded sets
  STUDY_SEEDS           runs per row (default 3, at least 1)
  STUDY_TARGET          the validation accuracy in % a run's time is measured to (default 85;
                        "90,vit=85" gives a model its own)
  STUDY_DECODED_TARGET  the same for the decoded, augmented sets (default 80)
  STUDY_STOP_AT_TARGET  1: a run ends at the first epoch that reached its target (default 0)
  STUDY_DEADLINE        seconds: no run starts later; the report says how many seeds each row got
                        (default 0: none)
  STUDY_OUT             the output folder (default reports; the PNG export goes to
                        STUDY_OUT/fashion-mnist-png-N)
  STUDY_DEVICES         devices, comma-separated (default cpu, and cuda when a GPU is present)
  STUDY_COMPARE         another run's summary.csv (the CPU half of a GPU study), set beside this one's
  STUDY_DUMP_ORDER      1: the fashion-mnist baselines write their sample orders to study/orders/
  STUDY_DRY_RUN         1: print the runs and their estimated time, run nothing
  STUDY_ESTIMATE_FROM   a summary.csv whose s/epoch the dry run's estimate uses
  STUDY_COMMIT, STUDY_GPU_NAME   the commit and the GPU's name, for the summary
)";
}

bool study_wants_help(const std::vector<std::string>& args) {
  if (args.empty()) return false;
  if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h")) return true;
  const std::string& bad = args.size() > 1 && (args[0] == "--help" || args[0] == "-h") ? args[1] : args[0];
  throw UsageError("mdl-study: takes no argument but --help, got '" + bad +
                   "'; the STUDY_* environment variables steer it (mdl-study --help lists them)");
}

}  // namespace mdl::train
