// Puts the CPU kernels into the stubs' CPU slots, once, from the kernel table.
#include <mutex>

#include "cpu/kernels.h"

namespace mdl::kernels {

void ensure_kernels_registered() {
  static std::once_flag once;
  std::call_once(once, [] { MDL_ALL_KERNELS(MDL_SET_CPU_SLOT) });
}

}  // namespace mdl::kernels
