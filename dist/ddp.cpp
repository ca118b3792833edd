// DistributedDataParallel: bucket assignment, the per-gradient hook that fills buckets and starts
// their all_reduce in bucket order, the wait that writes averages back, and the shared inf verdict.
#include "dist/ddp.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "tensor/grad_mode.h"
#include "autograd/hooks.h"
#include "dist/replica_state.h"
#include "tensor/error.h"
#include "ops/native/factory.h"

namespace mdl::dist {

DistributedDataParallel::DistributedDataParallel(nn::ModulePtr module, ProcessGroup& group, DdpOptions options)
    : module_(std::move(module)), group_(group), opt_(options) {
  MDL_CHECK(module_ != nullptr, "DistributedDataParallel: the module is null");
  MDL_CHECK(opt_.bucket_cap_mb > 0 && std::isfinite(opt_.bucket_cap_mb),
            "DistributedDataParallel: bucket_cap_mb must be a positive finite number of MiB, got ", opt_.bucket_cap_mb);
  NoGradGuard no_grad;
  check_same_model(*module_, group_);
  // Every rank starts from rank 0's weights and buffers.
  for (const auto& [name, t] : module_->state_dict()) broadcast_any_layout(group_, t, 0);

  std::unordered_set<const TensorImpl*> seen;  // a shared (tied) parameter is reduced once
  for (const auto& [name, p] : module_->named_parameters())
    if (p.requires_grad() && seen.insert(p.impl()).second) slots_.push_back({p, name});
  std::reverse(slots_.begin(), slots_.end());  // backward finishes the last layers first

  // A cap beyond any model's size means one bucket (per dtype and device); clamped before the conversion.
  const double cap = std::min(opt_.bucket_cap_mb * 1024 * 1024, 0x1p62);
  const int64_t cap_bytes = std::max<int64_t>(1, int64_t(cap));
  int64_t bucket_bytes = 0;
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    MDL_CHECK(s.param.dtype() == kF32 || s.param.dtype() == kF64, "DistributedDataParallel: parameter '", s.name,
              "' is ", s.param.dtype(), "; gradients are averaged in f32 or f64 (keep f32 master weights)");
    const bool fresh = buckets_.empty() || bucket_bytes + int64_t(s.param.nbytes()) > cap_bytes ||
                       slots_[buckets_.back().slots.front()].param.dtype() != s.param.dtype() ||
                       slots_[buckets_.back().slots.front()].param.device() != s.param.device();
    if (fresh) {
      buckets_.emplace_back();
      bucket_bytes = 0;
    }
    Bucket& b = buckets_.back();
    s.bucket = int64_t(buckets_.size()) - 1;
    s.offset = bucket_bytes / int64_t(s.param.element_size());
    b.slots.push_back(i);
    bucket_bytes += int64_t(s.param.nbytes());
  }
  for (Bucket& b : buckets_) {
    int64_t n = 0;
    for (size_t i : b.slots) n += slots_[i].param.numel();
    const Tensor& p0 = slots_[b.slots.front()].param;
    b.flat = zeros({n}, TensorOptions(p0.dtype(), p0.device()));
    b.pending = int64_t(b.slots.size());
  }
  ready_.assign(slots_.size(), false);
  for (size_t i = 0; i < slots_.size(); ++i)
    hooks_.push_back(
        autograd::register_post_accumulate_grad_hook(slots_[i].param, [this, i](const Tensor&) { on_grad_ready(i); }));
}

DistributedDataParallel::~DistributedDataParallel() {
  for (uint64_t h : hooks_) autograd::remove_post_accumulate_grad_hook(h);
}

std::vector<int64_t> DistributedDataParallel::bucket_numels() const {
  std::vector<int64_t> n;
  for (const Bucket& b : buckets_) n.push_back(b.flat.numel());
  return n;
}

