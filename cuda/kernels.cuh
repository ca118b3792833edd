// The CUDA backend's kernels: one per entry of the kernel table (kernels/all.h) not marked
// CPU_ONLY, declared from it; cuda/register.cu puts them into the stubs' CUDA slots.
#pragma once
#include "kernels/all.h"

namespace mdl::cuda {
MDL_ALL_KERNELS(MDL_DECLARE_KERNEL)
}  // namespace mdl::cuda
