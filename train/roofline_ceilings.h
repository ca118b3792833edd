// This machine's roofline ceilings: measured (the CPU's by cpu/roofline_probe.h; a GPU's by large
// matmuls through mdl's cuBLAS path and a large device copy), saved as JSON (profiler/roofline.h)
// beside the build, and reused by later runs: mdl-roofline and mdl-train --profile.
#pragma once
#include <string>

#include "profiler/roofline.h"

namespace mdl::train {

struct MeasureOptions {
  double seconds = 0.02;  // about this long per timed try of each ceiling (cpu/roofline_probe.h)
  int tries = 10;
  bool gpu = true;  // measure cuda:0 too when the build has CUDA and a device is present
};

profiler::Ceilings measure_ceilings(const MeasureOptions& options = {});

// Whether this run has a GPU the ceilings should cover (a CUDA build with a device present).
bool gpu_present();

// The ceilings in `path`, checked against this machine and thread count (and, with gpu, measured
// with a GPU): an mdl::Error when the file is corrupt or was measured elsewhere, naming the fix.
profiler::Ceilings checked_ceilings(const std::string& path, bool gpu);

// The ceilings in `path`, checked against this machine and thread count (an mdl::Error when the
// file is corrupt or was measured elsewhere, naming the fix); when the file does not exist, or with
// refresh, they are measured now and saved there. *measured tells which happened.
profiler::Ceilings ceilings_for_this_machine(const std::string& path, bool refresh = false, bool* measured = nullptr,
                                             const MeasureOptions& options = {});

}  // namespace mdl::train
