// cuda_device_timer() in a build without the CUDA backend: there is none.
#include "profiler/cuda_timer.h"

namespace mdl::profiler {
#ifndef MDL_WITH_CUDA
DeviceTimer* cuda_device_timer() { return nullptr; }
#endif
}  // namespace mdl::profiler
