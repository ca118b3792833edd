// ProcessGroup: the collectives data-parallel training needs (all_reduce, broadcast, barrier),
// as torch.distributed's process groups. Implementations: MpiProcessGroup (processes and nodes,
// CPU tensors) and NcclProcessGroup (GPUs, CUDA tensors). Every collective must be called by every
// rank in the same order; none waits forever: past its timeout it throws mdl::Error naming the
// op, the rank and the timeout.
#pragma once
#include <memory>
#include <string>

#include "tensor/tensor.h"

namespace mdl::dist {

enum class ReduceOp { Sum, Average, Max };
const char* reduce_op_name(ReduceOp op);

// A collective in flight. test() polls (and drives MPI's progress); wait() blocks until done or
// the timeout, then throws. The tensor it works on must stay alive and untouched until then.
class Work {
 public:
  virtual ~Work() = default;
  virtual bool test() = 0;
  virtual void wait() = 0;
};

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual std::string backend() const = 0;  // "mpi", "nccl"

  // In place on a contiguous tensor (f32, f64, i64; Average needs a floating tensor).
  virtual std::unique_ptr<Work> all_reduce_async(const Tensor& t, ReduceOp op) = 0;
  void all_reduce(const Tensor& t, ReduceOp op = ReduceOp::Sum) { all_reduce_async(t, op)->wait(); }
  // Copies root's values into t on every rank (same shape and dtype everywhere).
  virtual void broadcast(const Tensor& t, int root = 0) = 0;
  virtual void barrier() = 0;
};

}  // namespace mdl::dist
