// The CPU backend's kernels: one per entry of the kernel table (kernels/all.h), declared from it;
// cpu/register.cpp puts them into the stubs' CPU slots.
#pragma once
#include "kernels/all.h"

namespace mdl::cpu {
MDL_ALL_KERNELS(MDL_DECLARE_KERNEL)
}  // namespace mdl::cpu
