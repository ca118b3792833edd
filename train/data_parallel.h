// Data parallel training under mpirun, as hooks around the plain step (PyTorch's DDP works the
// same way): the MPI process group (and NCCL on CUDA), a DistributedSampler shard of each epoch
// per rank, and DistributedDataParallel's gradient hooks on the model, which average gradients
// over the ranks while backward runs. The step keeps its own forward, loss, backward and optimizer
// step; it calls before_forward() and sync_gradients() around them. Alone (dist false) it is rank 0
// of 1 and every call is a no-op. The MPI/NCCL build switches live in the .cpp.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "amp/grad_scaler.h"
#include "data/loader.h"
#include "nn/module.h"
#include "tensor/device.h"

namespace mdl::train {

class DataParallel {
 public:
  // dist: join the MPI job (throws in a build without MPI, or on CUDA without NCCL).
  // bucket_mb: MiB of gradients per all_reduce.
  // timeout_seconds: how long a collective waits for the other ranks before it throws. Generous
  // by default (30 min, as PyTorch's), because the other ranks wait at the epoch's end while rank 0
  // validates alone; a rank that dies ends the job at once anyway (mpirun stops the others).
  static constexpr double kDefaultTimeoutSeconds = 1800;
  DataParallel(bool dist, Device device, double bucket_mb = 25, double timeout_seconds = kDefaultTimeoutSeconds);
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  bool enabled() const { return groups_ != nullptr; }
  int rank() const { return rank_; }
  int world() const { return world_; }

  // Each rank a disjoint shard of the epoch's permutation, in place of the loader's shuffle.
  void shard(data::LoaderOptions& loader, int64_t samples, uint64_t seed) const;
  // Puts the gradient hooks on the model (every rank starts from rank 0's weights) and makes
  // every rank's GradScaler skip the same steps. Once, after any resume, before the first step.
  void attach(const nn::ModulePtr& model, amp::GradScaler& scaler);
  bool attached() const;

  // Before each forward: rank 0's buffers (batch-norm statistics) to every rank.
  void before_forward();
  // Whether the next backward averages its gradients over the ranks: only a step's last
  // micro-batch does; the others accumulate locally, with no traffic.
  void sync_gradients(bool sync);
  // After the step's last backward: the averaged gradients are in .grad() (an error names any
  // parameter that got none).
  void wait_gradients();

  void sum(std::vector<double>& values);  // over the ranks, in place; a no-op alone
  void barrier();                         // a no-op alone

 private:
  struct Groups;  // the process groups and the DDP hooks
  std::unique_ptr<Groups> groups_;
  double bucket_mb_;
  int rank_ = 0, world_ = 1;
};

}  // namespace mdl::train
