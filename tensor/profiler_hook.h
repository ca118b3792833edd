// The profiler's hook points, kept tiny because kernels/core.h includes this file: a global
// flag read with one relaxed load per kernel call, and the out-of-line range that records a
// kernel when a profiler::Session is active (profiler/session.h is the public face).
#pragma once
#include <atomic>
#include <cstdint>
#include <type_traits>

namespace mdl {
class Tensor;
struct Device;
}  // namespace mdl

namespace mdl::profiler::detail {

// True while a Session records. Off: every hook costs this one load and a branch.
inline std::atomic<bool> g_recording{false};
inline bool recording() { return g_recording.load(std::memory_order_relaxed); }

// One kernel call on the calling thread, from construction to destruction (also when the
// kernel throws). tensors[0..count) are the call's arguments, null where one is not a Tensor.
class KernelRange {
 public:
  KernelRange(const char* name, const Device& device, const Tensor* const* tensors, int count);
  ~KernelRange();
  KernelRange(const KernelRange&) = delete;
  KernelRange& operator=(const KernelRange&) = delete;

 private:
  bool open_ = false;
};

// An allocator change on device d; live_after is the device's live bytes after it
// (profiler/recorder.cpp records it; tensor/allocator.cpp calls it while a session records).
void record_memory(const Device& d, int64_t delta, int64_t live_after);

// Picks the Tensor arguments of a kernel call (the rest become null).
template <class T>
const Tensor* tensor_or_null(const T& arg) {
  if constexpr (std::is_same_v<std::remove_cvref_t<T>, Tensor>) return &arg;
  else return nullptr;
}

}  // namespace mdl::profiler::detail
