// Denormal floats on the CPU (the flush_denormal toggle, switches/list/toggles.h). x86 cores take a slow path (tens to hundreds of cycles) for every
// operation that reads or produces a value below 2^-126 (f32) or 2^-1022 (f64), and late in
// training the gradients and Adam's moments drift there. With flush_denormal on (the default, as
// TensorFlow runs its CPU kernels; torch.set_flush_denormal(True) in PyTorch) such values are read
// and written as zero (MXCSR's DAZ and FTZ bits) on every thread that runs mdl's kernels.
#pragma once

namespace mdl {

// Applies the setting to the calling thread when it changed since this thread last applied it: a
// relaxed atomic load and a compare otherwise. parallel_for and the GEMM call it on every thread
// they run on.
void sync_float_mode();

}  // namespace mdl
