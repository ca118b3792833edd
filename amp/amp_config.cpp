// parse_amp: the three spellings of AmpConfig.
#include "amp/amp_config.h"

#include "tensor/error.h"

namespace mdl::amp {

AmpConfig parse_amp(const std::string& name) {
  if (name == "none") return {kF32};
  if (name == "f16") return {kF16};
  if (name == "bf16") return {kBF16};
  MDL_FAIL("unknown mixed precision '", name, "'; choose none, f16 or bf16");
}

}  // namespace mdl::amp
