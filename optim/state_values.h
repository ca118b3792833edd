// Reading the numbers of a saved training state strictly (the optimizer's and the GradScaler's
// load_state_dict): a one-element tensor holding a finite value, a count that is a whole number
// in range, an index written as plain decimal digits. Anything else is an mdl::Error naming the
// entry, never a value cast out of range.
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "tensor/tensor.h"

namespace mdl::optim {

// The value of a one-element tensor of any dtype, which must be finite. `what` names the entry
// in the error ("AdamW.load_state_dict: \"step\"").
double finite_value(const Tensor& t, const std::string& what);

// A whole number in [lo, hi]: an integer tensor's value, or a floating one's when it is finite
// and integral.
int64_t count_value(const Tensor& t, const std::string& what, int64_t lo = 0,
                    int64_t hi = std::numeric_limits<int64_t>::max());

// "12" -> 12; -1 for empty, signed, spaced, non-digit or out-of-range text.
int64_t parse_index(std::string_view text);

}  // namespace mdl::optim
