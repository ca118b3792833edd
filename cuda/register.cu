// Installs the caching allocator and the profiler's device timer, and fills the kernel stubs'
// CUDA slots from the kernel table; called once by the device probe (tensor/device.cpp) when a
// GPU is found. A slot left empty (a CPU_ONLY entry) throws "<op>: no CUDA kernel".
#include "profiler/device_timer.h"
#include "tensor/profiler_hook.h"
#include "cuda/runtime/allocator.cuh"
#include "cuda/api.h"
#include "cuda/kernels.cuh"

namespace mdl::cuda::detail {

profiler::DeviceTimer* device_timer();  // cuda/runtime/device_timer.cpp

void fill_kernel_slots() { MDL_ALL_KERNELS(MDL_SET_CUDA_SLOT) }

void register_kernels() {
  set_allocator(DeviceType::CUDA, device_allocator());
  // A session already recording keeps its timer (none); profiler::cuda_device_timer() gives this one later.
  try {
    if (!profiler::detail::recording() && !profiler::device_timer()) profiler::set_device_timer(device_timer());
  } catch (const Error&) {  // a session started meanwhile: it runs without device times
  }
  fill_kernel_slots();
}

}  // namespace mdl::cuda::detail
