// The schedules' closed forms and ReduceLROnPlateau's bookkeeping.
#include "optim/schedulers.h"

#include <cmath>
#include <limits>
#include <numbers>

#include "tensor/error.h"

namespace mdl::optim {

LRScheduler::LRScheduler(Optimizer& opt) : opt_(opt) {
  for (auto& g : opt.param_groups()) {
    if (std::isnan(g.initial_lr)) g.initial_lr = g.lr;
    base_lrs_.push_back(g.initial_lr);
  }
}

void LRScheduler::apply() {
  auto& groups = opt_.param_groups();
  MDL_CHECK(groups.size() == base_lrs_.size(), "LRScheduler: the optimizer has ", groups.size(),
            " groups, the scheduler was built for ", base_lrs_.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    const double lr = lr_at(epoch_, base_lrs_[g]);
    MDL_CHECK(std::isfinite(lr) && lr >= 0, "LRScheduler: epoch ", epoch_, " gives group ", g, " the lr ", lr,
              " (expected a finite number >= 0; check the schedule's factors)");
    groups[g].lr = lr;
  }
}

void LRScheduler::step() {
  ++epoch_;
  apply();
}

void LRScheduler::set_epoch(int64_t epoch) {
  MDL_CHECK(epoch >= 0, "LRScheduler: set_epoch(", epoch, "): the epoch must be >= 0");
  epoch_ = epoch;
  apply();
}

std::vector<double> LRScheduler::get_last_lr() const {
  std::vector<double> lrs;
  for (const auto& g : opt_.param_groups()) lrs.push_back(g.lr);
  return lrs;
}

StepLR::StepLR(Optimizer& opt, int64_t step_size, double gamma)
    : LRScheduler(opt), step_size_(step_size), gamma_(gamma) {
  MDL_CHECK(step_size > 0, "StepLR: step_size must be positive, got ", step_size);
  apply();
}
double StepLR::lr_at(int64_t epoch, double base_lr) const {
  return base_lr * std::pow(gamma_, double(epoch / step_size_));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& opt, int64_t T_max, double eta_min)
    : LRScheduler(opt), T_max_(T_max), eta_min_(eta_min) {
  MDL_CHECK(T_max > 0, "CosineAnnealingLR: T_max must be positive, got ", T_max);
  apply();
}
double CosineAnnealingLR::lr_at(int64_t epoch, double base_lr) const {
  return eta_min_ + (base_lr - eta_min_) * (1 + std::cos(std::numbers::pi * double(epoch) / double(T_max_))) / 2;
}

CosineAnnealingWarmRestarts::CosineAnnealingWarmRestarts(Optimizer& opt, int64_t T_0, int64_t T_mult, double eta_min)
    : LRScheduler(opt), T_0_(T_0), T_mult_(T_mult), eta_min_(eta_min) {
  MDL_CHECK(T_0 > 0, "CosineAnnealingWarmRestarts: T_0 must be positive, got ", T_0);
  MDL_CHECK(T_mult >= 1, "CosineAnnealingWarmRestarts: T_mult must be at least 1, got ", T_mult);
  apply();
}
double CosineAnnealingWarmRestarts::lr_at(int64_t epoch, double base_lr) const {
  int64_t t_cur = epoch, t_i = T_0_;
  if (T_mult_ == 1) t_cur %= T_0_;
  else
    while (t_cur >= t_i) {
      t_cur -= t_i;
      t_i *= T_mult_;
    }
  return eta_min_ + (base_lr - eta_min_) * (1 + std::cos(std::numbers::pi * double(t_cur) / double(t_i))) / 2;
}

LinearWarmup::LinearWarmup(Optimizer& opt, int64_t warmup_steps, double start_factor,
                           std::shared_ptr<LRScheduler> after)
    : LRScheduler(opt), warmup_(warmup_steps), start_factor_(start_factor), after_(std::move(after)) {
  MDL_CHECK(warmup_steps >= 0, "LinearWarmup: warmup_steps must be >= 0, got ", warmup_steps);
  MDL_CHECK(start_factor >= 0 && start_factor <= 1, "LinearWarmup: start_factor must be in [0, 1], got ", start_factor);
  if (after_) base_lrs_ = after_->base_lrs();
  apply();
}
double LinearWarmup::lr_at(int64_t epoch, double base_lr) const {
  if (epoch < warmup_) return base_lr * (start_factor_ + (1 - start_factor_) * double(epoch) / double(warmup_));
  return after_ ? after_->lr_at(epoch - warmup_, base_lr) : base_lr;
}

OneCycleLR::OneCycleLR(Optimizer& opt, double max_lr, int64_t total_steps, double pct_start, double div_factor,
                       double final_div_factor)
    : LRScheduler(opt), max_lr_(max_lr), initial_lr_(max_lr / div_factor),
      min_lr_(max_lr / div_factor / final_div_factor), up_end_(pct_start * double(total_steps) - 1),
      total_end_(double(total_steps) - 1) {
  MDL_CHECK(std::isfinite(max_lr) && max_lr > 0, "OneCycleLR: max_lr must be a finite number > 0, got ", max_lr);
  MDL_CHECK(std::isfinite(div_factor) && div_factor > 0, "OneCycleLR: div_factor must be a finite number > 0, got ",
            div_factor);
  MDL_CHECK(std::isfinite(final_div_factor) && final_div_factor > 0,
            "OneCycleLR: final_div_factor must be a finite number > 0, got ", final_div_factor);
  MDL_CHECK(total_steps > 1, "OneCycleLR: total_steps must be > 1, got ", total_steps);
  MDL_CHECK(pct_start > 0 && pct_start < 1, "OneCycleLR: pct_start must be in (0, 1), got ", pct_start);
  apply();
}
double OneCycleLR::lr_at(int64_t epoch, double) const {
  auto anneal = [](double start, double end, double pct) {
    return end + (start - end) / 2 * (1 + std::cos(std::numbers::pi * pct));
  };
  double s = double(epoch);
  if (s <= up_end_) return anneal(initial_lr_, max_lr_, up_end_ > 0 ? s / up_end_ : 1.0);
  return anneal(max_lr_, min_lr_, std::min(1.0, (s - up_end_) / (total_end_ - up_end_)));
}

ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& opt, ReduceLROnPlateauOptions options)
    : opt_(opt), o_(options),
      best_(options.mode_max ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity()) {
  MDL_CHECK(o_.factor < 1 && o_.factor >= 0, "ReduceLROnPlateau: factor must be in [0, 1), got ", o_.factor);
}

void ReduceLROnPlateau::set_state(const State& s) {
  MDL_CHECK(s.bad_epochs >= 0 && s.cooldown_left >= 0, "ReduceLROnPlateau::set_state: negative counts (", s.bad_epochs,
            " bad epochs, ", s.cooldown_left, " cooldown)");
  best_ = s.best, bad_ = s.bad_epochs, cooldown_left_ = s.cooldown_left;
}

void ReduceLROnPlateau::step(double metric) {
  bool better = o_.mode_max ? metric > best_ * (1 + o_.threshold) : metric < best_ * (1 - o_.threshold);
  if (better) {
    best_ = metric;
    bad_ = 0;
  } else {
    ++bad_;
  }
  if (cooldown_left_ > 0) {
    --cooldown_left_;
    bad_ = 0;
  }
  if (bad_ > o_.patience) {
    for (auto& g : opt_.param_groups()) {
      double lr = std::max(g.lr * o_.factor, o_.min_lr);
      if (g.lr - lr > o_.eps) g.lr = lr;
    }
    cooldown_left_ = o_.cooldown;
    bad_ = 0;
  }
}

}  // namespace mdl::optim
