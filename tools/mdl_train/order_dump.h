// --dump-order FILE: every epoch's sample order as the training loader will draw it, as raw
// native-endian int64 (epochs x samples), so bench/compare_torch.py trains PyTorch on the same order.
#pragma once
#include <cstdint>
#include <string>

#include "data/loader.h"

namespace mdl::train {

void dump_epoch_orders(const std::string& path, const data::DataLoader& loader, int64_t epochs);

}  // namespace mdl::train
