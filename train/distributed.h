// Data parallel training for mdl-train --dist (under mpirun): the MPI process group (and NCCL
// on CUDA), a DistributedSampler shard of each epoch per rank, DistributedDataParallel around
// the model, and the sums and barrier of the epoch's end. Alone (no --dist) it is rank 0 of 1
// and every call falls through to the plain model. The MPI/NCCL build switches live in the .cpp.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "amp/grad_scaler.h"
#include "data/loader.h"
#include "nn/module.h"
#include "tensor/device.h"
#include "tensor/tensor.h"

namespace mdl::train {

class DataParallel {
 public:
  // dist: join the MPI job (throws in a build without MPI, or on CUDA without NCCL).
  DataParallel(bool dist, Device device);
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  int rank() const { return rank_; }
  int world() const { return world_; }

  // Each rank a disjoint shard of the epoch's permutation, in place of the loader's shuffle.
  void shard(data::LoaderOptions& loader, int64_t samples, uint64_t seed) const;
  // Wraps the model in DDP (after a resume: every rank starts from rank 0's weights either way)
  // and makes every rank's GradScaler skip the same steps.
  void wrap(const nn::ModulePtr& model, amp::GradScaler& scaler, double bucket_mb);

  // Through DDP when wrapped (it broadcasts rank 0's buffers first), else model(x).
  Tensor forward(nn::Module& model, const Tensor& x);
  // With DDP only the step's last micro-batch (sync) averages gradients; the others stay local.
  void backward(const Tensor& loss, bool sync);

  void sum(std::vector<double>& values);  // over the ranks, in place; a no-op alone
  void barrier();                         // a no-op alone

 private:
  struct Groups;  // the process groups and the DDP wrapper
  std::unique_ptr<Groups> groups_;
  int rank_ = 0, world_ = 1;
};

}  // namespace mdl::train
