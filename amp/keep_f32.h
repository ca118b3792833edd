// Hybrid precision: modules kept in f32 under autocast, e.g. the final classifier or the
// normalisation layers. A marked module's forward runs with autocast off and its 16-bit input
// cast to f32, so every op inside it, and in its children, computes in f32. The mark acts where
// the module is called through operator(), as every container and model in nn calls its children.
#pragma once
#include <cstdint>
#include <string>

#include "nn/module.h"

namespace mdl::amp {

// Keeps m (with everything below it) in f32 under autocast, or clears the mark.
void keep_f32(nn::Module& m, bool on = true);
// Marks every module at or below root whose type_name() is type_name ("BatchNorm2d", "LayerNorm",
// "Linear", ...); returns how many were marked. Throws when none is of that type.
int64_t keep_f32_type(nn::Module& root, const std::string& type_name);

}  // namespace mdl::amp
