// Grad mode's flag: one per thread, on by default, read and set through GradMode.
#include "tensor/grad_mode.h"

namespace mdl {

namespace {
thread_local bool g_grad_enabled = true;
}  // namespace

bool GradMode::is_enabled() { return g_grad_enabled; }
void GradMode::set_enabled(bool e) { g_grad_enabled = e; }

}  // namespace mdl
