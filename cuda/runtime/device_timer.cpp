// The profiler's DeviceTimer on CUDA: start() and stop() record a pair of events on mdl's stream
// (the stream every kernel of this backend runs on) around a kernel launch; after the session
// synchronizes, resolve() reads the kernel's interval with cudaEventElapsedTime, measured from
// the first start event since reset(). Events are pooled and reused across sessions. Nothing is
// recorded while mdl's stream is being captured into a CUDA Graph (such launches resolve invalid).
#include <mutex>
#include <vector>

#include "profiler/cuda_timer.h"
#include "cuda/runtime/context.cuh"
#include "cuda/api.h"

namespace mdl::cuda::detail {

namespace {

class CudaTimer final : public profiler::DeviceTimer {
 public:
  uint64_t start(Device d) override {
    std::lock_guard<std::mutex> lock(mu_);
    Range r;
    if (d.is_cuda() && d.index == 0 && !stream_capturing()) {
      r.start = take();
      r.stop = take();
      r.started = r.start && r.stop && cudaEventRecord(r.start, stream()) == cudaSuccess;
      if (!r.started) (void)cudaGetLastError();
    }
    ranges_.push_back(r);
    return ranges_.size();
  }

  void stop(uint64_t handle) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (handle == 0 || handle > ranges_.size()) return;
    Range& r = ranges_[handle - 1];
    if (!r.started) return;
    r.stopped = cudaEventRecord(r.stop, stream()) == cudaSuccess;
    if (!r.stopped) (void)cudaGetLastError();
  }

  void synchronize() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (ranges_.empty()) return;  // a CPU-only session: leave the CUDA context alone
    }
    if (cudaStreamSynchronize(stream()) != cudaSuccess) (void)cudaGetLastError();
  }

  Timing resolve(uint64_t handle) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (handle == 0 || handle > ranges_.size()) return {};
    const Range& r = ranges_[handle - 1];
    if (!r.started || !r.stopped) return {};
    if (!origin_) {
      for (const Range& o : ranges_)
        if (o.started && o.stopped) {
          origin_ = o.start;  // the first recorded start: ranges_ is in recording order on one stream
          break;
        }
    }
    float since_origin_ms = 0, dur_ms = 0;
    if (cudaEventElapsedTime(&since_origin_ms, origin_, r.start) != cudaSuccess ||
        cudaEventElapsedTime(&dur_ms, r.start, r.stop) != cudaSuccess) {
      (void)cudaGetLastError();
      return {};
    }
    return {.valid = true,
            .start_ns = int64_t(double(since_origin_ms) * 1e6),
            .dur_ns = int64_t(double(dur_ms) * 1e6),
            .stream = 0};
  }

  void reset() override {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Range& r : ranges_) {
      if (r.start) idle_.push_back(r.start);
      if (r.stop) idle_.push_back(r.stop);
    }
    ranges_.clear();
    origin_ = nullptr;
  }

 private:
  struct Range {
    cudaEvent_t start = nullptr, stop = nullptr;
    bool started = false, stopped = false;
  };

  // An event with timing (the default flags), from the pool; null if the driver refuses one.
  cudaEvent_t take() {
    if (!idle_.empty()) {
      cudaEvent_t e = idle_.back();
      idle_.pop_back();
      return e;
    }
    cudaEvent_t e = nullptr;
    if (cudaEventCreate(&e) != cudaSuccess) (void)cudaGetLastError(), e = nullptr;
    return e;
  }
  static bool stream_capturing() {
    cudaStreamCaptureStatus s = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream(), &s) != cudaSuccess) (void)cudaGetLastError();
    return s != cudaStreamCaptureStatusNone;
  }

  std::mutex mu_;
  std::vector<Range> ranges_;  // handle h is ranges_[h - 1]
  std::vector<cudaEvent_t> idle_;
  cudaEvent_t origin_ = nullptr;
};

}  // namespace

profiler::DeviceTimer* device_timer() {
  static auto* t = new CudaTimer;  // never destroyed: a session may outlive static destruction order
  return t;
}

}  // namespace mdl::cuda::detail

namespace mdl::profiler {
DeviceTimer* cuda_device_timer() { return cuda::is_available() ? cuda::detail::device_timer() : nullptr; }
}  // namespace mdl::profiler
