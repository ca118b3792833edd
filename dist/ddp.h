// DistributedDataParallel: data-parallel training of one Module over a ProcessGroup, as PyTorch's
// DDP. At construction the ranks check that they built the same model (an mdl::Error on every
// rank names the first parameter or buffer whose name, shape, dtype or requires_grad differs), then
// rank 0's parameters and buffers are broadcast, whatever their memory layout (channels-last
// included), so every rank starts equal.
// Gradients are averaged in buckets (about bucket_cap_mb each, filled with the parameters in
// reverse registration order, roughly the order backward finishes them): a post-accumulate-grad
// hook copies each final gradient into its bucket, and a full bucket's all_reduce starts at once,
// overlapping the rest of backward. When the last gradient is in, backward waits for every bucket
// and writes the averages back into .grad(), so after loss.backward() all ranks hold the same
// gradients: the average of the ranks' gradients, which is the gradient of the mean loss over
// the concatenated batch when every rank's batch has the same size (DistributedSampler's shards
// and the Trainer's batches do).
//
//   dist::MpiProcessGroup pg;
//   dist::DistributedDataParallel ddp(model, pg);
//   loss = cross_entropy(ddp(x), y); loss.backward(); opt.step();
//   { auto guard = ddp.no_sync(); micro_loss.backward(); }   // accumulate locally, no traffic
//
// With amp::GradScaler, call dist::sync_found_inf(scaler, pg) once so every rank skips the
// same steps. Every parameter that requires grad must get a gradient in each synchronised
// backward: wait() names the ones that did not, after finishing the buckets already started, so
// when every rank left out the same ones the error can be caught and training go on.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "amp/grad_scaler.h"
#include "dist/process_group.h"
#include "nn/module.h"

namespace mdl::dist {

struct DdpOptions {
  double bucket_cap_mb = 25;      // MiB of gradients per all_reduce (positive and finite; huge: one bucket)
  bool broadcast_buffers = true;  // rank 0's buffers (BatchNorm statistics) to all at each forward
};

class DistributedDataParallel {
 public:
  DistributedDataParallel(nn::ModulePtr module, ProcessGroup& group, DdpOptions options = {});
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  // before_forward(), then the module's forward.
  Tensor forward(const Tensor& x);
  Tensor operator()(const Tensor& x) { return forward(x); }
  // What forward does before the module runs: finishes a synchronised backward left unfinished
  // (naming what was missing) and, in training mode, broadcasts rank 0's buffers to every rank.
  // A loop that calls the module itself calls this first.
  void before_forward();
  nn::Module& module() { return *module_; }
  const nn::ModulePtr& module_ptr() const { return module_; }
  ProcessGroup& group() { return group_; }

  // While the guard lives, backward leaves gradients local (gradient accumulation's micro-batches).
  class NoSyncGuard {
   public:
    explicit NoSyncGuard(DistributedDataParallel& d) : d_(&d), prev_(d.sync_) { d.sync_ = false; }
    NoSyncGuard(NoSyncGuard&& o) noexcept : d_(std::exchange(o.d_, nullptr)), prev_(o.prev_) {}
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;
    ~NoSyncGuard() {
      if (d_) d_->sync_ = prev_;
    }

   private:
    DistributedDataParallel* d_;
    bool prev_;
  };
  NoSyncGuard no_sync() { return NoSyncGuard(*this); }

  // Completes a synchronised backward. Backward calls it itself once the last gradient is in; call
  // it before the optimizer step to get an error naming parameters that got no gradient.
  void wait();

  // Introspection for tests and benchmarks.
  int64_t num_buckets() const { return int64_t(buckets_.size()); }
  std::vector<int64_t> bucket_numels() const;
  int64_t all_reduces_started() const { return reduces_started_; }
  // Of those, the ones started while backward still had gradients to produce (the overlap).
  int64_t all_reduces_started_during_backward() const { return early_reduces_; }

 private:
  struct Slot {
    Tensor param;
    std::string name;
    int64_t bucket = 0, offset = 0;  // where its gradient sits in the bucket's flat buffer
  };
  struct Bucket {
    Tensor flat;  // (numel,) the gradients, back to back
    std::vector<size_t> slots;
    int64_t pending = 0;         // gradients still to come in this backward
    std::unique_ptr<Work> work;  // its all_reduce, once started
  };

  void on_grad_ready(size_t slot);
  void launch_ready_buckets();
  void reset_for_next_backward();

  nn::ModulePtr module_;
  ProcessGroup& group_;
  DdpOptions opt_;
  std::vector<Slot> slots_;
  std::vector<Bucket> buckets_;
  std::vector<uint64_t> hooks_;
  std::vector<bool> ready_;
  int64_t next_launch_ = 0, ready_count_ = 0, reduces_started_ = 0, early_reduces_ = 0;
  bool sync_ = true;
};

// Makes scaler's inf/NaN verdict the OR over all ranks (an all_reduce of the flag), so one
// rank's overflow skips the step everywhere and the replicas stay equal.
void sync_found_inf(amp::GradScaler& scaler, ProcessGroup& group);

}  // namespace mdl::dist
