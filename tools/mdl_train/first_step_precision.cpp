// first_step_precision: run_training's start (seed, data, model, loader), then one report per dtype.
#include "tools/mdl_train/first_step_precision.h"

#include "data/loader.h"
#include "ops/native/factory.h"
#include "tools/mdl_train/setup.h"
#include "train/loss_fn.h"

namespace mdl::train {

FirstStepPrecision first_step_precision(const TrainOptions& o, const std::vector<DType>& dtypes,
                                        const amp::PrecisionOptions& options) {
  manual_seed(o.seed);  // as run_training seeds before building the model
  const Device device = parse_device(o.device);
  const DataBundle d = make_data(o);
  nn::ModulePtr model = make_model(o, d);
  model->to(device);
  TrainOptions plain = o;
  plain.workers = 0, plain.prefetch = 0, plain.cache = "none", plain.pin_memory = false, plain.copy_stream = false;
  data::DataLoader loader(*d.train, make_loader_options(plain, d));
  auto first = loader.begin();
  const Tensor x = first->x.to(device), y = first->y.to(device);
  FirstStepPrecision out{.batch = x.size(0)};
  for (DType dtype : dtypes)
    out.reports.push_back(amp::precision_report(
        *model, x, [&](const Tensor& logits) { return cross_entropy_loss(logits, y); }, dtype, options));
  return out;
}

}  // namespace mdl::train
