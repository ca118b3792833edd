// callbacks_from_options: one callback per option given.
#include "tools/mdl_train/option_callbacks.h"

namespace mdl::train {

OptionCallbacks callbacks_from_options(const TrainOptions& o) {
  OptionCallbacks c;
  if (!o.save_best.empty()) c.list.items.push_back(std::make_shared<CheckpointBest>(o.save_best, "val_loss"));
  if (o.plateau)
    c.list.items.push_back(
        std::make_shared<ReduceLROnPlateau>("val_loss", optim::ReduceLROnPlateauOptions{.patience = o.plateau}));
  if (o.target_accuracy > 0) {
    c.target = std::make_shared<TimeToTarget>(o.target_accuracy, "val_accuracy");
    c.list.items.push_back(c.target);
  }
  if (o.early_stop)
    c.list.items.push_back(
        std::make_shared<EarlyStopping>(EarlyStoppingOptions{.monitor = "val_loss", .patience = o.early_stop}));
  return c;
}

}  // namespace mdl::train
