// What a profiler session records: ranges of time (kernels, backward nodes, modules, phases,
// user scopes) on a thread, and allocator changes per device. Plain data, read after stop().
#pragma once
#include <cstdint>
#include <string>

#include "tensor/device.h"
#include "tensor/dtype.h"

namespace mdl::profiler {

enum class EventKind : uint8_t {
  Kernel,        // one primitive call (kernels/core.h Stub), on the calling thread
  Backward,      // one autograd node's apply, named "<op>Backward"
  Module,        // one Module::operator(), named by the module's type
  Phase,         // a step phase: "data_wait", "forward", "backward", "optimizer"
  Scope,         // a user's profiler::Scope
  DeviceKernel,  // a kernel's time on a device stream (timed by a DeviceTimer)
};
const char* kind_name(EventKind k);  // "kernel", "backward", ...

// One tensor argument of a kernel: dtype and shape (dims past kMaxDims are not kept).
struct ShapeRecord {
  static constexpr int kMaxDims = 6;
  DType dtype = kF32;
  uint8_t ndim = 0;
  int64_t dims[kMaxDims] = {};
};
std::string shape_record_str(const ShapeRecord& s);  // "f32[128, 1, 28, 28]"

struct Event {
  static constexpr int kMaxShapes = 6;  // attention: out, lse, q, k, v, mask
  const char* name = "";                // lives as long as the process (static or interned)
  EventKind kind = EventKind::Kernel;
  Device device;
  uint32_t tid = 0;      // index into Session::threads()
  int32_t parent = -1;   // index of the enclosing event on the same thread (set by stop())
  int64_t start_ns = 0;  // since the session started
  int64_t end_ns = 0;
  int64_t flops = -1;         // floating-point operations, -1 when the op does not know
  int64_t bytes = 0;          // bytes of the tensor arguments (inputs read, outputs written)
  DType dtype = kF32;         // of the operand that picks its compute ceiling (profiler/cost.h)
  uint64_t device_token = 0;  // DeviceTimer handle (kernels on a device), 0 when none
  uint8_t n_shapes = 0;       // recorded when Options::record_shapes
  ShapeRecord shapes[kMaxShapes];

  int64_t dur_ns() const { return end_ns - start_ns; }
  std::string shapes_str() const;  // "f32[2, 3], f32[3, 4]"
};

// One allocator change; live is the device's live bytes right after it (memory_stats()).
struct MemoryEvent {
  int64_t t_ns = 0;
  Device device;
  int64_t delta = 0;  // +bytes allocated, -bytes freed
  int64_t live = 0;
};

struct ThreadInfo {
  uint32_t tid = 0;
  std::string name;  // "main", a name given by set_thread_name(), or "cuda:0 stream 7"
};

// Allocator totals over a session, for one device.
struct MemorySummary {
  Device device;
  int64_t allocated_bytes = 0, freed_bytes = 0;
  int64_t allocations = 0, frees = 0;
  int64_t peak_live = 0;  // highest live bytes seen during the session
  int64_t end_live = 0;   // live bytes at the last event
};

}  // namespace mdl::profiler
