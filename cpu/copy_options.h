// Switches of the CPU copy kernel (cpu/copy.cpp), for benchmarks and cross-checks.
#pragma once

namespace mdl::cpu {

// Whether a transposed matrix is copied in cache-sized tiles (default true); false copies it row by row.
void set_tiled_transpose(bool on);
bool tiled_transpose();

}  // namespace mdl::cpu
