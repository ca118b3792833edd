// The kernel table (kernels/all.h) is the one way a kernel reaches its stub: every stub in the
// process comes from the table, every one has a CPU kernel, and in a CUDA build every one not
// marked CPU_ONLY has a CUDA kernel. Also: the op-kind names come from their lists.
#include <doctest/doctest.h>

#include <set>
#include <string>

#include "cuda/api.h"
#include "kernels/all.h"
#include "tensor/device.h"

using namespace mdl;

namespace {

std::set<const kernels::StubBase*> table_set() {
  size_t n = 0;
  const kernels::StubBase* const* stubs = kernels::table_stubs(&n);
  return std::set<const kernels::StubBase*>(stubs, stubs + n);
}

}  // namespace

TEST_CASE("kernel registry: every stub in the process is an entry of the kernel table") {
  const auto table = table_set();
  CHECK(table.size() >= 40);
  for (const kernels::StubBase* s : kernels::StubBase::all()) {
    INFO("stub ", s->name);
    CHECK_MESSAGE(table.count(s) == 1, s->name, " is a Stub defined outside MDL_ALL_KERNELS");
  }
  CHECK(kernels::StubBase::all().size() == table.size());
}

TEST_CASE("kernel registry: every stub has a CPU kernel") {
  kernels::ensure_kernels_registered();
  for (const kernels::StubBase* s : table_set()) CHECK_MESSAGE(s->has_cpu(), s->name, " has no CPU kernel");
}

TEST_CASE("kernel registry: in a CUDA build every stub not marked CPU-only has a CUDA kernel" *
          doctest::skip(!cuda::compiled())) {
#ifdef MDL_WITH_CUDA
  cuda::detail::fill_kernel_slots();
#endif
  for (const kernels::StubBase* s : table_set()) {
    INFO("stub ", s->name);
    if (s->cpu_only) CHECK_MESSAGE(!s->has_cuda(), s->name, " is marked CPU-only but has a CUDA kernel");
    else CHECK_MESSAGE(s->has_cuda(), s->name, " has no CUDA kernel");
  }
}

TEST_CASE("kernel registry: the op kinds' names follow their enums") {
  CHECK(std::string(unary_op_name(UnaryOp::Neg)) == "neg");
  CHECK(std::string(unary_op_name(UnaryOp::GeluTanh)) == "gelu_tanh");
  CHECK(std::string(unary_op_name(UnaryOp::Expm1)) == "expm1");
  CHECK(std::string(binary_op_name(BinaryOp::Add)) == "add");
  CHECK(std::string(binary_op_name(BinaryOp::Ge)) == "ge");
  CHECK(std::string(reduce_op_name(ReduceOp::Prod)) == "prod");
  CHECK(is_comparison(BinaryOp::Eq));
  CHECK(!is_comparison(BinaryOp::Minimum));
}
