// The switch of cpu/float_block.h: bulk (F16C, vectorised) or per-element 16-bit conversion.
#include "cpu/float_block.h"

#include <atomic>

namespace mdl::cpu {

namespace {}


}  // namespace mdl::cpu
