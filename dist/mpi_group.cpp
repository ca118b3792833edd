// MpiProcessGroup: MPI's lifetime (init on first use, finalize at exit unless a collective was
// lost), nonblocking collectives polled against a deadline, and the dtype mapping.
#include "dist/mpi_group.h"

#include <mpi.h>

#include <chrono>
#include <climits>
#include <cstdlib>
#include <thread>

#include "tensor/error.h"

namespace mdl::dist {
namespace {

using Clock = std::chrono::steady_clock;

// MPI for the whole process: initialised by the first group, finalised at exit when we did it
// and no collective was abandoned (MPI_Finalize would then wait for a rank that never comes).
struct Runtime {
  bool initialised_here = false;
  bool broken = false;
  Runtime() {
    int ready = 0;
    MPI_Initialized(&ready);
    if (ready) return;
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    initialised_here = true;
    // Open MPI reports some errors of a duplicated communicator's nonblocking collectives (a
    // message longer than the receiver's buffer) on MPI_COMM_WORLD: returned, they become an
    // mdl::Error naming the collective instead of an abort.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  }
  ~Runtime() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (initialised_here && !broken && !finalized) MPI_Finalize();
  }
};

Runtime& runtime() {
  static Runtime r;
  return r;
}

MPI_Comm comm_of(void* c) { return *static_cast<MPI_Comm*>(c); }

std::string mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return std::string(text, size_t(len));
}

MPI_Datatype mpi_type(DType t, const char* op) {
  switch (t) {
    case DType::F32: return MPI_FLOAT;
    case DType::F64: return MPI_DOUBLE;
    case DType::I64: return MPI_INT64_T;
    case DType::I32: return MPI_INT32_T;
    default: MDL_FAIL("dist::", op, ": MPI cannot reduce ", dtype_name(t), " tensors (f32, f64, i32, i64 only)");
  }
}

void check_tensor(const Tensor& t, const char* op) {
  MDL_CHECK(t.defined(), "dist::", op, ": undefined tensor");
  MDL_CHECK(t.device().is_cpu(), "dist::", op, ": the MPI group works on CPU tensors; this one is on ", t.device(),
            " (use NcclProcessGroup for CUDA tensors)");
  MDL_CHECK(t.is_contiguous(), "dist::", op, ": the tensor of shape ", shape_str(t.shape()), " is not contiguous");
  MDL_CHECK(t.numel() <= INT_MAX, "dist::", op, ": ", t.numel(), " elements are more than one MPI call carries (",
            INT_MAX, ")");
}

// Polls `req` until it completes or `timeout` seconds pass; a timeout throws and marks MPI broken.
void wait_request(MPI_Request& req, const std::string& what, int rank, int size, double timeout,
                  Clock::time_point start) {
  int done = 0;
  for (;;) {
    const int rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      runtime().broken = true;
      MDL_FAIL("dist::", what, " failed on rank ", rank, " of ", size, ": ", mpi_error(rc));
    }
    if (done) return;
    const double waited = std::chrono::duration<double>(Clock::now() - start).count();
    if (waited > timeout) {
      runtime().broken = true;
      MDL_FAIL("dist::", what, " timed out after ", timeout, " s on rank ", rank, " of ", size,
               " (another rank died, hangs, or called a different collective)");
    }
    // MPI moves a nonblocking collective on only inside MPI calls: poll hard at first (yielding
    // the core to a rank that shares it), then gently for a long wait (a rank validating alone).
    if (waited < 0.2) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

class MpiWork final : public Work {
 public:
  MpiWork(MPI_Request req, Tensor t, ReduceOp op, std::string what, int rank, int size, double timeout)
      : req_(req), t_(std::move(t)), op_(op), what_(std::move(what)), rank_(rank), size_(size), timeout_(timeout),
        start_(Clock::now()) {}
  ~MpiWork() override {
    // A collective still in flight cannot be cancelled; MPI is then unusable for a clean finalize.
    if (!done_) runtime().broken = true;
  }
  bool test() override {
    if (done_) return true;
    int flag = 0;
    const int rc = MPI_Test(&req_, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) wait();  // reports the error
    if (flag) finish();
    return done_;
  }
  void wait() override {
    if (done_) return;
    wait_request(req_, what_, rank_, size_, timeout_, start_);
    finish();
  }

 private:
  void finish() {
    done_ = true;
    if (op_ == ReduceOp::Average && size_ > 1) t_.mul_(1.0 / double(size_));
  }
  MPI_Request req_;
  Tensor t_;
  ReduceOp op_;
  std::string what_;
  int rank_, size_;
  double timeout_;
  Clock::time_point start_;
  bool done_ = false;
};

}  // namespace

MpiProcessGroup::MpiProcessGroup(MpiOptions options) : opt_(options) {
  MDL_CHECK(opt_.timeout_seconds > 0, "dist::MpiProcessGroup: timeout_seconds must be positive, got ",
            opt_.timeout_seconds);
  runtime();
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm, &rank_);
  MPI_Comm_size(comm, &size_);
  comm_ = new MPI_Comm(comm);
}

