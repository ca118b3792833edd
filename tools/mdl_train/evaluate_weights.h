// mdl-train --evaluate FILE: the weights a --save wrote, loaded into the model (every entry checked
// before any is applied), then one timed pass over the held-out split in eval mode, without
// gradients, under the run's autocast. `samples`: how many the loader holds.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/loader.h"
#include "nn/module.h"
#include "train/validate.h"

namespace mdl::train {

struct Evaluation {
  Validation result;
  int64_t samples = 0;
  double seconds = 0;  // the pass alone, not the loading
  double images_per_second() const { return seconds > 0 ? double(samples) / seconds : 0.0; }
};

Evaluation evaluate_weights(const std::string& path, nn::Module& model, data::DataLoader& loader, int64_t samples,
                            Device device, const amp::AmpConfig& amp, int64_t classes,
                            const std::vector<std::string>& names);

}  // namespace mdl::train
