// Hybrid precision: marking modules (Module::operator() runs a marked module in f32, nn/module.cpp).
#include "amp/keep_f32.h"

#include "tensor/error.h"

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

}  // namespace mdl::amp