MpiProcessGroup::~MpiProcessGroup() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  auto* comm = static_cast<MPI_Comm*>(comm_);
  if (!finalized && !runtime().broken) MPI_Comm_free(comm);
  delete comm;
}

std::unique_ptr<Work> MpiProcessGroup::all_reduce_async(const Tensor& t, ReduceOp op) {
  check_tensor(t, "all_reduce");
  const MPI_Datatype type = mpi_type(t.dtype(), "all_reduce");
  MDL_CHECK(op != ReduceOp::Average || t.is_floating_point(), "dist::all_reduce: average needs a floating tensor, got ",
            t.dtype());
  const std::string what = detail::concat("all_reduce (", reduce_op_name(op), ") of ", t.numel(), " ",
                                          dtype_name(t.dtype()), " values");
  MPI_Request req = MPI_REQUEST_NULL;
  const int rc = MPI_Iallreduce(MPI_IN_PLACE, t.raw_data(), int(t.numel()), type,
                                op == ReduceOp::Max ? MPI_MAX : MPI_SUM, comm_of(comm_), &req);
  MDL_CHECK(rc == MPI_SUCCESS, "dist::", what, " failed to start on rank ", rank_, ": ", mpi_error(rc));
  t.bump_version();
  return std::make_unique<MpiWork>(req, t, op, what, rank_, size_, opt_.timeout_seconds);
}

void MpiProcessGroup::broadcast(const Tensor& t, int root) {
  check_tensor(t, "broadcast");
  MDL_CHECK(root >= 0 && root < size_, "dist::broadcast: root ", root, " is not a rank of this group of ", size_);
  MDL_CHECK(t.nbytes() <= size_t(INT_MAX), "dist::broadcast: ", t.nbytes(),
            " bytes are more than one MPI call carries");
  const std::string what = detail::concat("broadcast from rank ", root, " of ", t.numel(), " ", dtype_name(t.dtype()),
                                          " values");
  MPI_Request req = MPI_REQUEST_NULL;
  const auto start = Clock::now();
  const int rc = MPI_Ibcast(t.raw_data(), int(t.nbytes()), MPI_BYTE, root, comm_of(comm_), &req);
  MDL_CHECK(rc == MPI_SUCCESS, "dist::", what, " failed to start on rank ", rank_, ": ", mpi_error(rc));
  wait_request(req, what, rank_, size_, opt_.timeout_seconds, start);
  t.bump_version();
}

void MpiProcessGroup::barrier() {
  MPI_Request req = MPI_REQUEST_NULL;
  const auto start = Clock::now();
  const int rc = MPI_Ibarrier(comm_of(comm_), &req);
  MDL_CHECK(rc == MPI_SUCCESS, "dist::barrier failed to start on rank ", rank_, ": ", mpi_error(rc));
  wait_request(req, "barrier", rank_, size_, opt_.timeout_seconds, start);
}

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"})
    if (std::getenv(v)) return true;
  return false;
}

void abort_all(int code) {
  int ready = 0, finalized = 0;
  MPI_Initialized(&ready);
  MPI_Finalized(&finalized);
  if (ready && !finalized) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace mdl::dist
