// How a kernel reaches the op that calls it. Each primitive is a Stub: a name and one slot per
// backend. The contract headers (kernels/*.h) list their primitives in one X-macro each,
//   X(stub name, function type, printed name, BOTH or CPU_ONLY)
// and kernels/all.h joins the lists into MDL_ALL_KERNELS. From that one table come the stubs (here),
// the backends' declarations (cpu/kernels.h, cuda/kernels.cuh) and both registration lists
// (cpu/register.cpp, cuda/register.cu), so a kernel missing from a backend is a link error.
// A slot left empty throws "<op>: no CUDA kernel in this build".
#pragma once
#include <utility>

#include "tensor/device.h"
#include "tensor/error.h"
#include "tensor/profiler_hook.h"
#include "tensor/tensor.h"

namespace mdl::kernels {

// Fills the CPU slots on first use (static-library safe: no static initialisers needed).
void ensure_kernels_registered();

// A stub is constant-initialized (constinit, no constructor code runs), so a kernel called during
// static initialization (a namespace-scope tensor in a user's program) finds its slots filled and
// keeps them: ensure_kernels_registered() fills them on first use, whenever that is.
template <class Fn>
struct Stub {
  const char* name;
  bool cpu_only = false;  // no CUDA kernel by design; the CUDA slot stays empty
  Fn* cpu = nullptr;
  Fn* cuda = nullptr;

  Fn* get(Device d) const {
    ensure_kernels_registered();
    Fn* f = d.is_cpu() ? cpu : cuda;
    MDL_CHECK(f, name, ": no ", d.is_cpu() ? "CPU" : "CUDA", " kernel in this build");
    return f;
  }
  // Runs the slot for d; an active profiler session records the call (tensor/profiler_hook.h).
  template <class... Args>
  decltype(auto) operator()(Device d, Args&&... args) const {
    Fn* f = get(d);
    if (profiler::detail::recording()) [[unlikely]] {
      using profiler::detail::kernel_arg;
      const profiler::detail::KernelArg kargs[] = {kernel_arg(args)..., {}};
      profiler::detail::KernelRange range(name, d, kargs, int(sizeof...(Args)));
      return f(std::forward<Args>(args)...);
    }
    return f(std::forward<Args>(args)...);
  }
};

}  // namespace mdl::kernels

// The table's expansions. BOTH: a CPU and a CUDA kernel; CPU_ONLY: a CPU kernel alone.
#define MDL_KERNEL_CPU_ONLY_BOTH false
#define MDL_KERNEL_CPU_ONLY_CPU_ONLY true
// In a contract header, inside namespace mdl::kernels: the stub object.
#define MDL_DEFINE_STUB(name, Fn, label, backends) \
  constinit inline Stub<Fn> name{label, MDL_KERNEL_CPU_ONLY_##backends};
// In a backend's header, inside its namespace: the kernel's declaration.
#define MDL_DECLARE_KERNEL(name, Fn, label, backends) ::mdl::kernels::Fn name;
// In a backend's registration function: the slot assignment.
#define MDL_SET_CPU_SLOT(name, Fn, label, backends) ::mdl::kernels::name.cpu = &::mdl::cpu::name;
#define MDL_SET_CUDA_SLOT(name, Fn, label, backends) MDL_SET_CUDA_SLOT_##backends(name)
#define MDL_SET_CUDA_SLOT_BOTH(name) ::mdl::kernels::name.cuda = &::mdl::cuda::name;
#define MDL_SET_CUDA_SLOT_CPU_ONLY(name)
