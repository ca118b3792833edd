// NcclProcessGroup: the communicator built from rank 0's unique id, collectives queued on
// mdl's stream, and completion polled through a CUDA event against a deadline (then the
// communicator is aborted, so nothing waits forever).
#include "dist/nccl_group.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "dist/file_rendezvous.h"
#include "cuda/runtime/context.cuh"
#include "tensor/error.h"
#include "ops/native/factory.h"

namespace mdl::dist {

struct NcclProcessGroup::State {
  ncclComm_t comm = nullptr;
  bool aborted = false;
};

namespace {

using Clock = std::chrono::steady_clock;

#define NCCL_CHECK(what, call)                                                                         \
  do {                                                                                                 \
    const ncclResult_t r_ = (call);                                                                    \
    if (r_ != ncclSuccess) MDL_FAIL("dist::", what, ": ", #call, " failed: ", ncclGetErrorString(r_)); \
  } while (0)

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::F32: return ncclFloat32;
    case DType::F16: return ncclFloat16;
    case DType::BF16: return ncclBfloat16;
    case DType::F64: return ncclFloat64;
    case DType::I32: return ncclInt32;
    case DType::I64: return ncclInt64;
    case DType::U8: return ncclUint8;
    default: MDL_FAIL("dist::all_reduce: NCCL cannot reduce ", dtype_name(t), " tensors");
  }
}

void check_tensor(const Tensor& t, const char* op) {
  MDL_CHECK(t.defined(), "dist::", op, ": undefined tensor");
  MDL_CHECK(t.device().is_cuda(), "dist::", op, ": the NCCL group works on CUDA tensors; this one is on ", t.device(),
            " (use MpiProcessGroup for CPU tensors)");
  MDL_CHECK(t.is_contiguous(), "dist::", op, ": the tensor of shape ", shape_str(t.shape()), " is not contiguous");
}

class NcclWork final : public Work {
 public:
  NcclWork(std::shared_ptr<NcclProcessGroup::State> st, std::string what, int rank, double timeout)
      : st_(std::move(st)), what_(std::move(what)), rank_(rank), timeout_(timeout), start_(Clock::now()) {
    MDL_CHECK(cudaEventCreateWithFlags(&done_event_, cudaEventDisableTiming) == cudaSuccess, "dist::", what_,
              ": cudaEventCreate failed");
    MDL_CHECK(cudaEventRecord(done_event_, cuda::detail::stream()) == cudaSuccess, "dist::", what_,
              ": cudaEventRecord failed");
  }
  ~NcclWork() override { cudaEventDestroy(done_event_); }
  bool test() override {
    if (done_) return true;
    const cudaError_t s = cudaEventQuery(done_event_);
    MDL_CHECK(s == cudaSuccess || s == cudaErrorNotReady, "dist::", what_, " failed on rank ", rank_, ": ",
              cudaGetErrorString(s));
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(st_->comm, &async);
    MDL_CHECK(async == ncclSuccess, "dist::", what_, " failed on rank ", rank_, ": ", ncclGetErrorString(async));
    done_ = s == cudaSuccess;
    return done_;
  }
  void wait() override {
    while (!test()) {
      if (std::chrono::duration<double>(Clock::now() - start_).count() > timeout_) {
        if (!st_->aborted) ncclCommAbort(st_->comm);
        st_->aborted = true;
        MDL_FAIL("dist::", what_, " timed out after ", timeout_, " s on rank ", rank_,
                 " (another rank died, hangs, or called a different collective); the NCCL communicator was aborted");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

 private:
  std::shared_ptr<NcclProcessGroup::State> st_;
  std::string what_;
  int rank_;
  double timeout_;
  Clock::time_point start_;
  cudaEvent_t done_event_ = nullptr;
  bool done_ = false;
};

}  // namespace

bool nccl_compiled() { return true; }

void NcclProcessGroup::check_options() const {
  MDL_CHECK(opt_.timeout_seconds > 0, "dist::NcclProcessGroup: timeout_seconds must be positive, got ",
            opt_.timeout_seconds);
  MDL_CHECK(size_ >= 1, "dist::NcclProcessGroup: world_size must be at least 1, got ", size_);
  MDL_CHECK(rank_ >= 0 && rank_ < size_, "dist::NcclProcessGroup: rank ", rank_, " is not in a world of ", size_);
  int devices = 0;
  MDL_CHECK(cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0, "dist::NcclProcessGroup: no GPU on rank ",
            rank_, " (NCCL needs one CUDA device per process)");
}

void NcclProcessGroup::init_communicator(const void* unique_id) {
  ncclUniqueId id;
  std::memcpy(&id, unique_id, sizeof id);
  cuda::detail::stream();  // mdl's context first, so NCCL runs on the same device
  NCCL_CHECK("NcclProcessGroup", ncclCommInitRank(&state_->comm, size_, id, rank_));
}

NcclProcessGroup::NcclProcessGroup(int rank, int world_size, NcclOptions options)
    : opt_(std::move(options)), state_(std::make_shared<State>()), rank_(rank), size_(world_size) {
  MDL_CHECK(world_size <= 1 || !opt_.rendezvous_file.empty(), "dist::NcclProcessGroup: a world of ", world_size,
            " ranks needs NcclOptions::rendezvous_file (a path every rank sees) or an MpiProcessGroup");
  MDL_CHECK(world_size <= 1 || !opt_.rendezvous_run_id.empty(), "dist::NcclProcessGroup: a rendezvous file needs ",
            "NcclOptions::rendezvous_run_id (the same on every rank, new for each run), so no rank takes a stale file");
  check_options();
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (rank_ == 0) NCCL_CHECK("NcclProcessGroup", ncclGetUniqueId(&id));
  if (size_ > 1) {
    std::vector<uint8_t> bytes(sizeof id);
    if (rank_ == 0) {
      std::memcpy(bytes.data(), &id, sizeof id);
      rendezvous_publish(opt_.rendezvous_file, opt_.rendezvous_run_id, bytes);
    } else {
      bytes = rendezvous_fetch(opt_.rendezvous_file, opt_.rendezvous_run_id, sizeof id, opt_.timeout_seconds);
    }
    std::memcpy(&id, bytes.data(), sizeof id);
  }
  // Every rank has read the id once the (collective) init returns or fails: rank 0 removes the file.
  std::error_code ec;
  try {
    init_communicator(&id);
  } catch (...) {
    if (size_ > 1 && rank_ == 0) std::filesystem::remove(opt_.rendezvous_file, ec);
    throw;
  }
  if (size_ > 1 && rank_ == 0) std::filesystem::remove(opt_.rendezvous_file, ec);
}

#ifdef MDL_WITH_MPI
NcclProcessGroup::NcclProcessGroup(MpiProcessGroup& bootstrap, NcclOptions options)
    : opt_(std::move(options)), state_(std::make_shared<State>()), rank_(bootstrap.rank()),
      size_(bootstrap.world_size()) {
  check_options();
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (rank_ == 0) NCCL_CHECK("NcclProcessGroup", ncclGetUniqueId(&id));
  Tensor id_bytes = zeros({int64_t(sizeof id)}, kU8);
  std::memcpy(id_bytes.raw_data(), &id, sizeof id);
  bootstrap.broadcast(id_bytes, 0);
  init_communicator(id_bytes.raw_data());
}
#endif

NcclProcessGroup::~NcclProcessGroup() {
  if (state_->comm && !state_->aborted) ncclCommDestroy(state_->comm);
}

std::unique_ptr<Work> NcclProcessGroup::all_reduce_async(const Tensor& t, ReduceOp op) {
  check_tensor(t, "all_reduce");
  MDL_CHECK(!state_->aborted, "dist::all_reduce: the NCCL communicator was aborted after an earlier timeout");
  MDL_CHECK(op != ReduceOp::Average || t.is_floating_point(), "dist::all_reduce: average needs a floating tensor, got ",
            t.dtype());
  const ncclRedOp_t nop = op == ReduceOp::Sum ? ncclSum : op == ReduceOp::Average ? ncclAvg : ncclMax;
  const std::string what = detail::concat("all_reduce (", reduce_op_name(op), ") of ", t.numel(), " ",
                                          dtype_name(t.dtype()), " values");
  NCCL_CHECK(what, ncclAllReduce(t.raw_data(), t.raw_data(), size_t(t.numel()), nccl_type(t.dtype()), nop, state_->comm,
                                 cuda::detail::stream()));
  t.bump_version();
  return std::make_unique<NcclWork>(state_, what, rank_, opt_.timeout_seconds);
}

void NcclProcessGroup::broadcast(const Tensor& t, int root) {
  check_tensor(t, "broadcast");
  MDL_CHECK(root >= 0 && root < size_, "dist::broadcast: root ", root, " is not a rank of this group of ", size_);
  MDL_CHECK(!state_->aborted, "dist::broadcast: the NCCL communicator was aborted after an earlier timeout");
  const std::string what = detail::concat("broadcast from rank ", root, " of ", t.numel(), " values");
  NCCL_CHECK(what, ncclBroadcast(t.raw_data(), t.raw_data(), t.nbytes(), ncclUint8, root, state_->comm,
                                 cuda::detail::stream()));
  t.bump_version();
  NcclWork(state_, what, rank_, opt_.timeout_seconds).wait();
}

void NcclProcessGroup::barrier() {
  Tensor one = ones({1}, TensorOptions(kF32, Device::cuda()));
  all_reduce_async(one, ReduceOp::Sum)->wait();
}

}  // namespace mdl::dist
