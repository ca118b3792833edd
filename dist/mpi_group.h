// MpiProcessGroup: collectives between processes (and nodes) over MPI, for CPU tensors. It
// initialises MPI on first use (MPI_Init_thread, funneled: only the thread that trains calls it)
// and finalises it at exit. Collectives are nonblocking MPI calls polled until done or
// `timeout_seconds`; a timeout throws mdl::Error and marks MPI broken, so the program exits
// without MPI_Finalize (which would wait for the lost rank) and mpirun stops the others.
//
//   dist::MpiProcessGroup pg;                 // under mpirun -np N
//   pg.all_reduce(t, dist::ReduceOp::Average);
#pragma once
#include "dist/process_group.h"

namespace mdl::dist {

struct MpiOptions {
  double timeout_seconds = 300;
};

class MpiProcessGroup final : public ProcessGroup {
 public:
  explicit MpiProcessGroup(MpiOptions options = {});
  ~MpiProcessGroup() override;
  MpiProcessGroup(const MpiProcessGroup&) = delete;
  MpiProcessGroup& operator=(const MpiProcessGroup&) = delete;

  int rank() const override { return rank_; }
  int world_size() const override { return size_; }
  std::string backend() const override { return "mpi"; }
  double timeout_seconds() const { return opt_.timeout_seconds; }

  std::unique_ptr<Work> all_reduce_async(const Tensor& t, ReduceOp op) override;
  void broadcast(const Tensor& t, int root = 0) override;
  void barrier() override;

 private:
  MpiOptions opt_;
  void* comm_ = nullptr;  // MPI_Comm*, a duplicate of MPI_COMM_WORLD (opaque: no MPI header here)
  int rank_ = 0, size_ = 1;
};

// Whether this program runs under an MPI launcher (mpirun sets OMPI_COMM_WORLD_SIZE / PMI_SIZE).
bool launched_by_mpi();
// Ends every rank of the job now (MPI_Abort): the way out after an error on one rank.
[[noreturn]] void abort_all(int code);

}  // namespace mdl::dist