void DistributedDataParallel::before_forward() {
  if (ready_count_ > 0) wait();  // a synchronised backward left unfinished: name what was missing
  if (opt_.broadcast_buffers && group_.world_size() > 1 && module_->is_training()) {
    NoGradGuard no_grad;
    for (const auto& [name, b] : module_->named_buffers()) broadcast_any_layout(group_, b, 0);
  }
}

Tensor DistributedDataParallel::forward(const Tensor& x) {
  before_forward();
  return (*module_)(x);
}

void DistributedDataParallel::on_grad_ready(size_t i) {
  if (!sync_) return;
  Slot& s = slots_[i];
  MDL_CHECK(!ready_[i], "DistributedDataParallel: the gradient of '", s.name,
            "' became ready twice in one synchronised backward (a second backward before the first finished?)");
  ready_[i] = true;
  ++ready_count_;
  Bucket& b = buckets_[size_t(s.bucket)];
  Tensor slice = b.flat.narrow(0, s.offset, s.param.numel());
  if (const Tensor g = s.param.grad(); g.defined()) slice.copy_(g.reshape({-1}));
  else slice.zero_();  // reached, but no gradient flowed: it counts as zero
  --b.pending;
  launch_ready_buckets();
  for (int64_t k = 0; k < next_launch_; ++k) buckets_[size_t(k)].work->test();  // drives MPI's progress
  if (ready_count_ == int64_t(slots_.size())) wait();
}

// Buckets start strictly in index order, the same order on every rank.
void DistributedDataParallel::launch_ready_buckets() {
  while (next_launch_ < int64_t(buckets_.size()) && buckets_[size_t(next_launch_)].pending == 0) {
    Bucket& b = buckets_[size_t(next_launch_++)];
    b.work = group_.all_reduce_async(b.flat, ReduceOp::Average);
    ++reduces_started_;
    if (ready_count_ < int64_t(slots_.size())) ++early_reduces_;
  }
}

void DistributedDataParallel::wait() {
  if (ready_count_ == 0) return;
  if (ready_count_ < int64_t(slots_.size())) {
    std::string missing;
    for (size_t i = 0; i < slots_.size(); ++i)
      if (!ready_[i]) missing += (missing.empty() ? "'" : ", '") + slots_[i].name + "'";
    // The buckets that did start were started alike on every rank: finish them before the buffers
    // are reused (an abandoned all_reduce would still write into them during the next backward).
    for (int64_t k = 0; k < next_launch_; ++k) buckets_[size_t(k)].work->wait();
    reset_for_next_backward();
    MDL_FAIL("DistributedDataParallel: these parameters got no gradient in the last synchronised backward: ", missing,
             " (every rank must reduce every bucket; give them a gradient or set requires_grad false)");
  }
  NoGradGuard no_grad;
  for (Bucket& b : buckets_) {
    b.work->wait();
    for (size_t i : b.slots) {
      const Slot& s = slots_[i];
      const Tensor average = b.flat.narrow(0, s.offset, s.param.numel()).view(s.param.shape());
      if (s.param.grad().defined()) s.param.grad().copy_(average);
      else s.param.set_grad(average.clone());
    }
  }
  reset_for_next_backward();
}

void DistributedDataParallel::reset_for_next_backward() {
  for (Bucket& b : buckets_) {
    b.pending = int64_t(b.slots.size());
    b.work.reset();
  }
  std::fill(ready_.begin(), ready_.end(), false);
  ready_count_ = 0;
  next_launch_ = 0;
}

void sync_found_inf(amp::GradScaler& scaler, ProcessGroup& group) {
  scaler.set_found_inf_reduction([&group](const Tensor& found_inf) {
    // NCCL reduces the flag where it lives, on the GPU; MPI reduces a copy on the host.
    if (group.backend() == "nccl") return group.all_reduce(found_inf, ReduceOp::Max);
    const Tensor host = found_inf.cpu();
    group.all_reduce(host, ReduceOp::Max);
    Tensor(found_inf).copy_(host);  // a handle: writes the scaler's flag
  });
}

}  // namespace mdl::dist
