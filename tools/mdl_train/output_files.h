// mdl-train's output files checked before the run: a file that --save, --save-best or --trace
// (with --profile) would write only after an epoch or the profiled steps is test-created in its
// folder first, so an unwritable path fails at start-up instead of after the compute.
#pragma once
#include "tools/mdl_train/options.h"

namespace mdl::train {

// Throws mdl::Error naming the option and the path when its folder cannot take a new file, or
// the path is a folder.
void check_output_files_creatable(const TrainOptions& o);

}  // namespace mdl::train
