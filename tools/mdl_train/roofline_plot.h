// mdl-train --roofline FILE: the profiled kernels drawn against the machine's ceilings.
#pragma once
#include <string>

#include "profiler/session.h"

namespace mdl::train {

// The kernels of the device that ran them (the GPU's when the session has GPU kernels, else the
// CPU's) that know their FLOPs, each a point sized by its share of the session's time, under the
// roofs of their limits (and the CPU's L2). Throws mdl::Error when `roofline` has no ceilings.
void roofline_png(const std::string& path, const profiler::Session& session, const profiler::RooflineOptions& roofline);

}  // namespace mdl::train
