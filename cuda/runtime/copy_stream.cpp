// cuda::CopyStream: host-to-device copies on one side stream (non-blocking, so it never waits
// on the legacy default stream), into memory from the caching allocator's pool for that stream,
// each followed by an event that mdl's stream waits on before the data is used.
#include <mutex>
#include <unordered_map>
#include <vector>

#include "cuda/runtime/allocator.cuh"
#include "cuda/runtime/context.cuh"
#include "cuda/api.h"
#include "kernels/views.h"

namespace mdl::cuda {

namespace {
cudaStream_t copy_stream() {
  static cudaStream_t s = [] {
    cudaStream_t x = nullptr;
    detail::stream();  // device 0 is selected first
    CUDA_CHECK("CopyStream", cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking));
    return x;
  }();
  return s;
}
}  // namespace

struct CopyStream::Impl {
  std::mutex mu;
  std::vector<cudaEvent_t> idle;
  std::unordered_map<uint64_t, cudaEvent_t> in_flight;  // ticket -> its copy's event
  uint64_t last_ticket = 0;

  cudaEvent_t take_event() {
    std::lock_guard<std::mutex> lock(mu);
    if (!idle.empty()) {
      cudaEvent_t e = idle.back();
      idle.pop_back();
      return e;
    }
    cudaEvent_t e = nullptr;
    CUDA_CHECK("CopyStream", cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return e;
  }
  ~Impl() {
    for (cudaEvent_t e : idle) (void)cudaEventDestroy(e);
    for (auto& [t, e] : in_flight) (void)cudaEventDestroy(e);
    (void)cudaGetLastError();
  }
};

CopyStream::CopyStream(Device device) {
  MDL_CHECK(device.is_cuda() && device.index == 0,
            "CopyStream: expected the device cuda:0 (the one mdl's CUDA backend drives), got ", device);
  MDL_CHECK(is_available(), "CopyStream: ", device, " was asked for, but no GPU was found");
  impl_ = std::make_unique<Impl>();
}

CopyStream::~CopyStream() = default;

CopyStream::Copy CopyStream::copy(const Tensor& host) {
  MDL_CHECK(host.defined() && host.device().is_cpu(), "CopyStream::copy: expected a CPU tensor, got ",
            host.defined() ? host.device().str() : std::string("an undefined tensor"));
  const Tensor src = host.is_contiguous() ? host : kernels::contiguous(host);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(src.nbytes(), detail::side_stream_allocator(copy_stream()));
  impl->shape = src.shape();
  impl->strides = contiguous_strides(src.shape());
  impl->dtype = src.dtype();
  Copy c{Tensor(std::move(impl)), 0};
  cudaEvent_t ev = impl_->take_event();
  if (src.nbytes())
    CUDA_CHECK("CopyStream", cudaMemcpyAsync(c.tensor.raw_data(), src.raw_data(), src.nbytes(), cudaMemcpyHostToDevice,
                                             copy_stream()));
  CUDA_CHECK("CopyStream", cudaEventRecord(ev, copy_stream()));
  // The host buffer (a pinned batch the loader reuses) must outlive the DMA: wait for it here, on
  // the producing thread; the GPU's ordering against mdl's stream is wait()'s event.
  CUDA_CHECK("CopyStream", cudaEventSynchronize(ev));
  std::lock_guard<std::mutex> lock(impl_->mu);
  c.ticket = ++impl_->last_ticket;
  impl_->in_flight.emplace(c.ticket, ev);
  return c;
}

Tensor CopyStream::wait(Copy&& c) {
  cudaEvent_t ev = nullptr;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    auto it = impl_->in_flight.find(c.ticket);
    MDL_CHECK(it != impl_->in_flight.end(), "CopyStream::wait: unknown or already used ticket ", c.ticket);
    ev = it->second;
    impl_->in_flight.erase(it);
  }
  const cudaError_t e = cudaStreamWaitEvent(detail::stream(), ev, 0);
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->idle.push_back(ev);
  }
  CUDA_CHECK("CopyStream", e);
  return std::move(c.tensor);
}

void CopyStream::release(uint64_t ticket) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->in_flight.find(ticket);
  if (it == impl_->in_flight.end()) return;
  impl_->idle.push_back(it->second);  // copy() waited for the event, so it is free to record again
  impl_->in_flight.erase(it);
}

int64_t CopyStream::in_flight() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return int64_t(impl_->in_flight.size());
}

}  // namespace mdl::cuda
