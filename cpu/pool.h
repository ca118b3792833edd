// The CPU pooling kernels' switch (cpu/pool.cpp).
#pragma once

namespace mdl::cpu {

// Whether the 2x2 / stride 2 max pool on f32 runs on 4-float vectors (default true); false runs
// the scalar loop, for benchmarks and cross-checks.
void set_max_pool_vectorized(bool on);
bool max_pool_vectorized();

}  // namespace mdl::cpu
