// NcclProcessGroup: collectives between GPUs over NCCL, one GPU per process (pick it with
// CUDA_VISIBLE_DEVICES per rank), on CUDA tensors, queued on mdl's CUDA stream. The NCCL unique id
// travels from rank 0 over an MpiProcessGroup, which also stays the CPU-side group. Built only
// with CUDA and MPI (dist::nccl_compiled()); constructing it without a GPU throws mdl::Error.
//
//   dist::MpiProcessGroup mpi;
//   dist::NcclProcessGroup nccl(mpi);
//   nccl.all_reduce(grad_on_gpu, dist::ReduceOp::Average);
#pragma once
#include <memory>

#include "dist/mpi_group.h"

namespace mdl::dist {

struct NcclOptions {
  double timeout_seconds = 300;  // a collective not done by then aborts the communicator and throws
};

class NcclProcessGroup final : public ProcessGroup {
 public:
  explicit NcclProcessGroup(MpiProcessGroup& bootstrap, NcclOptions options = {});
  ~NcclProcessGroup() override;
  NcclProcessGroup(const NcclProcessGroup&) = delete;
  NcclProcessGroup& operator=(const NcclProcessGroup&) = delete;

  int rank() const override { return rank_; }
  int world_size() const override { return size_; }
  std::string backend() const override { return "nccl"; }

  std::unique_ptr<Work> all_reduce_async(const Tensor& t, ReduceOp op) override;
  void broadcast(const Tensor& t, int root = 0) override;
  void barrier() override;

  struct State;  // the communicator (nccl_group.cpp)

 private:
  NcclOptions opt_;
  std::shared_ptr<State> state_;
  int rank_ = 0, size_ = 1;
};

// Whether this build has the NCCL group (CUDA and MPI both on).
bool nccl_compiled();

}  // namespace mdl::dist
