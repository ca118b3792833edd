// mdl-train: trains a zoo model on a dataset with the optimizations switched on or off by
// options (see `mdl-train --help`). Exit status: 0 done, 1 failed, 2 bad options.
#include <unistd.h>

#include <cstdio>

#include "cpu/gemm.h"
#include "tools/mdl_train/cpu_amp_note.h"
#include "tools/mdl_train/options.h"
#include "train/progress.h"
#include "tools/mdl_train/run_training.h"
#ifdef MDL_WITH_MPI
#include "dist/mpi_group.h"
#endif

int main(int argc, char** argv) {
  using namespace mdl::train;
  TrainOptions o;
  try {
    o = parse_train_options(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s\n\n%s", e.what(), usage().c_str());
    return 2;
  }
  if (o.help) {
    std::printf("%s", usage().c_str());
    return 0;
  }
  try {
    // The progress bar redraws on stderr when stdout and stderr are both a terminal (and run_training
    // draws it when its output is stderr); otherwise plain lines on stdout.
    const bool bar = draws_progress_bar(o, isatty(fileno(stdout)), isatty(fileno(stderr)));
    std::FILE* out = bar ? stderr : stdout;
    TrainReport r = run_training(o, out);
    if (r.rank != 0) return 0;  // --dist: rank 0 alone reports
    std::fprintf(out, "\n%s: %lld parameters, %s in all", o.model.c_str(), (long long)r.parameters,
                 format_seconds(r.total_seconds).c_str());
    if (o.device == "cpu") std::fprintf(out, ", CPU GEMM micro-kernel %s", mdl::cpu::gemm_f32_kernel_name());
    std::fprintf(out, "\n");
    if (o.device == "cpu" && (o.amp == "f16" || o.amp == "bf16"))
      std::fprintf(out, "%s\n", mdl::train::cpu_amp_note(o.amp).c_str());
    if (!r.confusion.empty())
      std::fprintf(out, "confusion matrix (rows: true class, columns: predicted):\n%s", r.confusion.c_str());
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s\n\n%s", e.what(), usage().c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mdl-train: %s\n", e.what());
#ifdef MDL_WITH_MPI
    if (o.dist) mdl::dist::abort_all(1);  // the other ranks would wait for this one forever
#endif
    return 1;
  }
  return 0;
}
