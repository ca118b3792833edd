// Learning-rate schedules, as torch.optim.lr_scheduler: each sets every group's lr from its
// closed form at the current epoch (step count), so resuming only needs last_epoch. StepLR,
// CosineAnnealingLR, CosineAnnealingWarmRestarts, LinearWarmup (chained to any schedule),
// OneCycleLR; ReduceLROnPlateau reacts to a metric instead.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "optim/optimizer.h"

namespace mdl::optim {

// Base: remembers each group's lr at construction (base_lrs) and sets lr = lr_at(epoch, base)
// on construction (epoch 0) and on each step().
class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  void step();                    // epoch += 1, then sets the lrs
  void set_epoch(int64_t epoch);  // jumps to `epoch` (resume)
  int64_t last_epoch() const { return epoch_; }
  std::vector<double> get_last_lr() const;
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  virtual double lr_at(int64_t epoch, double base_lr) const = 0;

 protected:
  explicit LRScheduler(Optimizer& opt);
  void apply();  // called by the most derived constructor

  Optimizer& opt_;
  std::vector<double> base_lrs_;
  int64_t epoch_ = 0;
};

// base * gamma^floor(epoch / step_size).
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& opt, int64_t step_size, double gamma = 0.1);
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  int64_t step_size_;
  double gamma_;
};

// eta_min + (base - eta_min) * (1 + cos(pi * epoch / T_max)) / 2.
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& opt, int64_t T_max, double eta_min = 0.0);
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  int64_t T_max_;
  double eta_min_;
};

// SGDR: cosine from base to eta_min over T_i epochs, then restart at base; T_0 first, each next
// period T_mult times longer: restarts at T_0, T_0 + T_0 T_mult, ...
class CosineAnnealingWarmRestarts : public LRScheduler {
 public:
  CosineAnnealingWarmRestarts(Optimizer& opt, int64_t T_0, int64_t T_mult = 1, double eta_min = 0.0);
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  int64_t T_0_, T_mult_;
  double eta_min_;
};

// Linear warmup from start_factor * base to base over warmup_steps epochs, then `after`
// (any schedule built on the same optimizer, before this one) from its epoch 0; constant base
// when `after` is null.
class LinearWarmup : public LRScheduler {
 public:
  LinearWarmup(Optimizer& opt, int64_t warmup_steps, double start_factor = 0.0,
               std::shared_ptr<LRScheduler> after = nullptr);
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  int64_t warmup_;
  double start_factor_;
  std::shared_ptr<LRScheduler> after_;
};

// One cycle (cosine annealing, as torch's default): from max_lr / div_factor up to max_lr over
// the first pct_start of total_steps, then down to max_lr / (div_factor * final_div_factor).
// Ignores the groups' initial lr; momentum cycling is not done.
class OneCycleLR : public LRScheduler {
 public:
  OneCycleLR(Optimizer& opt, double max_lr, int64_t total_steps, double pct_start = 0.3, double div_factor = 25.0,
             double final_div_factor = 1e4);
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  double max_lr_, initial_lr_, min_lr_;
  double up_end_, total_end_;
};

// Multiplies every group's lr by factor when the metric has not improved (relative threshold)
// for more than `patience` steps, then waits `cooldown` steps; never below min_lr.
struct ReduceLROnPlateauOptions {
  bool mode_max = false;  // false: lower is better (a loss)
  double factor = 0.1;
  int64_t patience = 10;
  double threshold = 1e-4;  // relative, as torch's threshold_mode "rel"
  int64_t cooldown = 0;
  double min_lr = 0.0;
  double eps = 1e-8;  // changes smaller than this are ignored
};
class ReduceLROnPlateau {
 public:
  explicit ReduceLROnPlateau(Optimizer& opt, ReduceLROnPlateauOptions options = {});
  void step(double metric);
  int64_t num_bad_epochs() const { return bad_; }
  // What step() carries from one call to the next, for a checkpoint; set_state refuses a
  // negative count.
  struct State {
    double best;
    int64_t bad_epochs, cooldown_left;
  };
  State state() const { return {best_, bad_, cooldown_left_}; }
  void set_state(const State& s);

 private:
  Optimizer& opt_;
  ReduceLROnPlateauOptions o_;
  double best_;
  int64_t bad_ = 0, cooldown_left_ = 0;
};

}  // namespace mdl::optim
