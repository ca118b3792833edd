// Installs the caching allocator and the profiler's device timer, and fills the kernel stubs'
// CUDA slots; called once by the device probe (tensor/device.cpp) when a GPU is found. A slot left
// empty throws "<op>: no CUDA kernel".
#include "profiler/device_timer.h"
#include "profiler/hook.h"
#include "tensor/cuda/allocator.cuh"
#include "tensor/cuda/kernels.cuh"
#include "tensor/kernels_gelu.h"
#include "tensor/kernels_linear.h"

namespace mdl::cuda {
// tensor/cuda/linear_act.cu and gelu_backward.cu (declared here rather than in kernels.cuh, which
// every kernel file includes).
kernels::LinearActForwardFn linear_act_forward;
kernels::LinearActBackwardFn linear_act_backward;
kernels::GeluBackwardFn gelu_backward;  // tensor/cuda/gelu_backward.cu
}  // namespace mdl::cuda

namespace mdl::cuda::detail {

profiler::DeviceTimer* device_timer();  // tensor/cuda/device_timer.cu

void register_kernels() {
  set_allocator(DeviceType::CUDA, device_allocator());
  // A session already recording keeps its timer (none); profiler::cuda_device_timer() gives this one later.
  try {
    if (!profiler::detail::recording() && !profiler::device_timer()) profiler::set_device_timer(device_timer());
  } catch (const Error&) {  // a session started meanwhile: it runs without device times
  }
  namespace k = ::mdl::kernels;
  k::fill.cuda = &cuda::fill;
  k::copy.cuda = &cuda::copy;
  k::unary.cuda = &cuda::unary;
  k::binary.cuda = &cuda::binary;
  k::where.cuda = &cuda::where;
  k::reduce.cuda = &cuda::reduce;
  k::arg_reduce.cuda = &cuda::arg_reduce;
  k::var.cuda = &cuda::var;
  k::softmax.cuda = &cuda::softmax;
  k::softmax_backward.cuda = &cuda::softmax_backward;
  k::bmm.cuda = &cuda::bmm;
  k::index_select.cuda = &cuda::index_select;
  k::gather.cuda = &cuda::gather;
  k::scatter_add.cuda = &cuda::scatter_add;
  k::index_add.cuda = &cuda::index_add;
  k::tri.cuda = &cuda::tri;
  k::dropout_mask.cuda = &cuda::dropout_mask;
  k::masked_scale.cuda = &cuda::masked_scale;
  k::adam_step.cuda = &cuda::adam_step;
  k::sgd_step.cuda = &cuda::sgd_step;
  k::sum_squares.cuda = &cuda::sum_squares;
  k::batch_norm_forward.cuda = &cuda::batch_norm_forward;
  k::batch_norm_backward.cuda = &cuda::batch_norm_backward;
  k::group_norm_forward.cuda = &cuda::group_norm_forward;
  k::group_norm_backward.cuda = &cuda::group_norm_backward;
  k::cross_entropy_forward.cuda = &cuda::cross_entropy_forward;
  k::cross_entropy_backward.cuda = &cuda::cross_entropy_backward;
  k::unscale_check.cuda = &cuda::unscale_check;
  k::conv2d_forward.cuda = &cuda::conv2d_forward;
  k::conv2d_backward.cuda = &cuda::conv2d_backward;
  k::max_pool2d_forward.cuda = &cuda::max_pool2d_forward;
  k::max_pool2d_backward.cuda = &cuda::max_pool2d_backward;
  k::avg_pool2d_forward.cuda = &cuda::avg_pool2d_forward;
  k::avg_pool2d_backward.cuda = &cuda::avg_pool2d_backward;
  k::adaptive_avg_pool2d_forward.cuda = &cuda::adaptive_avg_pool2d_forward;
  k::adaptive_avg_pool2d_backward.cuda = &cuda::adaptive_avg_pool2d_backward;
  k::attention_forward.cuda = &cuda::attention_forward;
  k::attention_backward.cuda = &cuda::attention_backward;
  k::linear_act_forward.cuda = &cuda::linear_act_forward;
  k::linear_act_backward.cuda = &cuda::linear_act_backward;
  k::gelu_backward.cuda = &cuda::gelu_backward;
}

}  // namespace mdl::cuda::detail
