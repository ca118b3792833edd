// Puts the CPU kernels into the stubs' CPU slots, once.
#include <mutex>

#include "tensor/cpu/cpu_kernels.h"
#include "tensor/kernels_amp.h"
#include "tensor/kernels_attention.h"
#include "tensor/kernels_conv.h"
#include "tensor/kernels_norm.h"
#include "tensor/kernels_optim.h"

namespace mdl::kernels {

void ensure_kernels_registered() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_norm_kernels();
    register_attention_kernels();
    register_conv_kernels();
    register_optim_kernels();
    register_amp_kernels();
    fill.cpu = &cpu::fill;
    copy.cpu = &cpu::copy;
    unary.cpu = &cpu::unary;
    binary.cpu = &cpu::binary;
    where.cpu = &cpu::where;
    reduce.cpu = &cpu::reduce;
    arg_reduce.cpu = &cpu::arg_reduce;
    var.cpu = &cpu::var;
    softmax.cpu = &cpu::softmax;
    softmax_backward.cpu = &cpu::softmax_backward;
    bmm.cpu = &cpu::bmm;
    index_select.cpu = &cpu::index_select;
    gather.cpu = &cpu::gather;
    scatter_add.cpu = &cpu::scatter_add;
    index_add.cpu = &cpu::index_add;
    tri.cpu = &cpu::tri;
  });
}

}  // namespace mdl::kernels
