// DataParallel: the process groups and DDP when built with MPI (NCCL for CUDA tensors); without
// MPI only the single-process path remains and --dist is refused.
#include "train/distributed.h"

#include "data/sampler.h"
#include "ops/factory.h"
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
  dist::ProcessGroup& group() { return gpu ? *gpu : *mpi; }
};
#else
struct DataParallel::Groups {};
#endif

DataParallel::DataParallel(bool dist, Device device) {
#ifdef MDL_WITH_MPI
  if (!dist) return;
  groups_ = std::make_unique<Groups>();
  groups_->mpi = std::make_unique<dist::MpiProcessGroup>();
  rank_ = groups_->mpi->rank(), world_ = groups_->mpi->world_size();
#ifdef MDL_WITH_NCCL
  if (device.is_cuda()) groups_->gpu = std::make_unique<dist::NcclProcessGroup>(*groups_->mpi);
#endif
  MDL_CHECK(!device.is_cuda() || groups_->gpu, "mdl-train: --dist on ", device,
            " needs NCCL (a build with CUDA and MPI)");
#else
  (void)device;
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

void DataParallel::wrap(const nn::ModulePtr& model, amp::GradScaler& scaler, double bucket_mb) {
#ifdef MDL_WITH_MPI
  if (!groups_) return;
  groups_->ddp = std::make_unique<dist::DistributedDataParallel>(model, groups_->group(),
                                                                 dist::DdpOptions{.bucket_cap_mb = bucket_mb});
  dist::sync_found_inf(scaler, groups_->group());
#else
  (void)model, (void)scaler, (void)bucket_mb;
#endif
}

Tensor DataParallel::forward(nn::Module& model, const Tensor& x) {
#ifdef MDL_WITH_MPI
  if (groups_ && groups_->ddp) return groups_->ddp->forward(x);
#endif
  return model(x);
}

void DataParallel::backward(const Tensor& loss, bool sync) {
#ifdef MDL_WITH_MPI
  if (groups_ && groups_->ddp) {
    if (sync) {
      loss.backward();
      groups_->ddp->wait();
      return;
    }
    auto guard = groups_->ddp->no_sync();
    loss.backward();
    return;
  }
#endif
  (void)sync;
  loss.backward();
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
