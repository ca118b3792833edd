// The profiler's hook points, kept tiny because kernels/core.h includes this file: a global
// flag read with one relaxed load per kernel call, and the out-of-line range that records a
// kernel when a profiler::Session is active (profiler/session.h is the public face).
#pragma once
#include <atomic>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace mdl {
class Tensor;
struct Device;
}  // namespace mdl

namespace mdl::profiler::detail {

// True while a Session records. Off: every hook costs this one load and a branch.
inline std::atomic<bool> g_recording{false};
inline bool recording() { return g_recording.load(std::memory_order_relaxed); }

// One argument of a kernel call as the profiler's cost model reads it (profiler/cost.h).
struct KernelArg {
  const Tensor* tensor = nullptr;  // a Tensor argument
  int64_t value = 0;               // a bool or integer argument (attention's causal flag)
  int64_t list_bytes = 0;          // a list of tensors (a multi-tensor step): the bytes they span
};

// The bytes t's memory holds for its view, a broadcast (stride 0) dimension counted once; 0 when undefined.
int64_t tensor_bytes(const Tensor& t);

// The KernelArg of each argument type; a kernel contract adds an overload for its own list types
// (kernels/optim.h: StepTensors), found by argument-dependent lookup.
template <class T>
KernelArg kernel_arg(const T& arg) {
  using U = std::remove_cvref_t<T>;
  if constexpr (std::is_same_v<U, Tensor>) {
    return {.tensor = &arg};
  } else if constexpr (std::is_integral_v<U>) {
    return {.value = int64_t(arg)};
  } else if constexpr (std::is_same_v<U, std::vector<Tensor>>) {
    int64_t bytes = 0;
    for (const auto& t : arg) bytes += tensor_bytes(t);
    return {.list_bytes = bytes};
  } else {
    return {};
  }
}

// One kernel call on the calling thread, from construction to destruction (also when the
// kernel throws). args[0..count) are the call's arguments.
class KernelRange {
 public:
  KernelRange(const char* name, const Device& device, const KernelArg* args, int count);
  ~KernelRange();
  KernelRange(const KernelRange&) = delete;
  KernelRange& operator=(const KernelRange&) = delete;

 private:
  bool open_ = false;
};

// An allocator change on device d; live_after is the device's live bytes after it
// (profiler/recorder.cpp records it; tensor/allocator.cpp calls it while a session records).
void record_memory(const Device& d, int64_t delta, int64_t live_after);

}  // namespace mdl::profiler::detail
