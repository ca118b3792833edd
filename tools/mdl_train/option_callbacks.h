// mdl-train's callbacks, made from its options: --early-stop, --save-best, --plateau and
// --target-accuracy, each watching the validation loss or accuracy.
#pragma once
#include <memory>

#include "train/callback.h"
#include "train/builtin_callbacks.h"
#include "tools/mdl_train/options.h"

namespace mdl::train {

struct OptionCallbacks {
  CallbackList list;                     // empty when none of the options is given
  std::shared_ptr<TimeToTarget> target;  // with --target-accuracy
};

OptionCallbacks callbacks_from_options(const TrainOptions& o);

}  // namespace mdl::train
