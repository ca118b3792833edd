// The CUDA backend's DeviceTimer (cuda/runtime/device_timer.cpp): a pair of pooled CUDA events
// recorded on mdl's stream around each kernel launch. The backend installs it with
// set_device_timer() when it registers and a GPU is present (unless a session is recording
// then); cuda_device_timer() returns it, e.g. to install it again after another timer was set.
#pragma once
#include "profiler/device_timer.h"

namespace mdl::profiler {

// Null in a build without CUDA or on a machine without a GPU.
DeviceTimer* cuda_device_timer();

}  // namespace mdl::profiler
