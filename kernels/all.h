// Every kernel contract, and MDL_ALL_KERNELS: the one table of primitives that the backends'
// declarations and registration lists are generated from (kernels/stub.h explains the entries).
#pragma once
#include <vector>

#include "kernels/amp.h"
#include "kernels/attention.h"
#include "kernels/conv.h"
#include "kernels/core.h"
#include "kernels/dropout.h"
#include "kernels/gelu.h"
#include "kernels/linear_act.h"
#include "kernels/loss.h"
#include "kernels/norm.h"
#include "kernels/optim.h"
#include "kernels/pool.h"

// clang-format off
#define MDL_ALL_KERNELS(X)  \
  MDL_CORE_KERNELS(X)       \
  MDL_CONV_KERNELS(X)       \
  MDL_POOL_KERNELS(X)       \
  MDL_NORM_KERNELS(X)       \
  MDL_DROPOUT_KERNELS(X)    \
  MDL_LOSS_KERNELS(X)       \
  MDL_ATTENTION_KERNELS(X)  \
  MDL_LINEAR_ACT_KERNELS(X) \
  MDL_GELU_KERNELS(X)       \
  MDL_OPTIM_KERNELS(X)      \
  MDL_AMP_KERNELS(X)
// clang-format on

namespace mdl::kernels {

// One line per table entry, in table order, whatever its function type: for the registry test
// and the kernel-coverage test.
struct StubInfo {
  const char* name;
  bool cpu_only;
  bool (*has_cpu)();
  bool (*has_cuda)();
};
inline std::vector<StubInfo> table_stubs() {
#define MDL_STUB_INFO(stub, Fn, label, backends)                                      \
  StubInfo{label, MDL_KERNEL_CPU_ONLY_##backends, [] { return stub.cpu != nullptr; }, \
           [] { return stub.cuda != nullptr; }},
  return {MDL_ALL_KERNELS(MDL_STUB_INFO)};
#undef MDL_STUB_INFO
}

}  // namespace mdl::kernels
