// The hook through which a device backend (CUDA: events on the kernel's stream) times its
// kernels for the profiler. A kernel's host range only measures its launch; with a timer
// installed, Session::stop() adds the device's own interval on a track per stream.
// The CUDA backend installs one with set_device_timer() when it registers (not yet written:
// cuda/ is the CUDA engineer's; tests/profiler/test_device.cpp drives a fake timer).
#pragma once
#include <cstdint>

#include "tensor/device.h"

namespace mdl::profiler {

class DeviceTimer {
 public:
  virtual ~DeviceTimer() = default;
  // Around a kernel launch on device d, on the launching thread: record a start and a stop
  // event on the stream the kernel goes to. start() returns a nonzero handle.
  virtual uint64_t start(Device d) = 0;
  virtual void stop(uint64_t handle) = 0;

  struct Timing {
    bool valid = false;
    int64_t start_ns = 0;  // on the device's clock, from any origin fixed for the session
    int64_t dur_ns = 0;
    int stream = 0;  // names the track: "cuda:<index> stream <stream>"
  };
  // Called by Session::stop() once per handle, after synchronize(); then reset() frees the events.
  virtual void synchronize() = 0;
  virtual Timing resolve(uint64_t handle) = 0;
  virtual void reset() = 0;
};

// Installs the timer (null removes it); the caller keeps ownership. Not while a session records.
void set_device_timer(DeviceTimer* timer);
DeviceTimer* device_timer();

}  // namespace mdl::profiler
