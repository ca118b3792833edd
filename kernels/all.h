// Every kernel contract, and MDL_ALL_KERNELS: the one table of primitives that the backends'
// declarations and registration lists are generated from (kernels/stub.h explains the entries).
#pragma once
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

// The table's stubs, in table order (the registry test compares them with StubBase::all()).
inline const StubBase* const* table_stubs(size_t* count) {
#define MDL_STUB_ADDRESS(name, Fn, label, backends) &name,
  static const StubBase* const stubs[] = {MDL_ALL_KERNELS(MDL_STUB_ADDRESS)};
#undef MDL_STUB_ADDRESS
  *count = sizeof(stubs) / sizeof(stubs[0]);
  return stubs;
}

}  // namespace mdl::kernels
