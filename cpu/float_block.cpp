// The switch of cpu/float_block.h: bulk (F16C, vectorised) or per-element 16-bit conversion.
#include "cpu/float_block.h"

#include <atomic>

namespace mdl::cpu {

namespace {
std::atomic<bool> g_bulk_half_conversion{true};
}

void set_bulk_half_conversion(bool on) { g_bulk_half_conversion.store(on, std::memory_order_relaxed); }
bool bulk_half_conversion() { return g_bulk_half_conversion.load(std::memory_order_relaxed); }

}  // namespace mdl::cpu
