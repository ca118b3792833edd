// DataParallel: the process groups and DDP's hooks when built with MPI (NCCL for CUDA tensors);
// without MPI only the single-process path remains and dist is refused.
#include "train/data_parallel.h"

#include <optional>

#include "data/sampler.h"
#include "ops/native/factory.h"
#ifdef MDL_WITH_MPI
#include "dist/ddp.h"
#include "dist/mpi_group.h"
#ifdef MDL_WITH_NCCL
#include "dist/nccl_group.h"
#endif
#endif

namespace mdl::train {

#ifdef MDL_WITH_MPI
struct DataParallel::Groups {
  std::unique_ptr<dist::MpiProcessGroup> mpi;
  std::unique_ptr<dist::ProcessGroup> gpu;  // NCCL, when training on CUDA
  std::unique_ptr<dist::DistributedDataParallel> ddp;
  std::optional<dist::DistributedDataParallel::NoSyncGuard> local;  // held while gradients stay local
  dist::ProcessGroup& group() { return gpu ? *gpu : *mpi; }
};
#else
struct DataParallel::Groups {};
#endif

DataParallel::DataParallel(bool dist, Device device, double bucket_mb, double timeout_seconds) : bucket_mb_(bucket_mb) {
#ifdef MDL_WITH_MPI
  if (!dist) return;
  groups_ = std::make_unique<Groups>();
  groups_->mpi = std::make_unique<dist::MpiProcessGroup>(dist::MpiOptions{.timeout_seconds = timeout_seconds});
  rank_ = groups_->mpi->rank(), world_ = groups_->mpi->world_size();
#ifdef MDL_WITH_NCCL
  if (device.is_cuda()) {
    dist::NcclOptions nccl;
    nccl.timeout_seconds = timeout_seconds;
    groups_->gpu = std::make_unique<dist::NcclProcessGroup>(*groups_->mpi, nccl);
  }
#endif
  MDL_CHECK(!device.is_cuda() || groups_->gpu, "mdl-train: --dist on ", device,
            " needs NCCL (a build with CUDA and MPI)");
#else
  (void)device, (void)timeout_seconds;
  MDL_CHECK(!dist, "mdl-train: --dist needs a build with MPI");
#endif
}

DataParallel::~DataParallel() = default;

void DataParallel::shard(data::LoaderOptions& loader, int64_t samples, uint64_t seed) const {
  if (!groups_) return;
  loader.shuffle = false;
  loader.sampler = std::make_shared<data::DistributedSampler>(samples, rank_, world_,
                                                              data::DistributedSamplerOptions{.seed = seed});
}

void DataParallel::attach(const nn::ModulePtr& model, amp::GradScaler& scaler) {
#ifdef MDL_WITH_MPI
  if (!groups_) return;
  MDL_CHECK(!groups_->ddp, "DataParallel::attach: already attached to a model");
  groups_->ddp = std::make_unique<dist::DistributedDataParallel>(model, groups_->group(),
                                                                 dist::DdpOptions{.bucket_cap_mb = bucket_mb_});
  dist::sync_found_inf(scaler, groups_->group());
#else
  (void)model, (void)scaler;
#endif
}

bool DataParallel::attached() const {
#ifdef MDL_WITH_MPI
  return groups_ && groups_->ddp;
#else
  return false;
#endif
}

void DataParallel::before_forward() {
#ifdef MDL_WITH_MPI
  if (groups_ && groups_->ddp) groups_->ddp->before_forward();
#endif
}

void DataParallel::sync_gradients(bool sync) {
#ifdef MDL_WITH_MPI
  if (!groups_ || !groups_->ddp) return;
  if (sync) groups_->local.reset();
  else if (!groups_->local) groups_->local.emplace(groups_->ddp->no_sync());
#else
  (void)sync;
#endif
}

void DataParallel::wait_gradients() {
#ifdef MDL_WITH_MPI
  if (groups_ && groups_->ddp) groups_->ddp->wait();
#endif
}

void DataParallel::sum(std::vector<double>& values) {
#ifdef MDL_WITH_MPI
  if (!groups_) return;
  Tensor t = from_vector(values, {int64_t(values.size())}).to(kF64);
  groups_->mpi->all_reduce(t);
  values = t.to_vector<double>();
#else
  (void)values;
#endif
}

void DataParallel::barrier() {
#ifdef MDL_WITH_MPI
  if (groups_) groups_->mpi->barrier();
#endif
}

}  // namespace mdl::train
