// NcclProcessGroup: collectives between GPUs over NCCL, one GPU per process (pick it with
// CUDA_VISIBLE_DEVICES per rank), on CUDA tensors, queued on mdl's CUDA stream. Rank 0's NCCL
// unique id reaches the other ranks over an MpiProcessGroup (MPI builds), or through a rendezvous
// file (dist/file_rendezvous.h), or not at all in a world of one. Built with CUDA and NCCL
// (make NCCL=auto|0|1); constructing it without a GPU throws mdl::Error.
//
//   dist::MpiProcessGroup mpi;                     // under mpirun
//   dist::NcclProcessGroup nccl(mpi);
//   dist::NcclProcessGroup nccl(rank, world, {.rendezvous_file = "/shared/run7.id",  // no MPI
//                                             .rendezvous_run_id = job_id});
//   nccl.all_reduce(grad_on_gpu, dist::ReduceOp::Average);
#pragma once
#include <memory>
#include <string>

#include "dist/process_group.h"
#ifdef MDL_WITH_MPI
#include "dist/mpi_group.h"
#endif

namespace mdl::dist {

struct NcclOptions {
  double timeout_seconds = 300;   // a collective not done by then aborts the communicator and throws
  std::string rendezvous_file;    // without MPI and with more than one rank: where rank 0 leaves the id
  std::string rendezvous_run_id;  // with rendezvous_file: the same on every rank, new for each run (a job id)
};

class NcclProcessGroup final : public ProcessGroup {
 public:
  // rank of world_size; a world of one needs no rendezvous file.
  NcclProcessGroup(int rank, int world_size, NcclOptions options = {});
#ifdef MDL_WITH_MPI
  explicit NcclProcessGroup(MpiProcessGroup& bootstrap, NcclOptions options = {});
#endif
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
  void check_options() const;
  void init_communicator(const void* unique_id);

  NcclOptions opt_;
  std::shared_ptr<State> state_;
  int rank_ = 0, size_ = 1;
};

// Whether this build has the NCCL group (CUDA and NCCL both on).
bool nccl_compiled();

}  // namespace mdl::dist
