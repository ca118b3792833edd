// What autocast can buy on this CPU, in one sentence for mdl-train's closing line and mdl-study's
// tables: whether f16 or bf16 is multiplied in 16 bits here, and by which kernel, or why not.
#pragma once
#include <string>

namespace mdl::train {

// amp: "f16" or "bf16"; any other value gives "".
std::string cpu_amp_note(const std::string& amp);

}  // namespace mdl::train
