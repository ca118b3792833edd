// Hybrid precision: marking modules, and the f32 forward that Module::operator() runs for them.
#include "amp/keep_f32.h"

#include "amp/autocast.h"
#include "tensor/error.h"
#include "tensor/ops.h"

namespace mdl::amp {

void keep_f32(nn::Module& m, bool on) { m.set_keep_f32(on); }

int64_t keep_f32_type(nn::Module& root, const std::string& type_name) {
  int64_t n = 0;
  for (auto& [name, m] : root.named_modules())
    if (m->type_name() == type_name) {
      m->set_keep_f32(true);
      ++n;
    }
  MDL_CHECK(n > 0, "amp::keep_f32_type: no module of type '", type_name, "' in ", root.type_name());
  return n;
}

namespace detail {
Tensor forward_f32(nn::Module& m, const Tensor& x) {
  AutocastGuard off(kF16, /*enabled=*/false);
  const bool low = x.defined() && (x.dtype() == kF16 || x.dtype() == kBF16);
  return m.forward(low ? to_dtype(x, kF32) : x);
}
}  // namespace detail

}  // namespace mdl::amp
